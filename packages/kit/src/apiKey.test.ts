import { describe, expect, it } from 'vitest'
import { apiKeyPrefix, generateApiKey, hashApiKey, isWellFormedApiKey } from './apiKey.ts'

describe('api keys', () => {
  it('generates well-formed, distinct keys', () => {
    const a = generateApiKey()
    const b = generateApiKey()
    expect(a).toMatch(/^pk_[0-9A-Za-z]{38}$/)
    expect(a).not.toBe(b)
    expect(isWellFormedApiKey(a)).toBe(true)
    expect(apiKeyPrefix(a)).toBe(a.slice(0, 10))
    expect(hashApiKey(a)).toMatch(/^[0-9a-f]{64}$/)
  })

  it('refuses a key whose checksum does not match', () => {
    const key = generateApiKey()
    const flipped = key.slice(0, 5) + (key[5] === 'a' ? 'b' : 'a') + key.slice(6)
    expect(isWellFormedApiKey(flipped)).toBe(false)
    expect(isWellFormedApiKey('pk_short')).toBe(false)
    expect(isWellFormedApiKey(`sk_${key.slice(3)}`)).toBe(false)
  })
})
