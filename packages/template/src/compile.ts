/**
 * Parsing of `{{name}}` templates into literal segments and placeholder slots.
 *
 * Grammar: `{{` whitespace* name whitespace* `}}`, name = `[A-Za-z_][A-Za-z0-9_.-]*`. Anything else
 * between braces is literal text. The scanner is hand written rather than a regex so that parsing is
 * provably linear: a failed attempt only consumes whitespace and name characters, which can never start
 * the next `{{`, so no character is examined more than a constant number of times.
 */

/** One placeholder occurrence, together with the literal text that precedes it. */
export interface Slot {
  /** Literal text between the previous slot (or the start) and this one. */
  readonly before: string
  /** Index into `CompiledTemplate.names`. */
  readonly id: number
  /** The placeholder exactly as written, restored verbatim when inject mode cannot resolve it. */
  readonly raw: string
}

export interface CompiledTemplate {
  readonly source: string
  readonly slots: readonly Slot[]
  /** Literal text after the last slot (the whole template when there is none). */
  readonly tail: string
  /** Unique placeholder names, in order of first appearance. */
  readonly names: readonly string[]
  /** UTF-8 sizes of the literal parts, so that a render knows its size before building it. */
  readonly bytes: {
    /** Per slot: its `before` text. */
    readonly before: readonly number[]
    /** Per slot: the placeholder as written. */
    readonly raw: readonly number[]
    readonly tail: number
  }
}

/** Size of a string in UTF-8 (a lone surrogate counts as the 3 bytes of U+FFFD). */
export function utf8Length(text: string): number {
  let bytes = text.length
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (c < 0x80) continue
    if (c < 0x800) bytes += 1
    else if (c >= 0xd800 && c <= 0xdbff && i + 1 < text.length) {
      const next = text.charCodeAt(i + 1)
      if (next >= 0xdc00 && next <= 0xdfff) {
        // A pair: 2 code units, 4 bytes.
        bytes += 2
        i++
      } else bytes += 2
    } else bytes += 2
  }
  return bytes
}

const CLOSE_BRACE = 0x7d

export function isNameStart(c: number): boolean {
  return (c >= 0x41 && c <= 0x5a) || (c >= 0x61 && c <= 0x7a) || c === 0x5f
}

export function isNameChar(c: number): boolean {
  return isNameStart(c) || (c >= 0x30 && c <= 0x39) || c === 0x2e || c === 0x2d
}

/**
 * The same set as the regex class `\s` (so newlines count, and `{{\n name \n}}` is a placeholder), so
 * behaviour matches what a reader of "whitespace allowed" would expect from the obvious regex.
 */
export function isSpace(c: number): boolean {
  if (c <= 0x20) return c === 0x20 || (c >= 0x09 && c <= 0x0d)
  if (c < 0xa0) return false
  return (
    c === 0xa0 ||
    c === 0x1680 ||
    (c >= 0x2000 && c <= 0x200a) ||
    c === 0x2028 ||
    c === 0x2029 ||
    c === 0x202f ||
    c === 0x205f ||
    c === 0x3000 ||
    c === 0xfeff
  )
}

/**
 * Parses once so that rendering a cached template is a single walk over prepared segments.
 * Placeholder names are looked up as flat keys: `{{user.name}}` reads `values['user.name']`, no paths.
 */
export function compileTemplate(template: string): CompiledTemplate {
  const slots: Slot[] = []
  const names: string[] = []
  const ids = new Map<string, number>()
  const len = template.length
  let literalStart = 0
  let open = template.indexOf('{{')
  while (open !== -1) {
    let i = open + 2
    while (i < len && isSpace(template.charCodeAt(i))) i++
    const nameStart = i
    if (i < len && isNameStart(template.charCodeAt(i))) {
      i++
      while (i < len && isNameChar(template.charCodeAt(i))) i++
      const nameEnd = i
      while (i < len && isSpace(template.charCodeAt(i))) i++
      // charCodeAt past the end is NaN, which fails the comparison, so no bounds check is needed.
      const name = template.slice(nameStart, nameEnd)
      // `__proto__` is no placeholder: no JSON body can supply it (parsers refuse the key), so
      // it would be a required variable nobody can satisfy (issue 14, finding 9). It stays text.
      if (
        name !== '__proto__' &&
        template.charCodeAt(i) === CLOSE_BRACE &&
        template.charCodeAt(i + 1) === CLOSE_BRACE
      ) {
        const end = i + 2
        let id = ids.get(name)
        if (id === undefined) {
          id = names.length
          names.push(name)
          ids.set(name, id)
        }
        slots.push({ before: template.slice(literalStart, open), id, raw: template.slice(open, end) })
        literalStart = end
        open = template.indexOf('{{', end)
        continue
      }
    }
    // Retry one character on, not two, so that `{{{a}}}` still finds the inner `{{a}}`.
    open = template.indexOf('{{', open + 1)
  }
  const tail = template.slice(literalStart)
  const bytes = {
    before: slots.map((slot) => utf8Length(slot.before)),
    raw: slots.map((slot) => utf8Length(slot.raw)),
    tail: utf8Length(tail),
  }
  return { source: template, slots, tail, names, bytes }
}

/** Unique placeholder names in order of first appearance. */
export function extractPlaceholders(template: string): string[] {
  return [...compileTemplate(template).names]
}
