import { mkdtempSync, readdirSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { ensurePrivateDir } from './privateFiles.ts'
import { closeSqlite, HOLDERS_DIR, openSqlite } from './sqlite.ts'

const mode = (path: string) => statSync(path).mode & 0o777

describe('files at rest', () => {
  let umask: number
  beforeEach(() => {
    umask = process.umask(0o022)
  })
  afterEach(() => {
    process.umask(umask)
  })

  it('opens a store 0600 (with its -wal and -shm) in a 0700 folder under umask 022', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'pm-private-')), 'data')
    const file = join(dir, 'store.db')
    const db = openSqlite(file, ['CREATE TABLE t (v TEXT)'])
    try {
      db.prepare('INSERT INTO t (v) VALUES (?)').run('x')
      expect(mode(dir)).toBe(0o700)
      expect(mode(join(dir, HOLDERS_DIR))).toBe(0o700)
      for (const name of ['store.db', 'store.db-wal', 'store.db-shm'])
        expect(mode(join(dir, name)), name).toBe(0o600)
      for (const name of readdirSync(join(dir, HOLDERS_DIR)))
        expect(mode(join(dir, HOLDERS_DIR, name)), name).toBe(0o600)
    } finally {
      closeSqlite(db)
    }
  })
})

describe('ensurePrivateDir', () => {
  it.skipIf((statSync(tmpdir()).mode & 0o1000) === 0)(
    'leaves a shared sticky folder (like /tmp) as it is',
    () => {
      const before = statSync(tmpdir()).mode & 0o7777
      ensurePrivateDir(tmpdir())
      expect(statSync(tmpdir()).mode & 0o7777).toBe(before)
    },
  )
})
