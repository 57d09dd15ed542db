import { defineConfig } from 'tsdown'

/**
 * The published `pm`: ESM, the workspace packages (@pm/client, @pm/contracts, @pm/identity
 * and what it uses) bundled in, registry packages left as dependencies. `init` stays a
 * chunk of its own, loaded only by that command.
 */
export default defineConfig({
  entry: ['src/main.ts', 'src/cli.ts'],
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outDir: 'dist',
  clean: true,
  fixedExtension: false,
  dts: false,
  inputOptions: { resolve: { conditionNames: ['source', 'import', 'default'] } },
  deps: { alwaysBundle: [/^@pm\//] },
})
