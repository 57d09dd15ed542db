import { describe, expect, it } from 'vitest'
import { pickVariant, variantOfBucket } from './split.ts'

const split = {
  id: '65f0c0ffee0000000000abcd',
  variants: [
    { versionId: 'a', version: 1, weight: 20 },
    { versionId: 'b', version: 2, weight: 30 },
    { versionId: 'c', version: 3, weight: 50 },
  ],
}

describe('split: the sticky pick of a variant', () => {
  it('gives each of 1,000 subjects one variant over 10,000 invokes, in shares within 3 points of the weights', () => {
    const promptId = '65f0c0ffee0000000000aaaa'
    const first = new Map<string, number>()
    const served = [0, 0, 0]
    for (let i = 0; i < 10_000; i++) {
      const subject = `user-${i % 1000}`
      const v = pickVariant(split, promptId, 'production', subject)
      const before = first.get(subject)
      if (before === undefined) first.set(subject, v)
      else expect(v).toBe(before)
      served[v] = (served[v] ?? 0) + 1
    }
    expect(first.size).toBe(1000)
    const shares = served.map((n) => (n / 10_000) * 100)
    for (const [i, share] of shares.entries()) {
      expect(
        Math.abs(share - (split.variants[i]?.weight ?? 0)),
        `variant ${i}: ${share}%`,
      ).toBeLessThanOrEqual(3)
    }
  })

  it('reshuffles with a new split id, and picks at random without a subject', () => {
    const moved = Array.from({ length: 200 }, (_, i) => `s${i}`).filter(
      (s) =>
        pickVariant(split, 'p', 'production', s) !==
        pickVariant({ ...split, id: 'other' }, 'p', 'production', s),
    )
    expect(moved.length).toBeGreaterThan(0)
    expect(pickVariant(split, 'p', 'production', undefined, () => 0)).toBe(0)
    expect(pickVariant(split, 'p', 'production', undefined, () => 0.25)).toBe(1)
    expect(pickVariant(split, 'p', 'production', undefined, () => 0.9999)).toBe(2)
  })

  it('maps buckets to variants by cumulative weight', () => {
    expect(variantOfBucket(split, 0)).toBe(0)
    expect(variantOfBucket(split, 1999)).toBe(0)
    expect(variantOfBucket(split, 2000)).toBe(1)
    expect(variantOfBucket(split, 4999)).toBe(1)
    expect(variantOfBucket(split, 5000)).toBe(2)
    expect(variantOfBucket(split, 9999)).toBe(2)
  })
})
