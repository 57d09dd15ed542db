import type { ExperimentVariant, VariantSummary } from '@pm/contracts'

/** What the aggregates need of one finished unit. */
export interface FinishedUnit {
  variant: number
  error: string | null
  scores: Record<string, number | null>
  passed: boolean
  latencyMs: number | null
  inputTokens: number
  outputTokens: number
}

/** Nearest-rank quantile of sorted values; null for none. */
export function quantile(sorted: readonly number[], q: number): number | null {
  if (sorted.length === 0) return null
  const rank = Math.max(1, Math.ceil(q * sorted.length))
  return sorted[Math.min(rank, sorted.length) - 1] ?? null
}

export function variantLabel(v: ExperimentVariant): string {
  if (v.draft) return 'draft'
  if (v.version !== undefined) return `v${v.version}`
  if (v.env !== undefined) return v.env
  return 'latest'
}

const round = (x: number): number => Math.round(x * 1e6) / 1e6

/**
 * Per variant: how many units are done and errored, the mean of each evaluator over the units
 * it scored, the pass rate over the units done, latency p50/p95 of the units that answered, and
 * the tokens spent. Pure: the same units give the same summary, in whatever order they came.
 */
export function summarize(
  variants: readonly ExperimentVariant[],
  evaluatorNames: readonly string[],
  units: Iterable<FinishedUnit>,
): VariantSummary[] {
  const acc = variants.map(() => ({
    done: 0,
    errors: 0,
    passed: 0,
    latencies: [] as number[],
    input: 0,
    output: 0,
    sums: new Map<string, { sum: number; count: number }>(
      evaluatorNames.map((n) => [n, { sum: 0, count: 0 }]),
    ),
  }))
  for (const u of units) {
    const a = acc[u.variant]
    if (!a) continue
    a.done++
    if (u.error !== null) a.errors++
    if (u.passed) a.passed++
    if (u.latencyMs !== null && u.error === null) a.latencies.push(u.latencyMs)
    a.input += u.inputTokens
    a.output += u.outputTokens
    for (const [name, value] of Object.entries(u.scores)) {
      const s = a.sums.get(name)
      if (s && value !== null) {
        s.sum += value
        s.count++
      }
    }
  }
  return variants.map((v, i) => {
    const a = acc[i]
    if (!a) throw new Error('unreachable')
    const sorted = [...a.latencies].sort((x, y) => x - y)
    const evaluators: VariantSummary['evaluators'] = {}
    for (const [name, s] of a.sums)
      evaluators[name] = { mean: s.count === 0 ? null : round(s.sum / s.count), count: s.count }
    return {
      variant: i,
      promptId: v.promptId,
      label: variantLabel(v),
      done: a.done,
      errors: a.errors,
      evaluators,
      passRate: a.done === 0 ? null : round(a.passed / a.done),
      latencyMs: { p50: quantile(sorted, 0.5), p95: quantile(sorted, 0.95) },
      tokens: { input: a.input, output: a.output },
    }
  })
}
