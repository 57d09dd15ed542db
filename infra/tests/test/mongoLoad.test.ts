import { execFile } from 'node:child_process'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const run = promisify(execFile)

/**
 * A service on SQLite never loads the MongoDB driver (docs/decisions.md, "The MongoDB driver
 * loads only with a store on MongoDB"): the embedded default, which imports every service,
 * opens its stores on SQLite with none of the driver's modules loaded; `@pm/kit/mongo` then
 * loads them (the check can fail). In a process of its own: this worker's other test files may
 * have loaded the driver already.
 */
describe('the MongoDB driver', () => {
  it('is not loaded by the services on SQLite, only by @pm/kit/mongo', async () => {
    const script = `
      import { mkdtempSync, rmSync } from 'node:fs'
      import { createRequire } from 'node:module'
      import { tmpdir } from 'node:os'
      import { join } from 'node:path'
      const cache = createRequire(import.meta.url).cache
      const driver = () => Object.keys(cache).filter((k) => k.includes('/node_modules/mongodb/')).length
      await import('./src/embedded.ts')
      const { openPromptStore } = await import('@pm/prompts')
      const dir = mkdtempSync(join(tmpdir(), 'pm-mongo-load-'))
      const store = await openPromptStore({ DATA_DIR: dir })
      const onSqlite = driver()
      await store.close()
      rmSync(dir, { recursive: true, force: true })
      await import('@pm/kit/mongo')
      console.log(JSON.stringify({ onSqlite, withKitMongo: driver() }))
    `
    const { stdout } = await run(
      process.execPath,
      ['--conditions=source', '--disable-warning=ExperimentalWarning', '--input-type=module', '-e', script],
      { cwd: join(ROOT, 'apps/embedded'), timeout: 60_000 },
    )
    const loaded = JSON.parse(stdout.trim().split('\n').at(-1) ?? '{}') as {
      onSqlite: number
      withKitMongo: number
    }
    expect(loaded.onSqlite).toBe(0)
    expect(loaded.withKitMongo).toBeGreaterThan(0)
  })
})
