import { describe, expect, it } from 'vitest'
import { isId, newId, randomHex } from './ids.ts'

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
})
