import { isDeepStrictEqual } from 'node:util'
import { type ChatMessage, CONFIG_MAX_DEPTH, type PromptConfig, type Variable } from '@pm/contracts'
import { nestsDeeperThan } from '@pm/kit'
import { structuredPatch } from 'diff'

/** Lines of unchanged text around each change, as in `git diff`. */
export const DIFF_CONTEXT_LINES = 3

export interface DiffSide {
  template: string
  variables: Variable[]
  /** Chat prompts only. */
  messages?: ChatMessage[]
  config?: PromptConfig
}

export interface DiffHunk {
  oldStart: number
  oldLines: number
  newStart: number
  newLines: number
  /** Unified-diff lines: ' ' context, '-' removed, '+' added, '\' no-newline marker. */
  lines: string[]
}

export interface VariableChange {
  name: string
  before: Variable
  after: Variable
}

export interface MessageChange {
  index: number
  before: ChatMessage
  after: ChatMessage
}

export interface VersionDiff {
  from: string
  to: string
  template: { hunks: DiffHunk[]; added: number; removed: number }
  variables: { added: Variable[]; removed: Variable[]; changed: VariableChange[] }
  messages: {
    added: { index: number; message: ChatMessage }[]
    removed: { index: number; message: ChatMessage }[]
    changed: MessageChange[]
  }
  config: { changed: boolean; before: PromptConfig | null; after: PromptConfig | null; hunks: DiffHunk[] }
}

/**
 * Templates seldom end with a newline. Diffed as they are, a line appended after the last one
 * would show that last line removed and added again (it gains a newline). When neither side ends
 * with one, each non-empty side gets one for the comparison: an appended line is one added
 * line. When just one side ends with a newline, that difference is real and shown as such.
 */
function lineEnded(from: string, to: string): [string, string] {
  if (from.endsWith('\n') || to.endsWith('\n')) return [from, to]
  return [from === '' ? from : `${from}\n`, to === '' ? to : `${to}\n`]
}

/**
 * The most lines added plus removed that a diff looks for. The search costs about the square of
 * this, on the event loop (two different 8,000-line templates took 9 s; with the bound, under
 * 0.1 s at the 100,000-character template limit). Past it the change is answered as one hunk
 * replacing every line: more than a reader would follow line by line anyway.
 */
export const DIFF_MAX_EDIT_LENGTH = 1000

/** Unified-diff lines of one side, each prefixed with `mark`, with the no-newline marker. */
function markedLines(text: string, mark: '-' | '+'): string[] {
  if (text === '') return []
  const ended = text.endsWith('\n')
  const lines = (ended ? text.slice(0, -1) : text).split('\n').map((line) => `${mark}${line}`)
  if (!ended) lines.push('\\ No newline at end of file')
  return lines
}

/** One hunk that removes every line of `a` and adds every line of `b`: a diff given up on. */
function wholeReplacement(a: string, b: string): DiffHunk {
  const removed = markedLines(a, '-')
  const added = markedLines(b, '+')
  const count = (lines: string[]) => lines.filter((l) => !l.startsWith('\\')).length
  // Numbered as jsdiff numbers its hunks: from line 1, an empty side too.
  return {
    oldStart: 1,
    oldLines: count(removed),
    newStart: 1,
    newLines: count(added),
    lines: [...removed, ...added],
  }
}

/** A line diff of two texts (a template, a config's JSON): unified hunks and the lines each way. */
function diffLines(from: string, to: string): VersionDiff['template'] {
  if (from === to) return { hunks: [], added: 0, removed: 0 }
  const [a, b] = lineEnded(from, to)
  const patch = structuredPatch('text', 'text', a, b, undefined, undefined, {
    context: DIFF_CONTEXT_LINES,
    maxEditLength: DIFF_MAX_EDIT_LENGTH,
  })
  let added = 0
  let removed = 0
  // Copied field by field so the response carries the documented shape and nothing of the library's.
  const hunks = (patch?.hunks ?? [wholeReplacement(a, b)]).map((h): DiffHunk => {
    for (const line of h.lines) {
      if (line.startsWith('+')) added++
      else if (line.startsWith('-')) removed++
    }
    return {
      oldStart: h.oldStart,
      oldLines: h.oldLines,
      newStart: h.newStart,
      newLines: h.newLines,
      lines: [...h.lines],
    }
  })
  return { hunks, added, removed }
}

function sameVariable(a: Variable, b: Variable): boolean {
  // Only the fields a Variable defines: stray stored keys must not show up as changes.
  return a.required === b.required && a.description === b.description && a.defaultValue === b.defaultValue
}

function byName(variables: Variable[]): Map<string, Variable> {
  const map = new Map<string, Variable>()
  // Names are unique in a valid list; should one repeat, the first is the one that renders.
  for (const v of variables) if (!map.has(v.name)) map.set(v.name, v)
  return map
}

function diffVariables(from: Variable[], to: Variable[]): VersionDiff['variables'] {
  const before = byName(from)
  const after = byName(to)
  const added: Variable[] = []
  const changed: VariableChange[] = []
  for (const [name, next] of after) {
    const prev = before.get(name)
    if (prev === undefined) added.push(next)
    else if (!sameVariable(prev, next)) changed.push({ name, before: prev, after: next })
  }
  const removed = [...before.values()].filter((v) => !after.has(v.name))
  return { added, removed, changed }
}

function sameMessage(a: ChatMessage, b: ChatMessage): boolean {
  // Only the fields a message defines, as with variables.
  if ('type' in a || 'type' in b) return 'type' in a && 'type' in b && a.name === b.name
  return a.role === b.role && a.content === b.content
}

/** By index, like a list of slots: what differs at an index is changed; the longer side's tail is added or removed. */
function diffMessages(from: ChatMessage[], to: ChatMessage[]): VersionDiff['messages'] {
  const changed: MessageChange[] = []
  const shared = Math.min(from.length, to.length)
  for (let index = 0; index < shared; index++) {
    const before = from[index]
    const after = to[index]
    if (before && after && !sameMessage(before, after)) changed.push({ index, before, after })
  }
  const added = to.slice(shared).map((message, i) => ({ index: shared + i, message }))
  const removed = from.slice(shared).map((message, i) => ({ index: shared + i, message }))
  return { added, removed, changed }
}

/** Objects' keys sorted at every depth (arrays keep their order): how a config is compared as text. */
function sortedKeys(value: unknown): unknown {
  if (Array.isArray(value)) return value.map(sortedKeys)
  if (value === null || typeof value !== 'object') return value
  const entries = Object.entries(value as Record<string, unknown>).sort(([a], [b]) =>
    a < b ? -1 : a > b ? 1 : 0,
  )
  return Object.fromEntries(entries.map(([k, v]) => [k, sortedKeys(v)]))
}

/** A config as its diff shows it: JSON, two spaces an indent, keys sorted; none is no text. */
export function configText(config: PromptConfig | null): string {
  return config === null ? '' : JSON.stringify(sortedKeys(config), null, 2)
}

/**
 * Whether the config changed (as a value: the order of its keys is no change), both sides, and
 * a line diff of their JSON, keys sorted, so that one changed setting is one changed line.
 */
function diffConfig(from: PromptConfig | undefined, to: PromptConfig | undefined): VersionDiff['config'] {
  const before = from ?? null
  const after = to ?? null
  const changed = !isDeepStrictEqual(before, after)
  // A config stored before CONFIG_MAX_DEPTH may nest deeper: its pretty JSON grows with the
  // square of its depth, and the recursion could overflow. It is compared whole (`changed`).
  const tooDeep = [before, after].some((c) => c !== null && nestsDeeperThan(c, CONFIG_MAX_DEPTH))
  return {
    changed,
    before,
    after,
    hunks: changed && !tooDeep ? diffLines(configText(before), configText(after)).hunks : [],
  }
}

/**
 * Compares two snapshots of a prompt (versions, or a version and the draft). `labels` name the
 * two sides in the result, e.g. "v3" and "v5". Added and changed variables keep the order of
 * `to`, removed ones the order of `from`.
 */
export function diffVersions(
  from: DiffSide,
  to: DiffSide,
  labels: { from: string; to: string },
): VersionDiff {
  return {
    from: labels.from,
    to: labels.to,
    template: diffLines(from.template, to.template),
    variables: diffVariables(from.variables, to.variables),
    messages: diffMessages(from.messages ?? [], to.messages ?? []),
    config: diffConfig(from.config, to.config),
  }
}
