// Adds up the JSON reports the vitest runs wrote (<package>/.test-results/*.json) and
// prints one closing line: "Tests: N passed, N failed, N skipped".
import { readdirSync, readFileSync, existsSync } from 'node:fs'
import { join } from 'node:path'

const root = new URL('..', import.meta.url).pathname
let passed = 0
let failed = 0
let skipped = 0
for (const group of ['apps', 'packages', 'clients', '.']) {
  const dirs = group === '.' ? ['e2e', 'bench'] : readdirSync(join(root, group)).map((d) => join(group, d))
  for (const dir of dirs) {
    const results = join(root, dir, '.test-results')
    if (!existsSync(results)) continue
    for (const file of readdirSync(results)) {
      if (!file.endsWith('.json')) continue
      const report = JSON.parse(readFileSync(join(results, file), 'utf8'))
      passed += report.numPassedTests ?? 0
      failed += report.numFailedTests ?? 0
      skipped += (report.numPendingTests ?? 0) + (report.numTodoTests ?? 0)
    }
  }
}
console.log(`Tests: ${passed} passed, ${failed} failed, ${skipped} skipped`)
process.exit(failed > 0 || passed === 0 ? 1 : 0)
