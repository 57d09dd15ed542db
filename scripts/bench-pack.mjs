#!/usr/bin/env node
/**
 * Bundles the benchmarks and every process they start into single ESM files, so that they run on
 * a machine with a Node 24 binary and nothing else (no node_modules, no network): a benchmark
 * host lent for a short while, say. Each entry `x/y.ts` becomes `<out>/x/y.mjs` (code shared by
 * several entries goes to `<out>/bench/chunks/`, at the same depth, so that @pm/testkit's
 * REPO_ROOT, `../../../` from the module, is still the repository's root when <out> sits in it).
 * With PM_BENCH_BUNDLED=<out> the benches start the bundled children (bench/src/processes.ts).
 *
 *   node scripts/bench-pack.mjs [--out .benchpack] [--template-at <commit>]
 *
 * --template-at <commit>: also bundles that commit's packages/template (with its @pm/contracts)
 * to <out>/at-<commit>/packages/template/src/index.ts (JavaScript, named as `bench/src/render.ts
 * --main <checkout>` imports it), for `render.mjs --main <out>/at-<commit>`.
 *
 * Left out (external): Node's built-ins and optional native or cloud dependencies that the
 * embedded default on SQLite never loads. bench/README.md, "Bundled", says how to run them.
 */
import { execFileSync } from 'node:child_process'
import { mkdirSync, readdirSync, realpathSync, renameSync, rmSync, statSync } from 'node:fs'
import { createRequire } from 'node:module'
import { builtinModules } from 'node:module'
import { dirname, join, relative } from 'node:path'
import { fileURLToPath, pathToFileURL } from 'node:url'
import { parseArgs } from 'node:util'

const ROOT = fileURLToPath(new URL('../', import.meta.url))
const { values: args } = parseArgs({
  options: {
    out: { type: 'string', default: '.benchpack' },
    'template-at': { type: 'string' },
  },
})
const out = join(ROOT, args.out)

// rolldown comes with tsdown, the client's build tool.
const fromClient = createRequire(realpathSync(join(ROOT, 'packages/client/node_modules/tsdown/package.json')))
const { build } = await import(pathToFileURL(fromClient.resolve('rolldown')).href)

const ENTRIES = [
  'bench/src/invoke.ts',
  'bench/src/run.ts',
  'bench/src/render.ts',
  'bench/src/tracing-cost.ts',
  'bench/src/bare.ts',
  'bench/src/bareRun.ts',
  'bench/src/load.ts',
  'bench/src/fakeServer.ts',
  'apps/embedded/src/main.ts',
]

/** Optional peers of the MongoDB driver, the OpenTelemetry and cloud SDKs: never loaded here. */
const OPTIONAL = [
  'kerberos',
  'snappy',
  'aws4',
  'mongodb-client-encryption',
  '@mongodb-js/zstd',
  '@aws-sdk/credential-providers',
  'gcp-metadata',
  'socks',
  'bufferutil',
  'utf-8-validate',
  'pino-pretty',
]
const builtins = new Set([...builtinModules, ...builtinModules.map((m) => `node:${m}`)])
const external = (id) =>
  builtins.has(id) || id.startsWith('node:') || OPTIONAL.some((m) => id === m || id.startsWith(`${m}/`))

const common = {
  platform: 'node',
  external,
  resolve: { conditionNames: ['source', 'node', 'import', 'module', 'default'] },
  logLevel: 'warn',
  // hdr-histogram-js (autocannon) evals `require("zlib")` for a histogram encoding the bench never uses.
  onLog: (level, log, handler) => {
    if (log.code !== 'EVAL') handler(level, log)
  },
}

rmSync(out, { recursive: true, force: true })
await build({
  ...common,
  cwd: ROOT,
  input: Object.fromEntries(ENTRIES.map((e) => [e.replace(/\.ts$/, ''), join(ROOT, e)])),
  // The benches take REPO_ROOT and freePort from @pm/testkit; its index would bring testcontainers.
  resolve: {
    ...common.resolve,
    alias: { '@pm/testkit': join(ROOT, 'packages/testkit/src/processes.ts') },
  },
  output: {
    dir: out,
    format: 'esm',
    entryFileNames: '[name].mjs',
    chunkFileNames: 'bench/chunks/[name]-[hash].mjs',
    minify: false,
    sourcemap: false,
  },
})

const at = args['template-at']
if (at) {
  // That commit's template and contracts packages, bundled together; other dependencies from here.
  const src = join(ROOT, '.bench-pack-tmp', at)
  rmSync(src, { recursive: true, force: true })
  mkdirSync(src, { recursive: true })
  const tar = execFileSync('git', [
    '-C',
    ROOT,
    'archive',
    at,
    'packages/template/src',
    'packages/contracts/src',
  ])
  execFileSync('tar', ['-x', '-C', src], { input: tar })
  const dest = join(out, `at-${at}`, 'packages/template/src')
  await build({
    ...common,
    cwd: ROOT,
    input: join(src, 'packages/template/src/index.ts'),
    resolve: {
      ...common.resolve,
      alias: { '@pm/contracts': join(src, 'packages/contracts/src/index.ts') },
      modules: [join(ROOT, 'packages/contracts/node_modules'), join(ROOT, 'node_modules')],
    },
    output: { dir: dest, format: 'esm', entryFileNames: 'index.mjs', codeSplitting: false },
  })
  renameSync(join(dest, 'index.mjs'), join(dest, 'index.ts'))
  rmSync(join(ROOT, '.bench-pack-tmp'), { recursive: true, force: true })
}

let total = 0
const walk = (dir) => {
  for (const name of readdirSync(dir)) {
    const path = join(dir, name)
    const st = statSync(path)
    if (st.isDirectory()) walk(path)
    else {
      total += st.size
      if (!dirname(path).endsWith('chunks'))
        console.log(`${relative(ROOT, path)} ${(st.size / 1024).toFixed(0)} KiB`)
    }
  }
}
walk(out)
console.log(`${relative(ROOT, out)}: ${(total / 1024 / 1024).toFixed(1)} MiB in all`)
