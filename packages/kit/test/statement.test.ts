import { DatabaseSync } from 'node:sqlite'
import { describe, expect, it } from 'vitest'
import { queryAll, queryOne, statement } from '../src/sqlite.ts'

describe('statement: each SQL prepared once per database', () => {
  it('answers the same statement for the same SQL, another for another database', () => {
    const a = new DatabaseSync(':memory:')
    const b = new DatabaseSync(':memory:')
    a.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)')
    b.exec('CREATE TABLE t (id INTEGER PRIMARY KEY, v TEXT)')
    const insert = 'INSERT INTO t (v) VALUES (?)'
    expect(statement(a, insert)).toBe(statement(a, insert))
    expect(statement(b, insert)).not.toBe(statement(a, insert))
    for (const v of ['x', 'y', 'z']) statement(a, insert).run(v)
    // A shared statement runs to the end each time: interleaved reads see their own parameters.
    expect(queryOne(a, 'SELECT v FROM t WHERE id = ?', 2)?.v).toBe('y')
    expect(queryAll(a, 'SELECT v FROM t WHERE id >= ? ORDER BY id', 2).map((r) => r.v)).toEqual(['y', 'z'])
    expect(queryOne(a, 'SELECT v FROM t WHERE id = ?', 3)?.v).toBe('z')
    expect(queryAll(b, 'SELECT v FROM t')).toEqual([])
  })

  it('starts over rather than grow past 500 statements', () => {
    const db = new DatabaseSync(':memory:')
    const first = statement(db, 'SELECT 0 AS n')
    for (let i = 1; i <= 500; i++) expect(statement(db, `SELECT ${i} AS n`).get()?.n).toBe(i)
    expect(statement(db, 'SELECT 0 AS n')).not.toBe(first)
  })
})
