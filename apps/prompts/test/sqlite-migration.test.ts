import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { newId } from '@pm/kit'
import { afterEach, describe, expect, it } from 'vitest'
import { SqlitePromptStore } from '../src/store/sqlite.ts'

/** The tables as they were before chat prompts (DESIGN section 9), with one prompt and its version. */
function oldDatabase(file: string, ids: { org: string; prompt: string; version: string }): void {
  const db = new DatabaseSync(file)
  db.exec(`CREATE TABLE prompts (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, name TEXT NOT NULL, slug TEXT NOT NULL,
    description TEXT NOT NULL, tags TEXT NOT NULL, template TEXT NOT NULL, variables TEXT NOT NULL,
    is_public INTEGER NOT NULL, version_count INTEGER NOT NULL, current_version_id TEXT,
    forked_from_version_id TEXT, environments TEXT NOT NULL, created_by TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (organization_id, slug))`)
  db.exec(`CREATE TABLE versions (
    id TEXT PRIMARY KEY, prompt_id TEXT NOT NULL, organization_id TEXT NOT NULL, version INTEGER NOT NULL,
    status TEXT NOT NULL, published_at TEXT NOT NULL, template TEXT NOT NULL, variables TEXT NOT NULL,
    created_by TEXT NOT NULL, change_log TEXT NOT NULL, UNIQUE (prompt_id, version))`)
  const at = '2026-01-01T00:00:00.000Z'
  db.prepare('INSERT INTO prompts VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').run(
    ids.prompt,
    ids.org,
    'Old',
    'old',
    '',
    '[]',
    'Hi {{name}}',
    '[{"name":"name","required":true}]',
    0,
    1,
    ids.version,
    null,
    '{"preview":null,"production":null}',
    newId(),
    at,
    at,
  )
  db.prepare('INSERT INTO versions VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)').run(
    ids.version,
    ids.prompt,
    ids.org,
    1,
    'PUBLISHED',
    at,
    'Hi {{name}}',
    '[{"name":"name","required":true}]',
    '{"_id":"aaaaaaaaaaaaaaaaaaaaaaaa"}',
    'first',
  )
  db.close()
}

describe('SQLite prompts store: migration of a database from before chat prompts', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  it('reads old prompts and versions as text prompts without config, and keeps writing them', async () => {
    const dir = mkdtempSync(join(tmpdir(), 'pm-migrate-'))
    dirs.push(dir)
    const file = join(dir, 'prompts.db')
    const ids = { org: newId(), prompt: newId(), version: newId() }
    oldDatabase(file, ids)

    const store = new SqlitePromptStore(file)
    const prompt = await store.getPrompt(ids.org, ids.prompt)
    expect(prompt).toMatchObject({ type: 'text', template: 'Hi {{name}}', slug: 'old' })
    expect(prompt).not.toHaveProperty('messages')
    expect(prompt).not.toHaveProperty('config')
    const version = await store.getVersion(ids.prompt, ids.version)
    expect(version).toMatchObject({ type: 'text', template: 'Hi {{name}}', changeLog: 'first' })
    expect(version).not.toHaveProperty('config')
    const updated = await store.updatePrompt(ids.org, ids.prompt, {
      config: { model: 'x' },
      updatedAt: new Date().toISOString(),
    })
    expect(updated).toMatchObject({ type: 'text', config: { model: 'x' } })
    await store.close()

    // Opening it again applies nothing twice.
    const again = new SqlitePromptStore(file)
    expect(await again.getPrompt(ids.org, ids.prompt)).toMatchObject({ config: { model: 'x' } })
    await again.close()
    const db = new DatabaseSync(file)
    // Every migration applied once: 1 (chat prompts and config), 2 (resumable imports), 3 (the outbox's trace context).
    expect(db.prepare('PRAGMA user_version').get()).toEqual({ user_version: 4 })
    db.close()
  })
})
