import { type AuditQuery, SPLIT_MAX_VARIANTS, SPLIT_MIN_VARIANTS, type Split } from '@pm/contracts'

/**
 * Pure helpers of the release-safety pages (DESIGN section 15): the split editor's checks,
 * how a promote is described, and the audit log's filters as URL parameters. Tested without a
 * browser (test/release.test.ts).
 */

/** One row of the split editor: a version (its id; '' while none is chosen) and its weight as typed. */
export interface SplitRow {
  versionId: string
  weight: string
}

/** What the service answers for a split: the sum of the weights that are whole numbers. */
export function splitTotal(rows: readonly SplitRow[]): number {
  return rows.reduce((sum, r) => sum + (/^\d+$/.test(r.weight.trim()) ? Number(r.weight) : 0), 0)
}

/**
 * Why the service would refuse this split, in the words the editor shows (none: it may be
 * saved): 2 to 5 different versions, each weight a whole number from 1 to 99, summing to 100.
 */
export function splitProblems(rows: readonly SplitRow[]): string[] {
  const problems: string[] = []
  if (rows.length < SPLIT_MIN_VARIANTS || rows.length > SPLIT_MAX_VARIANTS) {
    problems.push(`A split has ${SPLIT_MIN_VARIANTS} to ${SPLIT_MAX_VARIANTS} versions.`)
  }
  if (rows.some((r) => r.versionId === '')) problems.push('Choose a version in every row.')
  const chosen = rows.map((r) => r.versionId).filter(Boolean)
  if (new Set(chosen).size !== chosen.length) problems.push('Each version can appear only once.')
  const bad = rows.filter((r) => {
    const w = r.weight.trim()
    return !/^\d+$/.test(w) || Number(w) < 1 || Number(w) > 99
  })
  if (bad.length > 0) problems.push('Each weight is a whole number from 1 to 99.')
  const total = splitTotal(rows)
  if (total !== 100) problems.push(`The weights add up to ${total}%; they must add up to 100%.`)
  return problems
}

/** The editor's rows as the promote request's `split`. Only for rows without problems. */
export function splitRequest(rows: readonly SplitRow[]): { versionId: string; weight: number }[] {
  return rows.map((r) => ({ versionId: r.versionId, weight: Number(r.weight.trim()) }))
}

/**
 * The editor's first rows: the split in place, or the two newest versions half and half (the
 * newest first: the version being rolled out).
 */
export function initialSplitRows(current: Split | undefined, versionIds: readonly string[]): SplitRow[] {
  if (current) return current.variants.map((v) => ({ versionId: v.versionId, weight: String(v.weight) }))
  return [
    { versionId: versionIds[0] ?? '', weight: '50' },
    { versionId: versionIds[1] ?? '', weight: '50' },
  ]
}

/** What a promote pinned: one version, or a split. */
export interface Target {
  versionId: string
  version: number
  split?: Split | undefined
}

/** "v3", or "v3 90% · v2 10%" for a split. */
export function describeTarget(t: Target): string {
  if (!t.split) return `v${t.version}`
  return t.split.variants.map((v) => `v${v.version} ${v.weight}%`).join(' · ')
}

/** Whether two promotes pinned the same thing (the same version, or the same versions and weights). */
export function sameTarget(a: Target, b: Target): boolean {
  if (!a.split || !b.split) return !a.split && !b.split && a.versionId === b.versionId
  const key = (s: Split) => s.variants.map((v) => `${v.versionId}:${v.weight}`).join(',')
  return key(a.split) === key(b.split)
}

/** Each variant's share of the invocations counted so far, in whole percent (none counted: null). */
export function observedShares(split: Split): (number | null)[] {
  const total = split.variants.reduce((sum, v) => sum + (v.invocations ?? 0), 0)
  return split.variants.map((v) => (total === 0 ? null : Math.round(((v.invocations ?? 0) * 100) / total)))
}

/** The audit log's filters (page excluded), as the URL keeps them. */
export type AuditFilters = Pick<AuditQuery, 'actor' | 'action' | 'resourceId' | 'from' | 'to'>
const FILTER_KEYS = ['actor', 'action', 'resourceId', 'from', 'to'] as const

export function auditFiltersFrom(params: URLSearchParams): AuditFilters {
  const filters: AuditFilters = {}
  for (const key of FILTER_KEYS) {
    const value = params.get(key)?.trim()
    if (value) filters[key] = value
  }
  return filters
}

export function auditFiltersToParams(filters: AuditFilters, page = 1): URLSearchParams {
  const params = new URLSearchParams()
  for (const key of FILTER_KEYS) {
    const value = filters[key]
    if (value) params.set(key, value)
  }
  if (page > 1) params.set('page', String(page))
  return params
}

/** Why the service would refuse these filters (400): checked before asking. */
export function auditFilterProblems(filters: AuditFilters): string[] {
  const problems: string[] = []
  if (filters.action && !/^[a-z][a-z0-9_.-]*$/.test(filters.action)) {
    problems.push('An action is lower case, like prompt.published.')
  }
  if (filters.resourceId && !/^[A-Za-z0-9_-]+$/.test(filters.resourceId)) {
    problems.push('A resource id has letters, digits, - and _ only.')
  }
  if (filters.from && filters.to && filters.from > filters.to) problems.push('"From" is after "To".')
  return problems
}

/**
 * A `datetime-local` field's value (local time to the minute, no zone) as an ISO timestamp;
 * '' stays ''. With `endOfMinute` (a "to" bound), the last millisecond of that minute, so
 * entries made during it are included.
 */
export function localToIso(local: string, endOfMinute = false): string {
  if (!local) return ''
  const date = new Date(local)
  if (Number.isNaN(date.getTime())) return ''
  if (endOfMinute) date.setSeconds(59, 999)
  return date.toISOString()
}

/** An ISO timestamp as a `datetime-local` field's value (local time, to the minute). */
export function isoToLocal(iso: string | undefined): string {
  if (!iso) return ''
  const date = new Date(iso)
  if (Number.isNaN(date.getTime())) return ''
  const pad = (n: number) => String(n).padStart(2, '0')
  return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())}T${pad(date.getHours())}:${pad(date.getMinutes())}`
}

/**
 * The environment card's line under a split: which version served the invoke it shows, once
 * there is one (`version` undefined: nothing rendered yet, the variables waiting for values).
 */
export function splitServedBy(version: number | undefined): string {
  const picks = 'Under a split each invoke picks a variant'
  return version === undefined ? `${picks}.` : `${picks}; this one was served by version ${version}.`
}
