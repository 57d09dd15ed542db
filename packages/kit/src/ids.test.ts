import { describe, expect, it } from 'vitest'
import { isId, newId, randomDraw, randomHex, randomHexAt, randomPool } from './ids.ts'

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
    // 2,000 draws of 7 bytes (over three pools of 4 KiB), read at once both ways: each is the hex
    // of bytes no draw before it had, so no two are equal, and a draw's hex is its bytes'.
    const seen = new Set<string>()
    for (let i = 0; i < 2_000; i++) {
      const hex = i % 2 === 0 ? randomHex(7) : undefined
      const at = hex === undefined ? randomDraw(7) : -1
      const drawn = hex ?? randomHexAt(at, 7)
      if (hex === undefined) expect(drawn).toBe(randomPool.toString('hex', at, at + 7))
      expect(drawn).toMatch(/^[0-9a-f]{14}$/)
      seen.add(drawn)
    }
    expect(seen.size).toBe(2_000)
  })
})
