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
  // The declarations come from one TypeScript program whose roots are every module bundled
  // (this package's and the workspace packages' sources): a module that is not a root of it
  // (reached through node_modules/@pm/...) gets no declaration from that program, and
  // rolldown-plugin-dts then builds a whole new program for it. With only src/ as roots that
  // was about 35 programs, each checking the route catalogue again: 90 s of CPU and a 12 GB
  // heap, against 13 s and 0.7 GB with one.
  tsconfig: 'tsconfig.build.json',
  clean: true,
  sourcemap: true,
  fixedExtension: false,
  inputOptions: { resolve: { conditionNames: ['source', 'import', 'default'] } },
  deps: { alwaysBundle: [/^@pm\//], dts: { alwaysBundle: [/^@pm\//] } },
  dts: { resolver: 'tsc', eager: true, compilerOptions: { noEmit: false } },
})
