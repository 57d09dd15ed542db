import { describe, expect, it } from 'vitest'
import { type FinishedUnit, quantile, summarize } from './aggregate.ts'

const unit = (variant: number, over: Partial<FinishedUnit> = {}): FinishedUnit => ({
  variant,
  error: null,
  scores: { exact: 1 },
  passed: true,
  latencyMs: 10,
  inputTokens: 3,
  outputTokens: 2,
  ...over,
})

describe('summarize', () => {
  it('quantiles by nearest rank', () => {
    const xs = Array.from({ length: 100 }, (_, i) => i + 1)
    expect(quantile(xs, 0.5)).toBe(50)
    expect(quantile(xs, 0.95)).toBe(95)
    expect(quantile([], 0.5)).toBeNull()
    expect(quantile([7], 0.95)).toBe(7)
  })

  it('means, pass rate, latency, tokens and errors per variant, independent of order', () => {
    const units = [
      unit(0),
      unit(0, { scores: { exact: 0 }, passed: false, latencyMs: 30 }),
      unit(0, { error: 'boom', scores: {}, passed: false, latencyMs: null, inputTokens: 0, outputTokens: 0 }),
      unit(1, { scores: { exact: null }, passed: false }),
    ]
    const variants = [
      { promptId: 'a'.repeat(24), version: 1 },
      { promptId: 'a'.repeat(24), draft: true as const },
    ]
    const s = summarize(variants, ['exact'], units)
    expect(s[0]).toEqual({
      variant: 0,
      promptId: 'a'.repeat(24),
      label: 'v1',
      done: 3,
      errors: 1,
      evaluators: { exact: { mean: 0.5, count: 2 } },
      passRate: 0.333333,
      latencyMs: { p50: 10, p95: 30 },
      tokens: { input: 6, output: 4 },
    })
    expect(s[1]?.evaluators.exact).toEqual({ mean: null, count: 0 })
    expect(s[1]?.label).toBe('draft')
    expect(summarize(variants, ['exact'], [...units].reverse())).toEqual(s)
  })
})
