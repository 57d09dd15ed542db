import { describe, expect, it } from 'vitest'
import { isId, newId, randomDraw, randomHex, randomHexAt, randomHexSlice, randomPool } from './ids.ts'

describe('newId', () => {
  it('is 24 lowercase hex, its first 4 bytes the seconds', () => {
    const before = Math.floor(Date.now() / 1000)
    const id = newId()
    expect(isId(id)).toBe(true)
    const seconds = Number.parseInt(id.slice(0, 8), 16)
    expect(seconds).toBeGreaterThanOrEqual(before)
    expect(seconds).toBeLessThanOrEqual(Math.floor(Date.now() / 1000))
  })

  it('sorts in the order this process made them, and never repeats', () => {
    const ids = Array.from({ length: 20_000 }, () => newId())
    expect([...ids].sort()).toEqual(ids)
    expect(new Set(ids).size).toBe(ids.length)
    // One process part for all of them.
    expect(new Set(ids.map((id) => id.slice(8, 18))).size).toBe(1)
  })
})

describe('randomHex', () => {
  it('gives the bytes asked for, fresh each time', () => {
    const a = randomHex(16)
    const b = randomHex(16)
    expect(a).toMatch(/^[0-9a-f]{32}$/)
    expect(a).not.toBe(b)
  })

  it('is the pool’s bytes as they are drawn: no two draws share a byte, across new pools', () => {
    // 3,000 draws of 7 bytes (over five pools of 4 KiB), each read at once, in turn as a string
    // of its own, as a slice of the pool's hex and in the pool itself: each is the hex of bytes no
    // draw before it had, so no two are equal; a draw read in the pool is its bytes' hex. A
    // slice from a stale hex of the pool would repeat an earlier draw.
    const seen = new Set<string>()
    for (let i = 0; i < 3_000; i++) {
      let hex: string
      if (i % 3 === 0) hex = randomHex(7)
      else if (i % 3 === 1) hex = randomHexSlice(7)
      else {
        const at = randomDraw(7)
        hex = randomHexAt(at, 7)
        expect(hex).toBe(Buffer.from(randomPool.subarray(at, at + 7)).toString('hex'))
      }
      expect(hex).toMatch(/^[0-9a-f]{14}$/)
      seen.add(hex)
    }
    expect(seen.size).toBe(3_000)
  })
})
