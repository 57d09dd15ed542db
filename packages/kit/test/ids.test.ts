import { describe, expect, it } from 'vitest'
import { isId, newId } from '../src/ids.ts'

describe('newId', () => {
  it('makes ObjectId-shaped ids, the current second first, none twice across pool refills', () => {
    const seconds = Math.floor(Date.now() / 1000)
    // 2,000 ids use four refills of the 512-id pool.
    const ids = Array.from({ length: 2_000 }, () => newId())
    for (const id of ids) {
      expect(isId(id)).toBe(true)
      expect(Math.abs(Number.parseInt(id.slice(0, 8), 16) - seconds)).toBeLessThanOrEqual(1)
    }
    expect(new Set(ids).size).toBe(ids.length)
    expect(new Set(ids.map((id) => id.slice(8))).size).toBe(ids.length)
  })
})
