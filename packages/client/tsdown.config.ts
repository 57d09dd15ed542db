import { defineConfig } from 'tsdown'

/**
 * The published build: ESM and one self-contained declaration file. The workspace packages
 * (@pm/contracts, @pm/template) are bundled into both, so the tarball depends only on
 * registry packages (@sinclair/typebox, whose types the route catalogue is written in).
 */
export default defineConfig({
  entry: ['src/index.ts'],
  format: 'esm',
  platform: 'node',
  target: 'node20',
  outDir: 'dist',
  clean: true,
  sourcemap: true,
  fixedExtension: false,
  inputOptions: { resolve: { conditionNames: ['source', 'import', 'default'] } },
  deps: { alwaysBundle: [/^@pm\//], dts: { alwaysBundle: [/^@pm\//] } },
  dts: { resolver: 'tsc', eager: true, compilerOptions: { noEmit: false } },
})
