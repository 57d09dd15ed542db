import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { newId } from '@pm/kit'
import { afterEach, describe, expect, it } from 'vitest'
import { SqlitePromptStore } from '../src/store/sqlite.ts'

let dir: string | undefined
afterEach(() => {
  if (dir) rmSync(dir, { recursive: true, force: true })
  dir = undefined
})

describe('a prompts.db written before resumable imports', () => {
  it('gains the new batch columns at start, and its unfinished batch can be taken (and has no file)', async () => {
    dir = mkdtempSync(join(tmpdir(), 'pm-upgrade-'))
    const file = join(dir, 'prompts.db')
    const old = new DatabaseSync(file)
    old.exec(`CREATE TABLE import_batches (
      id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, created_by TEXT NOT NULL, status TEXT NOT NULL,
      total INTEGER NOT NULL, created INTEGER NOT NULL, failed INTEGER NOT NULL, errors TEXT NOT NULL,
      created_at TEXT NOT NULL, updated_at TEXT NOT NULL, finished_at TEXT)`)
    const id = newId()
    const org = newId()
    const at = new Date(Date.now() - 60_000).toISOString()
    old
      .prepare('INSERT INTO import_batches VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)')
      .run(id, org, newId(), 'processing', 10, 4, 0, '[]', at, at, null)
    old.close()

    const store = new SqlitePromptStore(file)
    try {
      expect(await store.getBatch(org, id)).toMatchObject({
        status: 'processing',
        created: 4,
        position: 0,
        resumedAt: null,
        contentHash: null,
        idempotencyKey: null,
        leaseOwner: null,
        leaseUntil: null,
      })
      const now = new Date().toISOString()
      expect(await store.claimBatch('me', now, now)).toMatchObject({ _id: id, leaseOwner: 'me' })
      // The importer ends such a batch as failed: the old version kept no file to resume from.
      expect(await store.getImportFile(id)).toBeNull()
      await store.finishBatch(id, 'me', 'failed', now)
      expect(await store.getBatch(org, id)).toMatchObject({ status: 'failed', created: 4 })
    } finally {
      await store.close()
    }
    // Opening it again changes nothing more.
    const again = new SqlitePromptStore(file)
    await again.close()
  })
})
