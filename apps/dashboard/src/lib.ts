import type { ResultOf } from '@pm/client'
import { CONFIG_MAX_BYTES } from '@pm/contracts'

/** Pure helpers of the pages (tested without a browser). */

type Hunks = ResultOf<'diffVersions'>['template']['hunks']

/** Comma-separated tags: trimmed, no blanks, no repeats. */
export function parseTags(text: string): string[] {
  return [
    ...new Set(
      text
        .split(',')
        .map((t) => t.trim())
        .filter(Boolean),
    ),
  ]
}

export interface Row {
  left?: { n: number; text: string; kind: 'same' | 'removed' }
  right?: { n: number; text: string; kind: 'same' | 'added' }
}

/** Unified hunks laid out side by side: removed lines paired with the added ones after them. */
export function sideBySide(hunks: Hunks): Row[][] {
  return hunks.map((hunk) => {
    const rows: Row[] = []
    let oldN = hunk.oldStart
    let newN = hunk.newStart
    let removed: Row['left'][] = []
    let added: Row['right'][] = []
    const flush = () => {
      for (let i = 0; i < Math.max(removed.length, added.length); i++)
        rows.push({ left: removed[i], right: added[i] })
      removed = []
      added = []
    }
    for (const line of hunk.lines) {
      const mark = line[0]
      const text = line.slice(1)
      if (mark === '-') removed.push({ n: oldN++, text, kind: 'removed' })
      else if (mark === '+') added.push({ n: newN++, text, kind: 'added' })
      else if (mark === ' ') {
        flush()
        rows.push({ left: { n: oldN++, text, kind: 'same' }, right: { n: newN++, text, kind: 'same' } })
      }
    }
    flush()
    return rows
  })
}

/** The service's limit on `config`: bytes of UTF-8 JSON (contracts' CONFIG_MAX_BYTES). */
export const CONFIG_LIMIT_BYTES = CONFIG_MAX_BYTES

export type ParsedConfig = { ok: true; value: Record<string, unknown> | null } | { ok: false; error: string }

/** The config field's text: empty is "no config"; otherwise a JSON object within the limit. */
export function parseConfig(text: string): ParsedConfig {
  if (text.trim() === '') return { ok: true, value: null }
  let value: unknown
  try {
    value = JSON.parse(text)
  } catch (err) {
    return { ok: false, error: `not JSON: ${(err as Error).message}` }
  }
  if (value === null || typeof value !== 'object' || Array.isArray(value))
    return { ok: false, error: 'must be a JSON object, such as {"model": "…", "temperature": 0.2}' }
  const size = new TextEncoder().encode(JSON.stringify(value)).length
  if (size > CONFIG_LIMIT_BYTES) return { ok: false, error: `${size} bytes; at most ${CONFIG_LIMIT_BYTES}` }
  return { ok: true, value: value as Record<string, unknown> }
}

export function formatConfig(config: Record<string, unknown> | null | undefined): string {
  return config ? JSON.stringify(config, null, 2) : ''
}

/** One field a refusal names: the field in words and what is wrong with it. */
export interface FieldProblem {
  field: string
  message: string
}

/** A refusal names at most this many fields in its banner. */
export const FIELD_PROBLEMS_SHOWN = 5

/**
 * A 400's `details` ({path, message} for each field, the path a JSON pointer under its
 * location: `/body/messages/1/content`) as fields in words: "messages › 2 › content". The
 * banner's own message ("request is invalid") does not say which field nor why.
 */
export function fieldProblems(details: unknown): FieldProblem[] {
  if (!Array.isArray(details)) return []
  const problems: FieldProblem[] = []
  for (const d of details) {
    const { path, message } = (d ?? {}) as { path?: unknown; message?: unknown }
    if (typeof path !== 'string' || !path.startsWith('/') || typeof message !== 'string') continue
    problems.push({ field: fieldName(path), message })
  }
  return problems
}

function fieldName(path: string): string {
  return path
    .split('/')
    .slice(2)
    .map((part) =>
      /^\d+$/.test(part) ? String(Number(part) + 1) : part.replace(/([a-z])([A-Z])/g, '$1 $2').toLowerCase(),
    )
    .join(' › ')
}

/**
 * `text` cut after about `shown` characters, for a fold ("N more characters"): never between the
 * two halves of a surrogate pair (an emoji at the cut was a replacement character on each side).
 * Null when the whole text is shown.
 */
export function foldText(text: string, shown: number): { head: string; rest: string } | null {
  if (text.length <= shown) return null
  const code = text.charCodeAt(shown - 1)
  const cut = code >= 0xd800 && code <= 0xdbff ? shown + 1 : shown
  if (cut >= text.length) return null
  return { head: text.slice(0, cut), rest: text.slice(cut) }
}
