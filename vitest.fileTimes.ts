import { mkdirSync, writeFileSync } from 'node:fs'
import { dirname } from 'node:path'
import type { Reporter, TestModule } from 'vitest/node'

/**
 * Writes each test file's seconds, its import, beforeAll/afterAll and other hooks included, for
 * scripts/test-summary.mjs. Vitest's JSON report times a file by its tests only: a file that
 * spends its time in beforeAll (packing a tarball, starting a stack) looked quick there.
 */
export class FileTimes implements Reporter {
  private readonly outputFile: string

  constructor(outputFile: string) {
    this.outputFile = outputFile
  }

  onTestRunEnd(testModules: ReadonlyArray<TestModule>): void {
    const files = testModules.map((m) => {
      const d = m.diagnostic()
      return { name: m.moduleId, seconds: (d.setupDuration + d.collectDuration + d.duration) / 1000 }
    })
    mkdirSync(dirname(this.outputFile), { recursive: true })
    writeFileSync(this.outputFile, `${JSON.stringify(files, null, 2)}\n`)
  }
}
