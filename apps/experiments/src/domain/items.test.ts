import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { isJsonl, parseCsvItems, parseJsonlItems, variableNameProblem } from './items.ts'

const MB = 1024 * 1024
function failure(fn: () => unknown): AppError {
  try {
    fn()
  } catch (err) {
    if (err instanceof AppError) return err
    throw err
  }
  throw new Error('did not throw')
}

describe('dataset uploads', () => {
  it('CSV: columns are variables, `expected` the expected output; blank lines skipped', () => {
    const items = parseCsvItems(
      Buffer.from('\uFEFFcity,country,expected\nParis,France,yes\n\n"Lyon, 2e",France,"multi\nline"\n'),
      10,
      MB,
    )
    expect(items).toEqual([
      { variables: { city: 'Paris', country: 'France' }, expected: 'yes' },
      { variables: { city: 'Lyon, 2e', country: 'France' }, expected: 'multi\nline' },
    ])
    expect(parseCsvItems(Buffer.from('q\nhello\n'), 10, MB)).toEqual([
      { variables: { q: 'hello' }, expected: null },
    ])
  })

  it('CSV: a bad row is reported by its number', () => {
    const e = failure(() => parseCsvItems(Buffer.from('a,b\n1,2\n3,4\n5\n'), 10, MB))
    expect(e.code).toBe('VALIDATION_ERROR')
    expect(e.details).toMatchObject({ row: 4 })
    expect(failure(() => parseCsvItems(Buffer.from('a,a\n1,2\n'), 10, MB)).details).toMatchObject({ row: 1 })
    expect(failure(() => parseCsvItems(Buffer.from('a\n1\n2\n3\n'), 2, MB)).details).toMatchObject({ row: 4 })
    expect(failure(() => parseCsvItems(Buffer.from(''), 2, MB)).message).toMatch(/header/)
  })

  it('JSONL: one item per line; a bad line is reported by its number', () => {
    const ok = parseJsonlItems(
      Buffer.from('{"variables":{"q":"a"},"expected":"A"}\n\n{"variables":{"q":"b"},"metadata":{"k":1}}\n'),
      10,
    )
    expect(ok).toEqual([
      { variables: { q: 'a' }, expected: 'A' },
      { variables: { q: 'b' }, metadata: { k: 1 } },
    ])
    expect(
      failure(() => parseJsonlItems(Buffer.from('{"variables":{}}\n{oops\n'), 10)).details,
    ).toMatchObject({ row: 2 })
    expect(failure(() => parseJsonlItems(Buffer.from('{"variables":{},"x":1}\n'), 10)).message).toMatch(
      /unknown field/,
    )
    expect(
      failure(() => parseJsonlItems(Buffer.from('{"variables":{},"expected":3}\n'), 10)).details,
    ).toMatchObject({ row: 1 })
  })

  it('a blank `expected` cell is no expected output (null), not an empty one', () => {
    expect(parseCsvItems(Buffer.from('q,expected\na,\nb, \nc,C\n'), 10, MB)).toEqual([
      { variables: { q: 'a' }, expected: null },
      { variables: { q: 'b' }, expected: null },
      { variables: { q: 'c' }, expected: 'C' },
    ])
  })

  it('a variable named `__proto__` (it would set the prototype) or nothing is refused, in CSV and JSONL alike', () => {
    const csv = failure(() => parseCsvItems(Buffer.from('q,__proto__\na,b\n'), 10, MB))
    expect(csv.code).toBe('VALIDATION_ERROR')
    expect(csv.details).toMatchObject({ row: 1 })
    expect(csv.message).toMatch(/__proto__/)
    const jsonl = failure(() => parseJsonlItems(Buffer.from('{"variables":{"__proto__":{"x":1}}}\n'), 10))
    expect(jsonl.details).toMatchObject({ row: 1 })
    expect(failure(() => parseJsonlItems(Buffer.from('{"variables":{"":1}}\n'), 10)).details).toMatchObject({
      row: 1,
    })
  })

  it('JSONL: a line nested too deep, or with a key holding U+0000, is refused by its row (the JSON body rule)', () => {
    const deep = `{"variables":{"x":${'['.repeat(100_000)}${']'.repeat(100_000)}}}`
    for (const line of [deep, '{"variables":{"a":1},"metadata":{"\\u0000":1}}']) {
      const err = failure(() => parseJsonlItems(Buffer.from(`{"variables":{"a":1}}\n${line}\n`), 10))
      expect([err.code, err.details], line.slice(0, 40)).toMatchObject(['VALIDATION_ERROR', { row: 2 }])
    }
  })

  it('CSV: a column whose name holds U+0000 is refused by the header row (a variable key MongoDB cannot store)', () => {
    const csv = failure(() => parseCsvItems(Buffer.from('q,a\u0000b\nx,y\n'), 10, MB))
    expect([csv.code, csv.details]).toMatchObject(['VALIDATION_ERROR', { row: 1 }])
    expect(csv.message).toMatch(/U\+0000/)
    // The JSON route's rule (variableNameProblem), for keys the JSON body rule has not seen.
    expect(variableNameProblem('a\u0000')).toMatch(/U\+0000/)
  })

  it('tells JSONL from CSV by name or type', () => {
    expect(isJsonl('a.jsonl', 'application/octet-stream')).toBe(true)
    expect(isJsonl('a.csv', 'application/jsonl')).toBe(true)
    expect(isJsonl('a.csv', 'text/csv')).toBe(false)
  })
})
