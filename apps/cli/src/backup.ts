import { createHash } from 'node:crypto'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  readFileSync,
  renameSync,
  rmSync,
  statSync,
  writeFileSync,
} from 'node:fs'
import { dirname, join } from 'node:path'
import { backup, DatabaseSync } from 'node:sqlite'
import { ensurePrivateDir, ensurePrivateFile, SECRET_KEY_FILE, sqliteHolders } from '@pm/kit'

/**
 * The embedded default's SQLite stores under DATA_DIR (each service opens its own; the services'
 * sources name them, and test/backup.test.ts fails when this list and theirs disagree).
 */
export const STORE_FILES = ['identity.db', 'prompts.db', 'webhooks.db', 'runs.db', 'experiments.db'] as const
/**
 * Also in a backup when present: the embedded default's key file, without which the sealed
 * secrets of webhooks.db and runs.db (webhook secrets, provider keys) do not open after a restore.
 */
export const KEY_FILE = SECRET_KEY_FILE
type StoreFile = (typeof STORE_FILES)[number] | typeof KEY_FILE
const BACKED_UP: readonly string[] = [...STORE_FILES, KEY_FILE]

const FORMAT = 'pm-backup/1'

export interface BackedUpStore {
  name: StoreFile
  bytes: number
  sha256: string
}

export interface BackupResult {
  file: string
  createdAt: string
  stores: BackedUpStore[]
}

const sha256 = (data: Uint8Array) => createHash('sha256').update(data).digest('hex')

/**
 * Where a backup to `out` is put together: a 0700 folder beside it holding the store copies and
 * the bundle (`partial`) until it is renamed to `out`. Beside the output, not in the shared temp
 * folder: the copies hold password hashes and sealed secrets, and leftovers of a killed run are
 * where the operator looks and where the next backup to `out` removes them. `${out}.partial` is
 * where versions before this one wrote the bundle.
 */
export function stagingPaths(out: string): { dir: string; partial: string; legacyPartial: string } {
  const dir = `${out}.staging`
  return { dir, partial: join(dir, 'backup.partial'), legacyPartial: `${out}.partial` }
}

/** The part of `process` that onInterrupt uses (a fake one in tests). */
export interface SignalTarget {
  pid: number
  once(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown
  off(signal: NodeJS.Signals, listener: (signal: NodeJS.Signals) => void): unknown
  kill(pid: number, signal: NodeJS.Signals): unknown
}

/**
 * Runs `cleanup` when SIGINT or SIGTERM arrives, then raises the signal again with the listener
 * gone, so the process ends as that signal would have ended it (exit status 130 / 143 in a
 * shell). Answers the function that stops listening.
 */
export function onInterrupt(cleanup: () => void, target: SignalTarget = process): () => void {
  const signals: NodeJS.Signals[] = ['SIGINT', 'SIGTERM']
  const stop = () => {
    for (const signal of signals) target.off(signal, listener)
  }
  const listener = (signal: NodeJS.Signals) => {
    stop()
    try {
      cleanup()
    } finally {
      target.kill(target.pid, signal)
    }
  }
  for (const signal of signals) target.once(signal, listener)
  return stop
}

/**
 * A consistent online copy of each store, taken with SQLite's online backup API (node:sqlite's
 * `backup`, i.e. sqlite3_backup_* of the SQLite built into Node) while the service keeps
 * writing: each copy is one snapshot of its database. The copies go into one file, itself a
 * SQLite database (`files(name, sha256, bytes, content)` and `meta(key, value)`), put together
 * in a private folder beside `out` (stagingPaths) and renamed into place, so a crash never
 * leaves a half-written backup; SIGINT and SIGTERM remove the folder before the process ends,
 * and the next backup to `out` removes what a harder kill left.
 */
export async function backupStores(
  dataDir: string,
  out: string,
  opts: { signals?: SignalTarget } = {},
): Promise<BackupResult> {
  const present = STORE_FILES.filter((name) => existsSync(join(dataDir, name)))
  if (present.length === 0) throw new Error(`no store under ${dataDir} (${STORE_FILES.join(', ')})`)
  const { dir: work, partial, legacyPartial } = stagingPaths(out)
  const removeStaging = () => {
    rmSync(work, { recursive: true, force: true, maxRetries: 3 })
    rmSync(legacyPartial, { force: true })
  }
  // A new folder for `out` is private; an existing one (the operator's) is left as it is.
  mkdirSync(dirname(out), { recursive: true, mode: 0o700 })
  // Leftovers of an earlier run that was killed.
  removeStaging()
  const stopListening = onInterrupt(removeStaging, opts.signals)
  const createdAt = new Date().toISOString()
  try {
    ensurePrivateDir(work)
    const stores: BackedUpStore[] = []
    const copies: Array<{ name: StoreFile; data: Uint8Array }> = []
    for (const name of present) {
      const copy = join(work, name)
      // 0600 before SQLite writes into it (it would create it 0644).
      ensurePrivateFile(copy)
      const source = new DatabaseSync(join(dataDir, name), { readOnly: true })
      try {
        // All pages in one step (the largest batch node:sqlite takes): one WAL read
        // transaction, so writers are not held up, and no restart when a writer commits
        // mid-copy (as batches of pages would have).
        await backup(source, copy, { rate: 0x7fffffff })
      } finally {
        source.close()
      }
      check(copy, name)
      const data = readFileSync(copy)
      copies.push({ name, data })
      stores.push({ name, bytes: data.length, sha256: sha256(data) })
    }
    const keyFile = join(dataDir, KEY_FILE)
    if (existsSync(keyFile)) {
      const data = readFileSync(keyFile)
      copies.push({ name: KEY_FILE, data })
      stores.push({ name: KEY_FILE, bytes: data.length, sha256: sha256(data) })
    }
    // The backup holds the stores and the key: 0600 before SQLite writes a byte into it (SQLite
    // would create it 0644, and its journal takes its mode).
    ensurePrivateFile(partial)
    const bundle = new DatabaseSync(partial)
    try {
      bundle.exec(`
        CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
        CREATE TABLE files (name TEXT PRIMARY KEY, sha256 TEXT NOT NULL, bytes INTEGER NOT NULL, content BLOB NOT NULL);
      `)
      const meta = bundle.prepare('INSERT INTO meta (key, value) VALUES (?, ?)')
      meta.run('format', FORMAT)
      meta.run('createdAt', createdAt)
      const insert = bundle.prepare('INSERT INTO files (name, sha256, bytes, content) VALUES (?, ?, ?, ?)')
      for (const { name, data } of copies) insert.run(name, sha256(data), data.length, data)
    } finally {
      bundle.close()
    }
    renameSync(partial, out)
    return { file: out, createdAt, stores }
  } finally {
    stopListening()
    removeStaging()
  }
}

/** Throws unless the file holds at least one key line (the first seals). */
function checkKeyFile(file: string): void {
  if (!readFileSync(file, 'utf8').trim()) throw new RestoreRefused(`${KEY_FILE} in the backup is empty`)
}

/**
 * The -wal and -shm that opening a copy of a WAL-mode store creates (the check's read-only
 * connection cannot remove them when it closes). Nothing wrote through them: the copy's pages
 * are all in the file itself, so they hold nothing to keep.
 */
function removeSidecars(file: string): void {
  for (const suffix of ['-wal', '-shm']) rmSync(`${file}${suffix}`, { force: true })
}

/** Throws unless the file is a sound SQLite database. */
function check(file: string, name: string): void {
  const db = new DatabaseSync(file, { readOnly: true })
  try {
    const row = db.prepare('PRAGMA integrity_check').get() as { integrity_check?: string } | undefined
    if (row?.integrity_check !== 'ok')
      throw new Error(`${name}: integrity check failed (${row?.integrity_check})`)
  } finally {
    db.close()
  }
}

export interface RestoreResult {
  createdAt: string
  stores: BackedUpStore[]
  /** Where the files that were replaced went (with --force). */
  setAside: string[]
  /**
   * Stores the backup does not hold (one made before they were backed up, or before they
   * existed): none is left in `dataDir`, so the service starts them empty.
   */
  notInBackup: string[]
}

/** Refused restores: the message says why and what to do. */
export class RestoreRefused extends Error {
  override name = 'RestoreRefused'
}

/**
 * Puts a backup's stores into `dataDir`. Refuses while a living process holds a store of
 * `dataDir` open (the holder files of openSqlite), and when a store is already there unless
 * `force` (then the old file and its -wal/-shm are renamed `<name>.before-restore-<time>`, never
 * deleted). A store the backup does not hold counts too: it is set aside the same way, not kept,
 * because it would be of another time than the restored ones (a run of a connection the
 * restored workspace never had). Every file is checked (checksum, SQLite integrity) before
 * anything is replaced, and each lands by a rename.
 */
export function restoreStores(file: string, dataDir: string, opts: { force?: boolean } = {}): RestoreResult {
  const held = sqliteHolders(dataDir)
  if (held.length > 0) {
    throw new RestoreRefused(
      `the service is running on ${dataDir}: ${held.join(', ')} has the stores open. Stop it first.`,
    )
  }
  if (!existsSync(file) || !statSync(file).isFile()) throw new RestoreRefused(`${file} is not a file`)
  let createdAt: string
  const entries: Array<BackedUpStore & { content: Uint8Array }> = []
  let bundle: DatabaseSync
  try {
    bundle = new DatabaseSync(file, { readOnly: true })
  } catch {
    throw new RestoreRefused(`${file} is not a backup made by "pm backup"`)
  }
  try {
    const meta = (key: string) =>
      (bundle.prepare('SELECT value FROM meta WHERE key = ?').get(key) as { value?: string } | undefined)
        ?.value
    let format: string | undefined
    try {
      format = meta('format')
      createdAt = meta('createdAt') ?? ''
    } catch {
      throw new RestoreRefused(`${file} is not a backup made by "pm backup"`)
    }
    if (format !== FORMAT)
      throw new RestoreRefused(`${file} is not a backup made by "pm backup" (format ${format})`)
    for (const row of bundle.prepare('SELECT name, sha256, bytes, content FROM files').all()) {
      const name = String(row.name)
      if (!BACKED_UP.includes(name)) throw new RestoreRefused(`the backup holds an unexpected file "${name}"`)
      const content = row.content as Uint8Array
      if (sha256(content) !== row.sha256 || content.length !== Number(row.bytes))
        throw new RestoreRefused(`${name} in the backup is damaged (checksum mismatch)`)
      entries.push({ name: name as StoreFile, bytes: content.length, sha256: String(row.sha256), content })
    }
  } finally {
    bundle.close()
  }
  if (entries.length === 0) throw new RestoreRefused(`${file} holds no store`)

  const notInBackup = STORE_FILES.filter((name) => !entries.some((e) => e.name === name))
  const existing = [...entries.map((e) => e.name), ...notInBackup].filter((name) =>
    existsSync(join(dataDir, name)),
  )
  if (existing.length > 0 && !opts.force) {
    const stale = notInBackup.filter((name) => existing.includes(name))
    throw new RestoreRefused(
      `${existing.join(', ')} already in ${dataDir}: restore into an empty DATA_DIR, or pass --force to set the current files aside${
        stale.length > 0
          ? ` (${stale.join(', ')} too: this backup does not hold ${stale.length > 1 ? 'them' : 'it'}, and the service starts ${stale.length > 1 ? 'them' : 'it'} empty)`
          : ''
      }`,
    )
  }
  ensurePrivateDir(dataDir)
  // Everything written and checked first; only then is anything moved.
  const staged: Array<{ name: StoreFile; tmp: string }> = []
  try {
    for (const e of entries) {
      const tmp = join(dataDir, `${e.name}.restoring`)
      staged.push({ name: e.name, tmp })
      writeFileSync(tmp, e.content, { mode: 0o600 })
      chmodSync(tmp, 0o600)
      if (e.name === KEY_FILE) checkKeyFile(tmp)
      else {
        check(tmp, e.name)
        removeSidecars(tmp)
      }
    }
  } catch (err) {
    for (const s of staged) {
      rmSync(s.tmp, { force: true })
      removeSidecars(s.tmp)
    }
    throw err
  }
  const setAside: string[] = []
  const stamp = new Date().toISOString().replace(/[:.]/g, '-')
  const moves: Array<{ name: string; tmp?: string }> = [...staged, ...notInBackup.map((name) => ({ name }))]
  for (const { name, tmp } of moves) {
    const target = join(dataDir, name)
    // A -wal left beside the new file would be replayed into it: the old one goes with its file.
    for (const suffix of ['', '-wal', '-shm']) {
      const old = `${target}${suffix}`
      if (!existsSync(old)) continue
      const aside = `${target}.before-restore-${stamp}${suffix}`
      renameSync(old, aside)
      if (suffix === '') setAside.push(aside)
    }
    if (tmp) renameSync(tmp, target)
  }
  return { createdAt, stores: entries.map(({ content: _c, ...e }) => e), setAside, notInBackup }
}
