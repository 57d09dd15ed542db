import { AppError, type DatasetItemInput } from '@pm/contracts'
import { JsonNulKeyError, JsonTooDeepError, parseJsonText } from '@pm/kit'
import { CsvError, parse } from 'csv-parse/sync'

/**
 * Dataset uploads (CSV or JSONL), parsed whole before anything is written: a bad row is
 * reported with its number (`details.row`, the header being row 1 of a CSV, the first line
 * row 1 of a JSONL file) and the file imports nothing. The same csv-parse options as the
 * prompts CSV import (BOM, blank lines skipped, record size bound by the file's bound).
 */

export const VARIABLE_NAME_MAX = 200
const EXPECTED_MAX = 100_000

/**
 * What is wrong with a variable's name, or null: 1 to VARIABLE_NAME_MAX characters, not
 * `__proto__` (as an object key it sets the prototype rather than holding a value; the JSON
 * body parser refuses it too), and no U+0000 (MongoDB cannot store such a key; the JSON body
 * rule refuses it in JSON, but a CSV header is not JSON). One rule for the JSON route, CSV
 * columns and JSONL items.
 */
export function variableNameProblem(name: string): string | null {
  if (name.length === 0 || name.length > VARIABLE_NAME_MAX)
    return `variable names must be 1 to ${VARIABLE_NAME_MAX} characters`
  if (name === '__proto__') return 'a variable cannot be named `__proto__`'
  if (name.includes('\u0000')) return 'a variable name must not contain U+0000'
  return null
}

function badRow(row: number, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `row ${row}: ${message}; nothing was imported`, {
    row,
    errors: [{ path: `/file/row/${row}`, message }],
  })
}

export function parseCsvItems(file: Buffer, maxItems: number, maxBytes: number): DatasetItemInput[] {
  let records: { record: string[]; info: { records: number; empty_lines: number } }[]
  try {
    records = parse(file, {
      bom: true,
      info: true,
      skip_empty_lines: true,
      relax_column_count: false,
      max_record_size: Math.max(maxBytes, 128_000),
    }) as unknown as { record: string[]; info: { records: number; empty_lines: number } }[]
  } catch (err) {
    if (err instanceof CsvError) {
      const row = typeof err.records === 'number' ? err.records + Number(err.empty_lines ?? 0) + 1 : 0
      throw badRow(row, `malformed CSV: ${err.message}`)
    }
    throw err
  }
  const [head, ...rows] = records
  if (!head) throw new AppError('VALIDATION_ERROR', 'the file is empty: a header row is required', { row: 1 })
  const columns = head.record.map((c) => c.trim())
  const seen = new Set<string>()
  columns.forEach((c, i) => {
    if (c === '') throw badRow(1, `column ${i + 1} has no name`)
    const problem = variableNameProblem(c)
    if (problem !== null) throw badRow(1, `column ${i + 1}: ${problem}`)
    if (seen.has(c)) throw badRow(1, `duplicate column ${JSON.stringify(c)}`)
    seen.add(c)
  })
  if (columns.every((c) => c === 'expected')) throw badRow(1, 'no variable columns (only `expected`)')
  const items: DatasetItemInput[] = []
  for (const { record, info } of rows) {
    const row = info.records + info.empty_lines
    if (record.every((c) => c.trim() === '')) continue
    if (items.length >= maxItems) throw badRow(row, `too many rows: at most ${maxItems} fit in this dataset`)
    const variables: Record<string, unknown> = {}
    let expected: string | null = null
    columns.forEach((c, i) => {
      const cell = record[i] ?? ''
      // A blank cell is no expected output (null), as an item without one is elsewhere.
      if (c === 'expected') expected = cell.trim() === '' ? null : cell
      else variables[c] = cell
    })
    if (expected !== null && (expected as string).length > EXPECTED_MAX)
      throw badRow(row, `expected is longer than ${EXPECTED_MAX} characters`)
    items.push({ variables, expected })
  }
  if (items.length === 0)
    throw new AppError('VALIDATION_ERROR', 'the file has a header but no data rows', { row: 2 })
  return items
}

const isObject = (x: unknown): x is Record<string, unknown> =>
  typeof x === 'object' && x !== null && !Array.isArray(x)

/** One item as the JSON route takes it; a string naming what is wrong otherwise. */
export function checkItem(value: unknown): DatasetItemInput | string {
  if (!isObject(value)) return 'each line must be a JSON object'
  const extra = Object.keys(value).filter((k) => k !== 'variables' && k !== 'expected' && k !== 'metadata')
  if (extra.length > 0) return `unknown field ${JSON.stringify(extra[0])} (variables, expected, metadata)`
  const { variables, expected, metadata } = value
  if (!isObject(variables)) return '`variables` must be a JSON object'
  for (const k of Object.keys(variables)) {
    const problem = variableNameProblem(k)
    if (problem !== null) return problem
  }
  if (expected !== undefined && expected !== null && typeof expected !== 'string')
    return '`expected` must be a string or null'
  if (typeof expected === 'string' && expected.length > EXPECTED_MAX)
    return `expected is longer than ${EXPECTED_MAX} characters`
  if (metadata !== undefined && metadata !== null && !isObject(metadata))
    return '`metadata` must be a JSON object or null'
  return {
    variables,
    ...(expected === undefined ? {} : { expected: expected as string | null }),
    ...(metadata === undefined ? {} : { metadata: metadata as Record<string, unknown> | null }),
  }
}

export function parseJsonlItems(file: Buffer, maxItems: number): DatasetItemInput[] {
  const text = file.toString('utf8').replace(/^\uFEFF/, '')
  const items: DatasetItemInput[] = []
  const lines = text.split(/\r?\n/)
  for (let i = 0; i < lines.length; i++) {
    const line = lines[i] ?? ''
    if (line.trim() === '') continue
    const row = i + 1
    if (items.length >= maxItems) throw badRow(row, `too many rows: at most ${maxItems} fit in this dataset`)
    let value: unknown
    try {
      // The JSON body rule: a line nested thousands deep overflowed the stack when it was stored
      // (a 500), and one with a key holding U+0000 was kept (MongoDB refuses it).
      value = parseJsonText(line)
    } catch (err) {
      if (err instanceof JsonTooDeepError || err instanceof JsonNulKeyError) throw badRow(row, err.message)
      throw badRow(row, `not valid JSON: ${(err as Error).message}`)
    }
    const item = checkItem(value)
    if (typeof item === 'string') throw badRow(row, item)
    items.push(item)
  }
  if (items.length === 0) throw new AppError('VALIDATION_ERROR', 'the file holds no items', { row: 1 })
  return items
}

/** JSONL when the file's name or type says so; CSV otherwise. */
export function isJsonl(filename: string | undefined, mimetype: string | undefined): boolean {
  const type = (mimetype ?? '').toLowerCase()
  return (
    /\.(jsonl|ndjson)$/i.test(filename ?? '') ||
    type === 'application/jsonl' ||
    type === 'application/x-ndjson' ||
    type === 'application/jsonlines'
  )
}
