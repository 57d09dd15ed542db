/**
 * Bundles the entry points the tests start as child processes (packages/testkit/src/bundles.ts)
 * into `process.argv[2]`: one rolldown build, an ES module a service and chunks they share.
 * Run as its own process: `node packages/testkit/src/bundleServices.ts <outDir>`.
 */
import { pathToFileURL } from 'node:url'
import { build, type Plugin } from 'rolldown'
import { BUNDLED } from './bundles.ts'

const outDir = process.argv[2]
if (!outDir) throw new Error('usage: bundleServices.ts <outDir>')

/**
 * `import.meta.resolve(x)` resolves from the module it is written in (the gateway finds the
 * dashboard's and the API reference's files that way); in a bundle that module's place is the
 * bundle's, so each call is given its source file as the parent (Node's
 * --experimental-import-meta-resolve, which bundles.ts passes).
 */
const keepResolveParent: Plugin = {
  name: 'pm-import-meta-resolve-parent',
  transform(code, id) {
    if (!code.includes('import.meta.resolve(')) return null
    const parent = JSON.stringify(pathToFileURL(id).href)
    return {
      code: code.replaceAll(
        'import.meta.resolve(',
        `((specifier) => import.meta.resolve(specifier, ${parent}))(`,
      ),
      map: null,
    }
  },
}

await build({
  input: Object.fromEntries(BUNDLED.map(({ name, entry }) => [name, entry])),
  platform: 'node',
  // Workspace packages as the tests run them: their TypeScript sources.
  resolve: { conditionNames: ['source', 'import', 'node', 'default'] },
  // Loaded only with a store on MongoDB, never in these tests; left to Node, as its optional
  // native add-ons are.
  external: [/^mongodb($|\/)/],
  plugins: [keepResolveParent],
  logLevel: 'silent',
  output: { dir: outDir, format: 'esm', entryFileNames: '[name].mjs', chunkFileNames: 'chunk-[hash].mjs' },
})
