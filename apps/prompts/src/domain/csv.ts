import { pipeline } from 'node:stream/promises'
import {
  AppError,
  type ChatMessage,
  isDisplayName,
  textControlAt,
  type PromptConfig,
  type PromptType,
  TEMPLATE_MAX,
} from '@pm/contracts'
import { JsonTooDeepError, parseJsonText } from '@pm/kit'
import { CsvError, parse } from 'csv-parse'
import { parseMessages } from './content.ts'

export const NAME_MAX = 200
// The same bounds the create route puts on these fields, so an imported row is one it would accept.
export const DESCRIPTION_MAX = 2000
export const TAG_MAX = 50
export const TAGS_MAX = 50

const REQUIRED_COLUMNS = ['name', 'template'] as const
const KNOWN_COLUMNS = ['name', 'template', 'description', 'tags', 'type', 'messages', 'config'] as const
type Column = (typeof KNOWN_COLUMNS)[number]

/** A row as the create route would take it: a text prompt's template or a chat prompt's messages. */
export interface CsvPrompt {
  name: string
  type: PromptType
  template?: string
  messages?: ChatMessage[]
  description: string
  tags: string[]
  config?: PromptConfig
}

/**
 * One data row. `row` is the row as a spreadsheet shows it: the header is row 1, each record
 * (however many text lines its quoted fields span) is one row, and a blank line is a row too.
 */
export type CsvRow = { row: number; ok: true; value: CsvPrompt } | { row: number; ok: false; message: string }

export interface CsvLimits {
  /** Data rows (the header and blank rows not counted). */
  maxRows: number
  maxBytes: number
}

export type CsvFormatErrorCode = 'VALIDATION_ERROR' | 'PAYLOAD_TOO_LARGE'

/** The file as a whole is unusable: nothing in it should be imported. */
export class CsvFormatError extends AppError {
  declare readonly code: CsvFormatErrorCode
  /** Spreadsheet row (header = 1) and text line where parsing stopped, when known. */
  readonly row: number | undefined
  readonly line: number | undefined

  constructor(
    message: string,
    code: CsvFormatErrorCode = 'VALIDATION_ERROR',
    at: { row?: number; line?: number } = {},
  ) {
    super(code, message, at.row === undefined && at.line === undefined ? undefined : at)
    this.name = 'CsvFormatError'
    this.row = at.row
    this.line = at.line
  }
}

interface ParsedRecord {
  record: string[]
  info: { records: number; empty_lines: number; lines: number }
}

function isParsedRecord(x: unknown): x is ParsedRecord {
  if (typeof x !== 'object' || x === null || !('record' in x) || !('info' in x)) return false
  const { record, info } = x
  return (
    Array.isArray(record) &&
    typeof info === 'object' &&
    info !== null &&
    'records' in info &&
    typeof info.records === 'number' &&
    'empty_lines' in info &&
    typeof info.empty_lines === 'number' &&
    'lines' in info &&
    typeof info.lines === 'number'
  )
}

/** Counts bytes as they arrive so an oversized upload is refused without reading it all. */
async function* limitBytes(
  input: NodeJS.ReadableStream | AsyncIterable<Buffer>,
  maxBytes: number,
): AsyncGenerator<Buffer> {
  let total = 0
  for await (const chunk of input) {
    const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
    total += buf.length
    if (total > maxBytes) {
      throw new CsvFormatError(`file is larger than ${maxBytes} bytes`, 'PAYLOAD_TOO_LARGE')
    }
    yield buf
  }
}

function toFormatError(err: CsvError): CsvFormatError {
  const line = typeof err.lines === 'number' ? err.lines : undefined
  // The failing record is the one after those already read (header included) and blank lines.
  const row =
    typeof err.records === 'number' && typeof err.empty_lines === 'number'
      ? err.records + err.empty_lines + 1
      : undefined
  const where = row === undefined ? '' : ` at row ${row}`
  return new CsvFormatError(`malformed CSV${where}: ${err.message}`, 'VALIDATION_ERROR', { row, line })
}

function columnIndexes(header: string[]): Map<Column, number> {
  const found = new Map<Column, number>()
  const duplicates = new Set<string>()
  header.forEach((cell, i) => {
    const name = cell.trim().toLowerCase()
    const known = KNOWN_COLUMNS.find((c) => c === name)
    if (known === undefined) return
    if (found.has(known)) duplicates.add(known)
    else found.set(known, i)
  })
  // A file of chat prompts may have a messages column instead of a template column.
  const missing = REQUIRED_COLUMNS.filter(
    (c) => !found.has(c) && !(c === 'template' && found.has('messages')),
  )
  if (missing.length > 0) {
    throw new CsvFormatError(`missing required column${missing.length > 1 ? 's' : ''}: ${missing.join(', ')}`)
  }
  if (duplicates.size > 0) {
    throw new CsvFormatError(
      `duplicate column${duplicates.size > 1 ? 's' : ''}: ${[...duplicates].join(', ')}`,
    )
  }
  return found
}

export function splitTags(cell: string): string[] {
  const tags = new Set<string>()
  for (const part of cell.split(/[;,]/)) {
    const tag = part.trim()
    if (tag !== '') tags.add(tag)
  }
  return [...tags]
}

/**
 * The optional `config` cell: a JSON object (its size is checked when the prompt is created),
 * read by the JSON body rule, so a `__proto__` key the API refuses is refused here too.
 */
function parseConfig(cell: string): { config?: PromptConfig; problem?: string } {
  if (cell.trim() === '') return {}
  let value: unknown
  try {
    value = parseJsonText(cell)
  } catch (err) {
    if (err instanceof JsonTooDeepError) return { problem: `config ${err.message}` }
    return { problem: 'config is not valid JSON' }
  }
  if (typeof value !== 'object' || value === null || Array.isArray(value)) {
    return { problem: 'config must be a JSON object' }
  }
  return { config: value as PromptConfig }
}

function toRow(row: number, cell: (c: Column) => string): CsvRow {
  const name = cell('name').trim()
  const template = cell('template')
  const description = cell('description').trim()
  const tags = splitTags(cell('tags'))
  const typeCell = cell('type').trim().toLowerCase()
  const problems: string[] = []
  if (name === '') problems.push('name is required')
  else if (name.length > NAME_MAX) problems.push(`name is longer than ${NAME_MAX} characters`)
  else if (!isDisplayName(name, NAME_MAX)) problems.push('name has control characters')
  const type: PromptType | undefined =
    typeCell === '' || typeCell === 'text' ? 'text' : typeCell === 'chat' ? 'chat' : undefined
  let messages: ChatMessage[] | undefined
  if (type === undefined) problems.push('type must be text or chat')
  else if (type === 'text') {
    if (template.trim() === '') problems.push('template is required')
    else if (template.length > TEMPLATE_MAX)
      problems.push(`template is longer than ${TEMPLATE_MAX} characters`)
    if (cell('messages').trim() !== '') problems.push('messages are for chat prompts (type chat)')
  } else {
    if (template.trim() !== '') problems.push('template is derived for chat prompts: leave it empty')
    const parsed = parseMessages(cell('messages'))
    if (typeof parsed === 'string') problems.push(parsed)
    else messages = parsed
  }
  const { config, problem } = parseConfig(cell('config'))
  if (problem) problems.push(problem)
  if (description.length > DESCRIPTION_MAX) {
    problems.push(`description is longer than ${DESCRIPTION_MAX} characters`)
  }
  // What the create route refuses in text (templates, messages, descriptions).
  for (const column of ['template', 'messages', 'description'] as const) {
    if (textControlAt(cell(column)) >= 0) problems.push(`${column} has control characters`)
  }
  if (tags.length > TAGS_MAX) problems.push(`more than ${TAGS_MAX} tags`)
  const longTag = tags.find((t) => t.length > TAG_MAX)
  if (longTag !== undefined) {
    problems.push(`tag "${longTag.slice(0, 20)}…" is longer than ${TAG_MAX} characters`)
  } else if (tags.some((t) => !isDisplayName(t, TAG_MAX))) problems.push('a tag has control characters')
  if (problems.length > 0) return { row, ok: false, message: problems.join('; ') }
  // The template is kept as written: leading and trailing whitespace can be part of a prompt.
  const content =
    type === 'chat' ? { type, ...(messages ? { messages } : {}) } : { type: 'text' as const, template }
  return { row, ok: true, value: { name, ...content, description, tags, ...(config ? { config } : {}) } }
}

/**
 * Streams the rows of an import file. Whole-file problems (no header, a missing column,
 * malformed CSV, too many rows, too many bytes) are thrown as CsvFormatError; problems with a
 * single row are yielded as `{ok: false}` rows. A malformed record is only found when parsing
 * reaches it, possibly after earlier rows were yielded: use validatePromptCsv before writing.
 *
 * Blank lines and rows whose every cell is blank are skipped (spreadsheets export trailing
 * empty rows), but still counted in row numbers so they match what the user sees.
 */
export async function* parsePromptCsv(
  input: NodeJS.ReadableStream | AsyncIterable<Buffer>,
  opts: CsvLimits,
): AsyncGenerator<CsvRow> {
  const parser = parse({
    bom: true,
    info: true,
    skip_empty_lines: true,
    // The default (128,000) would make one over-long template fail the whole file instead of its row.
    max_record_size: Math.max(opts.maxBytes, 128_000),
  })
  // Failures reach the consumer through the parser (pipeline destroys it with the error).
  pipeline(limitBytes(input, opts.maxBytes), parser).catch(() => {})

  let columns: Map<Column, number> | undefined
  let dataRows = 0
  try {
    for await (const item of parser) {
      if (!isParsedRecord(item)) throw new Error('csv-parse returned an unexpected record shape')
      const { record, info } = item
      if (columns === undefined) {
        columns = columnIndexes(record)
        continue
      }
      if (record.every((c) => c.trim() === '')) continue
      dataRows++
      if (dataRows > opts.maxRows) {
        throw new CsvFormatError(`too many rows: at most ${opts.maxRows} are allowed`, 'VALIDATION_ERROR', {
          row: info.records + info.empty_lines,
          line: info.lines,
        })
      }
      const indexes = columns
      yield toRow(info.records + info.empty_lines, (c) => {
        const i = indexes.get(c)
        return i === undefined ? '' : (record[i] ?? '')
      })
    }
  } catch (err) {
    throw err instanceof CsvError ? toFormatError(err) : err
  } finally {
    // An early exit by the consumer must not leave the upload being read.
    parser.destroy()
  }
  if (columns === undefined) {
    throw new CsvFormatError(
      `the file is empty: a header row with ${REQUIRED_COLUMNS.join(' and ')} is required`,
    )
  }
}

/**
 * Parses a whole file before anything is written, so a file that turns out malformed halfway
 * through is refused outright instead of being half-imported.
 */
export async function validatePromptCsv(buffer: Buffer, opts: CsvLimits): Promise<{ rows: CsvRow[] }> {
  if (buffer.length > opts.maxBytes) {
    throw new CsvFormatError(`file is larger than ${opts.maxBytes} bytes`, 'PAYLOAD_TOO_LARGE')
  }
  const rows: CsvRow[] = []
  async function* whole(): AsyncGenerator<Buffer> {
    yield buffer
  }
  for await (const row of parsePromptCsv(whole(), opts)) rows.push(row)
  return { rows }
}
