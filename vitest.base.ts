import { fileURLToPath } from 'node:url'
import { defineConfig } from 'vitest/config'
import { privateServersAvailable } from './packages/testkit/src/privateServers.ts'
import { FileTimes } from './vitest.fileTimes.ts'

/** An integration run (`VITEST_INT=1`): the `*.int.test.ts` files, longer bounds, private servers. */
export const integration = process.env.VITEST_INT === '1'

/** TEST_INT_CONCURRENCY when it is a whole number from 1 to 16, else 4. */
function intConcurrency(): number {
  const n = Number(process.env.TEST_INT_CONCURRENCY)
  return Number.isInteger(n) && n >= 1 && n <= 16 ? n : 4
}

// Shared by every package's vitest.config.ts. Workspace packages export their TypeScript
// sources under the "source" condition; tests resolve them directly, without a build.
// Each run also writes a JSON report and each file's time (hooks included) that
// scripts/test-summary.mjs adds up.
export default defineConfig({
  resolve: { conditions: ['source'] },
  ssr: { resolve: { conditions: ['source'] } },
  test: {
    // An integration run takes the `*.int.test.ts` files only, whatever filter it is given; the
    // unit run everything else.
    include: integration
      ? ['src/**/*.int.test.ts', 'test/**/*.int.test.ts']
      : ['src/**/*.test.ts', 'test/**/*.test.ts'],
    exclude: ['**/node_modules/**', '**/dist/**', ...(integration ? [] : ['**/*.int.test.ts'])],
    // Test files share their worker's module cache instead of importing everything again each
    // (vitest's `isolate`): importing took more of the suite's CPU than most tests did. Files
    // must not lean on module state another file left (docs/decisions.md, "Test files share
    // their worker's modules").
    isolate: false,
    execArgv: ['--conditions=source', '--disable-warning=ExperimentalWarning'],
    experimental: { viteModuleRunner: false, nodeLoader: false },
    // Integration tests run three packages and three e2e files at a time on two cores (npm test):
    // a test that takes 15-20 s alone can pass 30 s there, and on the slow 2-core machines (twice
    // the CPU for the same work) over 100 s. The bound only catches a hang.
    testTimeout: integration ? 180_000 : 30_000,
    // Integration files at a time: four (TEST_INT_CONCURRENCY) when each gets NATS and Redis of
    // its own (PM_TEST_PRIVATE_SERVERS=1, `npm test`; packages/testkit/src/privateServers.ts), as
    // much of their time is spent waiting on the processes they start; else one, on the shared
    // servers. The same for every package, which one Vitest run of them all (vitest.config.ts)
    // requires.
    ...(integration ? { maxWorkers: privateServersAvailable() ? intConcurrency() : 1 } : {}),
    hookTimeout: integration ? 120_000 : 60_000,
    // A longer default bound for vi.waitFor (see the file).
    // Integration files: each also gets private servers of its own again (vitest.setup.int.ts).
    setupFiles: [
      fileURLToPath(new URL('./vitest.setup.ts', import.meta.url)),
      ...(integration ? [fileURLToPath(new URL('./vitest.setup.int.ts', import.meta.url))] : []),
    ],
    reporters: [
      'default',
      ['json', { outputFile: `.test-results/${integration ? 'int' : 'unit'}.json` }],
      new FileTimes(`.test-results/${integration ? 'int' : 'unit'}.files.json`),
    ],
  },
})
