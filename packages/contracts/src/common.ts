import { type Static, type TSchema, Type } from '@sinclair/typebox'

/** 24-hex ObjectId strings, in every store (DESIGN section 3). */
export const ObjectId = Type.String({ pattern: '^[0-9a-f]{24}$' })
export type ObjectId = Static<typeof ObjectId>

export const Timestamp = Type.String({ format: 'date-time' })

export const IdParams = Type.Object({ id: ObjectId }, { additionalProperties: false })

export const PAGE_DEFAULT = 20
export const PAGE_MAX = 100
/**
 * Highest page number asked for (issue 14, finding 5): past the end a page is empty, beyond
 * this it is a 400, so that the offset stays a small integer in every store.
 */
export const PAGE_NUMBER_MAX = 100_000

/**
 * A search text: matched literally, so control characters are refused (issue 14, finding 6: in
 * SQLite's LIKE a NUL ended the pattern, and `%<NUL>%` matched every prompt).
 */
export const SearchText = Type.String({ maxLength: 200, pattern: '^[^\\u0000-\\u001f\\u007f]*$' })

/**
 * What a name may hold (prompts, tags, organizations, users, keys, connections, datasets,
 * experiments): one line to show, so no control characters (C0, DEL, C1) and no line or paragraph
 * separators, and not blank (at least one character that is not white space). Written without
 * look-arounds so that every JSON Schema validator reads it the same; its backtracking is bounded
 * by the length limit, which validators check first.
 */
const NOT_SHOWN = '\\u0000-\\u001f\\u007f-\\u009f\\u2028\\u2029'
export const DISPLAY_NAME_PATTERN = `^[^${NOT_SHOWN}]*[^\\s${NOT_SHOWN}][^${NOT_SHOWN}]*$`

/** A name of at most `maxLength` characters (DISPLAY_NAME_PATTERN). */
export const DisplayName = (maxLength: number, options: { description?: string } = {}) =>
  Type.String({ minLength: 1, maxLength, pattern: DISPLAY_NAME_PATTERN, ...options })

const DISPLAY_NAME_RE = new RegExp(DISPLAY_NAME_PATTERN, 'u')
/** The same rule for values read outside a route's schema (CSV rows, bootstrap input). */
export function isDisplayName(value: string, maxLength: number): boolean {
  return value.length >= 1 && value.length <= maxLength && DISPLAY_NAME_RE.test(value)
}

/**
 * Control characters that text (templates, messages, descriptions, change logs) may not hold: the
 * C0 controls other than tab, line feed and carriage return, and DEL. The rule prompt files are
 * read by, so that whatever a route stores can be written to a file and read back.
 */
export const TEXT_CONTROL_CHARACTERS = '\\u0000-\\u0008\\u000b\\u000c\\u000e-\\u001f\\u007f'

export const TEXT_PATTERN = `^[^${TEXT_CONTROL_CHARACTERS}]*$`

/** Text of at most `maxLength` characters, without TEXT_CONTROL_CHARACTERS. */
export const Text = (maxLength: number) => Type.String({ maxLength, pattern: TEXT_PATTERN })

/**
 * What a value that fails one of these rules is told, in place of the validator's "must match
 * pattern" and the pattern itself; undefined for another pattern.
 */
export function patternProblem(pattern: string): string | undefined {
  if (pattern === DISPLAY_NAME_PATTERN)
    return 'must not be blank, and must hold no control characters or line breaks'
  if (pattern === TEXT_PATTERN)
    return 'must hold no control characters (tab, line feed and carriage return are fine; U+000B, U+000C, U+0000 and the like are not)'
  return undefined
}

const TEXT_CONTROL_RE = new RegExp(`[${TEXT_CONTROL_CHARACTERS}]`)
/** Where the first character that text may not hold is, or -1 (CSV rows and prompt files). */
export const textControlAt = (text: string): number => text.search(TEXT_CONTROL_RE)

export const PageQuery = {
  page: Type.Integer({ minimum: 1, maximum: PAGE_NUMBER_MAX, default: 1 }),
  limit: Type.Integer({ minimum: 1, maximum: PAGE_MAX, default: PAGE_DEFAULT }),
}

export const Pagination = Type.Object(
  {
    page: Type.Integer(),
    limit: Type.Integer(),
    total: Type.Integer(),
    totalPages: Type.Integer(),
    hasNextPage: Type.Boolean(),
  },
  { $id: 'Pagination' },
)
export type Pagination = Static<typeof Pagination>

export function pagination(page: number, limit: number, total: number): Pagination {
  const totalPages = Math.ceil(total / limit)
  return { page, limit, total, totalPages, hasNextPage: page < totalPages }
}

/** Nullable helper: JSON Schema `anyOf [T, null]`. */
export const Nullable = <T extends TSchema>(schema: T) => Type.Union([schema, Type.Null()])
