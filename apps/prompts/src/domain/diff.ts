import type { Variable } from '@pm/contracts'
import { structuredPatch } from 'diff'

/** Lines of unchanged text around each change, as in `git diff`. */
export const DIFF_CONTEXT_LINES = 3

export interface DiffSide {
  template: string
  variables: Variable[]
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

export interface VersionDiff {
  from: string
  to: string
  template: { hunks: DiffHunk[]; added: number; removed: number }
  variables: { added: Variable[]; removed: Variable[]; changed: VariableChange[] }
}

function diffTemplate(from: string, to: string): VersionDiff['template'] {
  if (from === to) return { hunks: [], added: 0, removed: 0 }
  const patch = structuredPatch('template', 'template', from, to, undefined, undefined, {
    context: DIFF_CONTEXT_LINES,
  })
  let added = 0
  let removed = 0
  // Copied field by field so the response carries the documented shape and nothing of the library's.
  const hunks = patch.hunks.map((h): DiffHunk => {
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
    template: diffTemplate(from.template, to.template),
    variables: diffVariables(from.variables, to.variables),
  }
}
