// Adds up the JSON reports the vitest runs wrote (<package>/.test-results/*.json) and prints
// the slowest test files (top 10, with seconds, hooks and import included: vitest.fileTimes.ts),
// the total time of `npm test` (PM_TEST_STARTED, set by scripts/run.sh) and one closing line:
// "Tests: N passed, N failed, N skipped".
import { existsSync, readdirSync, readFileSync } from 'node:fs'
import { join, relative } from 'node:path'

const root = new URL('..', import.meta.url).pathname
let passed = 0
let failed = 0
let skipped = 0
/** Every test file run: its path from the root, the report it came from and its seconds. */
const files = []
for (const group of ['apps', 'packages', 'clients', 'infra', '.']) {
  if (!existsSync(join(root, group))) continue
  const dirs =
    group === '.' ? ['.', 'e2e', 'bench'] : readdirSync(join(root, group)).map((d) => join(group, d))
  for (const dir of dirs) {
    const results = join(root, dir, '.test-results')
    if (!existsSync(results)) continue
    for (const file of readdirSync(results)) {
      if (!file.endsWith('.json') || file.endsWith('.files.json')) continue
      const report = JSON.parse(readFileSync(join(results, file), 'utf8'))
      const kind = file.replace(/\.json$/, '')
      // Each file's time with its hooks (vitest.fileTimes.ts); the JSON report's counts only
      // its tests, the fallback for a report written without it.
      const timesFile = join(results, `${kind}.files.json`)
      const times = existsSync(timesFile)
        ? new Map(JSON.parse(readFileSync(timesFile, 'utf8')).map((f) => [f.name, f.seconds]))
        : new Map()
      passed += report.numPassedTests ?? 0
      failed += report.numFailedTests ?? 0
      skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0)
      for (const result of report.testResults ?? []) {
        const seconds =
          times.get(result.name) ??
          (typeof result.startTime === 'number' && typeof result.endTime === 'number'
            ? (result.endTime - result.startTime) / 1000
            : undefined)
        if (seconds === undefined) continue
        files.push({ name: relative(root, result.name), kind, seconds })
      }
    }
  }
}

const slowest = files.sort((a, b) => b.seconds - a.seconds).slice(0, 10)
if (slowest.length > 0) {
  console.log(`Slowest test files (of ${files.length}):`)
  for (const f of slowest) console.log(`  ${f.seconds.toFixed(1).padStart(6)} s  ${f.name} (${f.kind})`)
}
const started = Number(process.env.PM_TEST_STARTED)
if (Number.isFinite(started) && started > 0) {
  const total = Math.max(0, Math.round(Date.now() / 1000 - started))
  console.log(`Total time: ${Math.floor(total / 60)} min ${total % 60} s`)
}
console.log(`Tests: ${passed} passed, ${failed} failed, ${skipped} skipped`)
process.exit(failed > 0 || passed === 0 ? 1 : 0)
