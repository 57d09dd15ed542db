import { AppError, type Variable } from '@pm/contracts'
import { type CompiledTemplate, isNameChar, isNameStart, isSpace, utf8Length } from './compile.ts'
import { formatValue, type RenderMode, renderTooLarge } from './values.ts'

/**
 * Template logic and references (DESIGN section 12): `{{#if x}}…{{else}}…{{/if}}`,
 * `{{#unless x}}…{{/unless}}`, `{{#each list}}…{{else}}…{{/each}}` with `{{this}}`,
 * `{{this.field}}` and `{{@index}}` inside, and `{{> slug}}` / `{{> slug@preview}}` /
 * `{{> slug@production}}` / `{{> slug@v3}}` references to other prompts.
 *
 * A template with none of these is not touched by this module: `compileLogic` answers
 * `null` and callers keep the flat path of compile.ts/render.ts, so such a template renders
 * byte for byte as before. Plain placeholders keep the flat grammar and lookup everywhere
 * (`{{user.name}}` reads `values['user.name']`), outside `#each` `{{this}}` is still the flat
 * variable named `this`, and output is never escaped. No helpers, no expressions, no
 * prototype access: item fields are read as own properties only.
 */

/** How a reference picks the version of the included prompt. */
export type ReferenceVia = 'latest' | 'preview' | 'production' | 'version'

export interface IncludeRef {
  slug: string
  via: ReferenceVia
  /** `via: 'version'` only. */
  version?: number
  /** `slug`, `slug@preview`, `slug@v3`: one key per distinct target. */
  key: string
}

/** What a block tests or loops over: a root variable, the current item (or a field path of it), or the index. */
export type LogicRef =
  | { kind: 'var'; name: string }
  | { kind: 'item'; path: readonly string[] }
  | { kind: 'index' }

export type LogicNode =
  | { kind: 'text'; text: string; bytes: number }
  | { kind: 'var'; name: string; raw: string }
  | { kind: 'item'; path: readonly string[]; raw: string }
  | { kind: 'index' }
  | { kind: 'if'; negate: boolean; test: LogicRef; body: LogicNode[]; otherwise: LogicNode[] }
  | { kind: 'each'; list: LogicRef; body: LogicNode[]; otherwise: LogicNode[] }
  | { kind: 'include'; ref: IncludeRef; raw: string }

export interface LogicTemplate {
  readonly source: string
  readonly nodes: readonly LogicNode[]
  /** Root variable names, placeholders and block operands alike, in order of first appearance. */
  readonly names: readonly string[]
  /** Distinct references in order of first appearance. */
  readonly includes: readonly IncludeRef[]
  /** Every reference as written, in order (a reference written twice counts twice toward the bound). */
  readonly occurrences: readonly IncludeRef[]
}

/** A syntax error: where (UTF-16 offset) and what. */
export class TemplateSyntaxError extends Error {
  readonly offset: number
  constructor(message: string, offset: number) {
    super(message)
    this.name = 'TemplateSyntaxError'
    this.offset = offset
  }
}

const BLOCKS = new Set(['if', 'unless', 'each'])
const VERSION_MAX = 1_000_000_000

/**
 * Most levels blocks nest in one template, and, at render, blocks and references together
 * across the included parts. Rendering recurses once per level: without a bound, 6,000 nested
 * `{{#if}}` (well within the template size limit) overflowed the stack.
 */
export const MAX_BLOCK_DEPTH = 64

interface Frame {
  kind: 'if' | 'unless' | 'each'
  test: LogicRef
  offset: number
  yes: LogicNode[]
  otherwise: LogicNode[]
  inElse: boolean
}

/** Scans a name of the flat grammar at `i`; answers its end, or -1. */
function scanName(s: string, i: number): number {
  if (i >= s.length || !isNameStart(s.charCodeAt(i))) return -1
  i++
  while (i < s.length && isNameChar(s.charCodeAt(i))) i++
  return i
}

function skipSpace(s: string, i: number): number {
  while (i < s.length && isSpace(s.charCodeAt(i))) i++
  return i
}

function closesAt(s: string, i: number): boolean {
  return s.charCodeAt(i) === 0x7d && s.charCodeAt(i + 1) === 0x7d
}

/** `this`, `this.a.b` (inside `#each`), `@index`, or a root name. */
function operand(word: string, eachDepth: number, offset: number): LogicRef {
  // As `{{__proto__}}` is text (compile.ts): no JSON body can carry the key, so it would be a
  // required variable nobody can supply. A block cannot be text (its close would be stray).
  if (word === '__proto__') {
    throw new TemplateSyntaxError('__proto__ cannot be a variable (no request can supply it)', offset)
  }
  if (word === '@index') {
    if (eachDepth === 0) throw new TemplateSyntaxError('{{@index}} is only defined inside {{#each}}', offset)
    return { kind: 'index' }
  }
  if (eachDepth > 0 && (word === 'this' || word.startsWith('this.'))) {
    const path = word === 'this' ? [] : word.slice(5).split('.')
    if (path.some((p) => p === '')) throw new TemplateSyntaxError(`bad field path ${word}`, offset)
    return { kind: 'item', path }
  }
  return { kind: 'var', name: word }
}

const SLUG_CHAR = /[a-z0-9-]/

/**
 * Parses a template with logic. Answers null when it has none (the flat path applies), the
 * parsed template otherwise; throws TemplateSyntaxError on an unclosed or stray block, an
 * `{{else}}` outside a block, an unknown block or a malformed reference.
 */
export function compileLogic(source: string): LogicTemplate | null {
  const root: LogicNode[] = []
  const stack: Frame[] = []
  const names: string[] = []
  const seenNames = new Set<string>()
  const includes: IncludeRef[] = []
  const occurrences: IncludeRef[] = []
  const seenIncludes = new Set<string>()
  let logic = false
  let literalStart = 0
  const out = (): LogicNode[] => {
    const top = stack[stack.length - 1]
    if (!top) return root
    return top.inElse ? top.otherwise : top.yes
  }
  const eachDepth = (): number => stack.reduce((n, f) => n + (f.kind === 'each' ? 1 : 0), 0)
  const flushText = (end: number): void => {
    if (end > literalStart) {
      const text = source.slice(literalStart, end)
      out().push({ kind: 'text', text, bytes: utf8Length(text) })
    }
  }
  const useName = (name: string): void => {
    if (!seenNames.has(name)) {
      seenNames.add(name)
      names.push(name)
    }
  }
  const useRef = (ref: LogicRef): void => {
    if (ref.kind === 'var') useName(ref.name)
  }

  let open = source.indexOf('{{')
  while (open !== -1) {
    const i = skipSpace(source, open + 2)
    const c = source.charCodeAt(i)
    // Block open: {{#if x}}, {{#unless x}}, {{#each x}}
    if (c === 0x23 /* # */) {
      const kwEnd = scanName(source, i + 1)
      const kw = kwEnd === -1 ? '' : source.slice(i + 1, kwEnd)
      if (!BLOCKS.has(kw)) {
        throw new TemplateSyntaxError(`unknown block {{#${kw}}} (only #if, #unless and #each)`, open)
      }
      let j = skipSpace(source, kwEnd)
      const word = readOperand(source, j)
      if (!word) throw new TemplateSyntaxError(`{{#${kw}}} needs a variable name`, open)
      j = skipSpace(source, j + word.length)
      if (!closesAt(source, j)) throw new TemplateSyntaxError(`{{#${kw} ${word}}} is not closed by }}`, open)
      if (stack.length >= MAX_BLOCK_DEPTH) {
        throw new TemplateSyntaxError(`blocks nest deeper than ${MAX_BLOCK_DEPTH} levels`, open)
      }
      const test = operand(word, eachDepth(), open)
      if (kw === 'each' && test.kind === 'index') {
        throw new TemplateSyntaxError('{{#each}} needs a list, not @index', open)
      }
      flushText(open)
      useRef(test)
      stack.push({ kind: kw as Frame['kind'], test, offset: open, yes: [], otherwise: [], inElse: false })
      logic = true
      literalStart = j + 2
      open = source.indexOf('{{', literalStart)
      continue
    }
    // Block close: {{/if}}
    if (c === 0x2f /* / */) {
      const kwEnd = scanName(source, i + 1)
      const kw = kwEnd === -1 ? '' : source.slice(i + 1, kwEnd)
      const j = kwEnd === -1 ? i + 1 : skipSpace(source, kwEnd)
      if (!closesAt(source, j) || !BLOCKS.has(kw)) {
        throw new TemplateSyntaxError(`unknown closing tag {{/${kw}}}`, open)
      }
      const top = stack[stack.length - 1]
      if (!top) throw new TemplateSyntaxError(`{{/${kw}}} closes no open block`, open)
      if (top.kind !== kw) {
        throw new TemplateSyntaxError(`{{/${kw}}} closes {{#${top.kind}}} (opened at ${top.offset})`, open)
      }
      flushText(open)
      const frame = stack.pop() as Frame
      const node: LogicNode =
        frame.kind === 'each'
          ? { kind: 'each', list: frame.test, body: frame.yes, otherwise: frame.otherwise }
          : {
              kind: 'if',
              negate: frame.kind === 'unless',
              test: frame.test,
              body: frame.yes,
              otherwise: frame.otherwise,
            }
      out().push(node)
      literalStart = j + 2
      open = source.indexOf('{{', literalStart)
      continue
    }
    // Reference: {{> slug}}, {{> slug@production}}, {{> slug@v3}}
    if (c === 0x3e /* > */) {
      let j = skipSpace(source, i + 1)
      const slugStart = j
      while (j < source.length && SLUG_CHAR.test(source.charAt(j))) j++
      const slug = source.slice(slugStart, j)
      let via: ReferenceVia = 'latest'
      let version: number | undefined
      if (source.charAt(j) === '@') {
        const selStart = j + 1
        j = selStart
        while (j < source.length && /[a-z0-9]/.test(source.charAt(j))) j++
        const sel = source.slice(selStart, j)
        if (sel === 'preview' || sel === 'production') via = sel
        else if (/^v[1-9][0-9]{0,9}$/.test(sel) && Number(sel.slice(1)) <= VERSION_MAX) {
          via = 'version'
          version = Number(sel.slice(1))
        } else {
          throw new TemplateSyntaxError(
            `bad reference selector @${sel} (use @preview, @production or @v<number>)`,
            open,
          )
        }
      }
      j = skipSpace(source, j)
      if (!/^[a-z0-9]+(?:-[a-z0-9]+)*$/.test(slug) || slug.length > 100 || !closesAt(source, j)) {
        throw new TemplateSyntaxError(
          'bad reference: use {{> slug}}, {{> slug@production}} or {{> slug@v3}}',
          open,
        )
      }
      const key = via === 'latest' ? slug : via === 'version' ? `${slug}@v${version}` : `${slug}@${via}`
      const ref: IncludeRef = { slug, via, key, ...(version !== undefined ? { version } : {}) }
      flushText(open)
      if (!seenIncludes.has(key)) {
        seenIncludes.add(key)
        includes.push(ref)
      }
      occurrences.push(ref)
      out().push({ kind: 'include', ref, raw: source.slice(open, j + 2) })
      logic = true
      literalStart = j + 2
      open = source.indexOf('{{', literalStart)
      continue
    }
    // {{@index}}
    if (c === 0x40 /* @ */) {
      const word = readOperand(source, i)
      const j = skipSpace(source, i + word.length)
      if (word === '@index' && closesAt(source, j)) {
        operand(word, eachDepth(), open)
        flushText(open)
        out().push({ kind: 'index' })
        logic = true
        literalStart = j + 2
        open = source.indexOf('{{', literalStart)
        continue
      }
    }
    const nameEnd = scanName(source, i)
    if (nameEnd !== -1) {
      const name = source.slice(i, nameEnd)
      const j = skipSpace(source, nameEnd)
      if (name !== '__proto__' && closesAt(source, j)) {
        if (name === 'else') {
          const top = stack[stack.length - 1]
          if (!top) throw new TemplateSyntaxError('{{else}} outside a block', open)
          if (top.inElse) throw new TemplateSyntaxError(`a second {{else}} in {{#${top.kind}}}`, open)
          flushText(open)
          top.inElse = true
          logic = true
          literalStart = j + 2
          open = source.indexOf('{{', literalStart)
          continue
        }
        const raw = source.slice(open, j + 2)
        const ref = operand(name, eachDepth(), open)
        flushText(open)
        if (ref.kind === 'item') {
          out().push({ kind: 'item', path: ref.path, raw })
          logic = true
        } else {
          useName(name)
          out().push({ kind: 'var', name, raw })
        }
        literalStart = j + 2
        open = source.indexOf('{{', literalStart)
        continue
      }
    }
    // Not a tag: literal text. Retry one character on, as the flat scanner does.
    open = source.indexOf('{{', open + 1)
  }
  const unclosed = stack[stack.length - 1]
  if (unclosed) throw new TemplateSyntaxError(`{{#${unclosed.kind}}} is never closed`, unclosed.offset)
  if (!logic) return null
  flushText(source.length)
  return { source, nodes: root, names, includes, occurrences }
}

/** `@index` or a flat name at `i` (empty when neither). */
function readOperand(s: string, i: number): string {
  if (s.startsWith('@index', i) && !isNameChar(s.charCodeAt(i + 6))) return '@index'
  const end = scanName(s, i)
  return end === -1 ? '' : s.slice(i, end)
}

/** The syntax error of a template, or null (for save-time checks). */
export function templateSyntaxError(source: string): TemplateSyntaxError | null {
  try {
    compileLogic(source)
    return null
  } catch (err) {
    if (err instanceof TemplateSyntaxError) return err
    throw err
  }
}

/** The nodes of a flat compiled template, so a logic template can include a flat one. */
export function flatNodes(compiled: CompiledTemplate): LogicTemplate {
  const nodes: LogicNode[] = []
  for (const slot of compiled.slots) {
    if (slot.before) nodes.push({ kind: 'text', text: slot.before, bytes: utf8Length(slot.before) })
    nodes.push({ kind: 'var', name: compiled.names[slot.id] as string, raw: slot.raw })
  }
  if (compiled.tail) nodes.push({ kind: 'text', text: compiled.tail, bytes: compiled.bytes.tail })
  return { source: compiled.source, nodes, names: compiled.names, includes: [], occurrences: [] }
}

/** Handlebars truthiness: false, null, missing, "", 0, NaN and [] are false. */
export function truthy(value: unknown): boolean {
  if (Array.isArray(value)) return value.length > 0
  return Boolean(value)
}

export interface LogicRenderOptions {
  maxOutputBytes?: number
  /** Most nodes evaluated (loops in loops do work without output); over it is RENDER_TOO_LARGE. */
  maxSteps?: number
  /** The included template for a reference (resolved beforehand by the caller). */
  include?: (ref: IncludeRef) => LogicTemplate | undefined
  /** Bytes of output already counted against maxOutputBytes (a chat prompt's earlier messages). */
  startBytes?: number
  /** Most levels of blocks and references together, across included parts (MAX_BLOCK_DEPTH unless given). */
  maxDepth?: number
}

export interface LogicRenderOutcome {
  renderedContent: string
  missingRequired: string[]
  unresolved: string[]
  /** The reference keys actually rendered, in order of first use. */
  included: string[]
  /** The UTF-8 size of renderedContent. */
  bytes: number
  /** Nodes evaluated (counted against maxSteps). */
  steps: number
}

export const DEFAULT_MAX_STEPS = 2_000_000

interface Scope {
  item: unknown
  index: number
}

/**
 * Renders a logic template. `variables` are the declared variables of every part (the caller
 * merges them: a variable is required if any part requires it). Values are appended, never
 * re-scanned. The output cap is checked as the text grows, so a loop that would expand past
 * it stops at the cap rather than building the whole text.
 */
export function renderLogic(
  template: LogicTemplate,
  variables: readonly Variable[],
  values: Record<string, unknown>,
  mode: RenderMode,
  options: LogicRenderOptions = {},
): LogicRenderOutcome {
  const declared = new Map<string, Variable>()
  for (const v of variables) if (!declared.has(v.name)) declared.set(v.name, v)
  const missingRequired: string[] = []
  for (const v of declared.values()) {
    if (v.required && (!Object.hasOwn(values, v.name) || values[v.name] === undefined)) {
      missingRequired.push(v.name)
    }
  }
  const max = options.maxOutputBytes ?? Number.POSITIVE_INFINITY
  const maxSteps = options.maxSteps ?? DEFAULT_MAX_STEPS
  const maxDepth = options.maxDepth ?? MAX_BLOCK_DEPTH
  const unresolvedSet = new Set<string>()
  const included: string[] = []
  const includedSet = new Set<string>()
  const scopes: Scope[] = []
  let out = ''
  let bytes = 0
  const startBytes = options.startBytes ?? 0
  let steps = 0

  const append = (text: string, size: number): void => {
    bytes += size
    if (startBytes + bytes > max) throw renderTooLarge(max)
    out += text
  }
  /** A root variable: supplied value, else its default, else undefined (unresolved). */
  const rootValue = (name: string): unknown => {
    if (Object.hasOwn(values, name) && values[name] !== undefined) return values[name]
    const fallback = declared.get(name)?.defaultValue
    if (fallback !== undefined) return fallback
    unresolvedSet.add(name)
    return undefined
  }
  const itemValue = (path: readonly string[]): unknown => {
    let value = scopes[scopes.length - 1]?.item
    for (const key of path) {
      if (value === null || typeof value !== 'object' || !Object.hasOwn(value, key)) return undefined
      value = (value as Record<string, unknown>)[key]
    }
    return value
  }
  const refValue = (ref: LogicRef): unknown => {
    if (ref.kind === 'var') return rootValue(ref.name)
    if (ref.kind === 'item') return itemValue(ref.path)
    return scopes[scopes.length - 1]?.index
  }

  /** `depth`: the blocks and references around `nodes`, the included parts' counted too. */
  const walk = (nodes: readonly LogicNode[], depth: number): void => {
    if (depth > maxDepth) throw tooDeep(maxDepth)
    for (const node of nodes) {
      if (++steps > maxSteps) throw tooManySteps(maxSteps)
      switch (node.kind) {
        case 'text':
          append(node.text, node.bytes)
          break
        case 'var': {
          const value = rootValue(node.name)
          if (value === undefined) {
            if (mode === 'inject') append(node.raw, utf8Length(node.raw))
          } else {
            const text = formatValue(value)
            append(text, utf8Length(text))
          }
          break
        }
        case 'item': {
          const value = itemValue(node.path)
          if (value !== undefined) {
            const text = formatValue(value)
            append(text, utf8Length(text))
          }
          break
        }
        case 'index': {
          const text = String(scopes[scopes.length - 1]?.index ?? '')
          append(text, text.length)
          break
        }
        case 'if': {
          const yes = truthy(refValue(node.test)) !== node.negate
          walk(yes ? node.body : node.otherwise, depth + 1)
          break
        }
        case 'each': {
          const list = refValue(node.list)
          if (list === undefined || list === null || list === false) {
            walk(node.otherwise, depth + 1)
            break
          }
          if (!Array.isArray(list)) throw notAList(node.list)
          if (list.length === 0) {
            walk(node.otherwise, depth + 1)
            break
          }
          for (let index = 0; index < list.length; index++) {
            if (++steps > maxSteps) throw tooManySteps(maxSteps)
            scopes.push({ item: list[index], index })
            walk(node.body, depth + 1)
            scopes.pop()
          }
          break
        }
        case 'include': {
          const child = options.include?.(node.ref)
          if (!child) {
            // Never resolved (a preview without lookups): shown as written, or nothing at invoke.
            if (mode === 'inject') append(node.raw, utf8Length(node.raw))
            break
          }
          if (!includedSet.has(node.ref.key)) {
            includedSet.add(node.ref.key)
            included.push(node.ref.key)
          }
          // An included prompt renders at the top level: the loop's item does not cross into it.
          const saved = scopes.splice(0, scopes.length)
          walk(child.nodes, depth + 1)
          scopes.push(...saved)
          break
        }
      }
    }
  }
  walk(template.nodes, 0)
  return { renderedContent: out, missingRequired, unresolved: [...unresolvedSet], included, bytes, steps }
}

function tooManySteps(maxSteps: number): AppError {
  return new AppError('RENDER_TOO_LARGE', `the template takes more than ${maxSteps} steps to render`, {
    maxSteps,
  })
}

function tooDeep(maxDepth: number): AppError {
  return new AppError(
    'RENDER_TOO_LARGE',
    `blocks and references nest deeper than ${maxDepth} levels (included parts count too)`,
    { maxDepth },
  )
}

function notAList(ref: LogicRef): AppError {
  const name =
    ref.kind === 'var' ? ref.name : ref.kind === 'item' ? ['this', ...ref.path].join('.') : '@index'
  return new AppError('VALIDATION_ERROR', `{{#each ${name}}} needs a list`, [
    {
      path: ref.kind === 'var' ? `/body/variables/${name}` : '/body/variables',
      message: `${name} must be an array`,
    },
  ])
}

/** Root variable names of a template: the logic grammar's when it has logic, the flat one's otherwise. */
export function templateVariableNames(source: string): readonly string[] | null {
  try {
    return compileLogic(source)?.names ?? null
  } catch (err) {
    // A syntax error is refused at save by its own check; detection keeps the flat names.
    if (err instanceof TemplateSyntaxError) return null
    throw err
  }
}

/**
 * The logic template of a source when it has logic; undefined when it has none or (an old
 * version) does not parse: the flat path renders it then.
 */
export function compileLogicIfAny(source: string): LogicTemplate | undefined {
  try {
    return compileLogic(source) ?? undefined
  } catch (err) {
    if (err instanceof TemplateSyntaxError) return undefined
    throw err
  }
}

/** The logic template of a source, or its flat nodes when it has no logic or (an old version) does not parse. */
export function compileLogicOrFlat(source: string, flat: CompiledTemplate): LogicTemplate {
  try {
    return compileLogic(source) ?? flatNodes(flat)
  } catch (err) {
    if (err instanceof TemplateSyntaxError) return flatNodes(flat)
    throw err
  }
}
