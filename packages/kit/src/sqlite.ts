import { chmodSync, existsSync, readdirSync, rmSync, writeFileSync } from 'node:fs'
import { basename, dirname, join } from 'node:path'
import { DatabaseSync, type SQLInputValue, type StatementSync } from 'node:sqlite'
import { ensurePrivateDir, ensurePrivateFile } from './privateFiles.ts'

/**
 * A process that has a store's SQLite file open says so with a file
 * `<DATA_DIR>/.pm-holders/<file name>.<pid>`, removed when it closes the store (closeSqlite).
 * `pm restore` refuses while a living process holds one; a holder left by a process that died
 * is ignored. SQLite's own locks cannot tell this: in WAL mode a reader holds no lock on the
 * database file that another process could see.
 */
export const HOLDERS_DIR = '.pm-holders'

function holderFile(file: string): string {
  return join(dirname(file), HOLDERS_DIR, `${basename(file)}.${process.pid}`)
}

/**
 * Opens a SQLite database (node:sqlite, built into Node 24: no native addon to build)
 * with WAL and a busy timeout, and applies the schema statements. Its directory is made 0700
 * and the file (with its -wal and -shm, and the holder file) 0600, whatever the umask: the
 * stores hold password hashes and sealed secrets (docs/operations.md, "Files at rest").
 */
export function openSqlite(file: string, schema: string[]): DatabaseSync {
  if (file !== ':memory:') {
    ensurePrivateDir(dirname(file))
    ensurePrivateDir(join(dirname(file), HOLDERS_DIR))
    writeFileSync(holderFile(file), `${process.pid}\n`, { mode: 0o600 })
    chmodSync(holderFile(file), 0o600)
    ensurePrivateFile(file)
    // Those of an earlier version, created before the files were kept private.
    for (const suffix of ['-wal', '-shm']) if (existsSync(file + suffix)) chmodSync(file + suffix, 0o600)
  }
  const db = new DatabaseSync(file)
  db.exec(
    'PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;',
  )
  for (const statement of schema) db.exec(statement)
  return db
}

/**
 * Adds a column that a later version of a table has, when this database's table lacks it, so
 * that a database of any age goes through the same step. Another process opening the same file
 * may have added it first. `table`, `column` and `definition` are the code's own constants.
 */
export function addColumnIfMissing(
  db: DatabaseSync,
  table: string,
  column: string,
  definition: string,
): void {
  const columns = db.prepare(`PRAGMA table_info(${table})`).all() as { name?: unknown }[]
  if (columns.some((c) => c.name === column)) return
  try {
    db.exec(`ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`)
  } catch (err) {
    if (!String(err).includes('duplicate column')) throw err
  }
}

/** Closes a database opened by openSqlite and drops this process's holder file. */
export function closeSqlite(db: DatabaseSync): void {
  if (!db.isOpen) return
  const file = db.location()
  db.close()
  if (file) rmSync(holderFile(file), { force: true })
}

/** Whether a process with this id is running (EPERM: running, as another user). */
function alive(pid: number): boolean {
  try {
    process.kill(pid, 0)
    return true
  } catch (err) {
    return (err as NodeJS.ErrnoException).code === 'EPERM'
  }
}

/** The living processes that hold SQLite files of `dataDir` open, as "file (pid n)". */
export function sqliteHolders(dataDir: string): string[] {
  let names: string[]
  try {
    names = readdirSync(join(dataDir, HOLDERS_DIR))
  } catch {
    return []
  }
  const held: string[] = []
  for (const name of names) {
    const match = /^(.+)\.(\d+)$/.exec(name)
    if (match?.[1] && match[2] && alive(Number(match[2]))) held.push(`${match[1]} (pid ${match[2]})`)
  }
  return held
}

/** Runs `fn` in an IMMEDIATE transaction (takes the write lock at once). */
export function transaction<T>(db: DatabaseSync, fn: () => T): T {
  db.exec('BEGIN IMMEDIATE')
  try {
    const result = fn()
    db.exec('COMMIT')
    return result
  } catch (err) {
    db.exec('ROLLBACK')
    throw err
  }
}

/** True for a SQLite UNIQUE constraint failure. */
export function isUniqueViolation(err: unknown): boolean {
  return err instanceof Error && /UNIQUE constraint failed/.test(err.message)
}

/** A row as node:sqlite returns it. */
export type SqliteRow = Record<string, SQLInputValue>

/** Column readers for row mappers. */
export const text = (v: unknown): string => String(v)
export const textOrNull = (v: unknown): string | null => (v === null || v === undefined ? null : String(v))

/** Prepared statements of each database, by their SQL (at most STATEMENTS_MAX each). */
const statements = new WeakMap<DatabaseSync, Map<string, StatementSync>>()
const STATEMENTS_MAX = 500

/**
 * The statement for `sql`, prepared once per database: SQLite compiles a statement in about as
 * long as it takes to run a lookup by key. Safe to share because node:sqlite's `get`, `all` and
 * `run` each reset the statement and run to the end; never use it with `iterate`. SQL built with
 * a varying number of placeholders makes several entries; past STATEMENTS_MAX the cache starts
 * over rather than grow.
 */
export function statement(db: DatabaseSync, sql: string): StatementSync {
  let cache = statements.get(db)
  if (!cache) {
    cache = new Map()
    statements.set(db, cache)
  }
  let prepared = cache.get(sql)
  if (!prepared) {
    if (cache.size >= STATEMENTS_MAX) cache.clear()
    prepared = db.prepare(sql)
    cache.set(sql, prepared)
  }
  return prepared
}

export function queryOne(db: DatabaseSync, sql: string, ...params: SQLInputValue[]): SqliteRow | undefined {
  return statement(db, sql).get(...params) as SqliteRow | undefined
}

export function queryAll(db: DatabaseSync, sql: string, ...params: SQLInputValue[]): SqliteRow[] {
  return statement(db, sql).all(...params) as SqliteRow[]
}

/**
 * One page of the rows of `table` that match every condition of `where` (with `params`), newest
 * first (created_at, then id, descending), and how many match in all.
 */
export function queryPage(
  db: DatabaseSync,
  table: string,
  where: string[],
  params: SQLInputValue[],
  page: { page: number; limit: number },
): { rows: SqliteRow[]; total: number } {
  const clause = where.join(' AND ')
  const total = Number(queryOne(db, `SELECT COUNT(*) AS n FROM ${table} WHERE ${clause}`, ...params)?.n ?? 0)
  const rows = queryAll(
    db,
    `SELECT * FROM ${table} WHERE ${clause} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
    ...params,
    page.limit,
    (page.page - 1) * page.limit,
  )
  return { rows, total }
}

/**
 * A start-up re-seal of a table's sealed secrets (SecretBox): each row's `sealed` column and its
 * nullable `alsoSealed` one go through `reseal` (null: left as it is) and are written back only
 * where the row is still as read, in one transaction; then the WAL is written back into the
 * database file and emptied, so that nothing sealed under the retired key stays in either file.
 * Table and column names are the caller's constants, never input. How many rows changed.
 */
export function resealColumns(
  db: DatabaseSync,
  table: string,
  sealed: string,
  alsoSealed: string,
  reseal: (id: string, stored: string) => string | null,
): number {
  const changed = transaction(db, () => {
    let n = 0
    const update = db.prepare(
      `UPDATE ${table} SET ${sealed} = ?, ${alsoSealed} = ? WHERE id = ? AND ${sealed} = ? AND ${alsoSealed} IS ?`,
    )
    for (const r of db.prepare(`SELECT id, ${sealed}, ${alsoSealed} FROM ${table}`).all()) {
      const id = text(r.id)
      const first = text(r[sealed])
      const second = textOrNull(r[alsoSealed])
      const nextFirst = reseal(id, first)
      const nextSecond = second === null ? null : reseal(id, second)
      if (nextFirst === null && nextSecond === null) continue
      n += Number(update.run(nextFirst ?? first, nextSecond ?? second, id, first, second).changes)
    }
    return n
  })
  if (changed > 0) db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
  return changed
}
