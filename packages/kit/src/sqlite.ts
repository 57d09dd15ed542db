import { mkdirSync } from 'node:fs'
import { dirname } from 'node:path'
import { DatabaseSync, type SQLInputValue } from 'node:sqlite'

/**
 * Opens a SQLite database (node:sqlite, built into Node 24: no native addon to build)
 * with WAL and a busy timeout, and applies the schema statements.
 */
export function openSqlite(file: string, schema: string[]): DatabaseSync {
  if (file !== ':memory:') mkdirSync(dirname(file), { recursive: true })
  const db = new DatabaseSync(file)
  db.exec(
    'PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL; PRAGMA busy_timeout = 5000; PRAGMA foreign_keys = ON;',
  )
  for (const statement of schema) db.exec(statement)
  return db
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

export function queryOne(db: DatabaseSync, sql: string, ...params: SQLInputValue[]): SqliteRow | undefined {
  return db.prepare(sql).get(...params) as SqliteRow | undefined
}

export function queryAll(db: DatabaseSync, sql: string, ...params: SQLInputValue[]): SqliteRow[] {
  return db.prepare(sql).all(...params) as SqliteRow[]
}
