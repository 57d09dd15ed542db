import { describe, expect, it } from 'vitest'
import { classifyResponse, MAX_ATTEMPTS, nextAttemptDelayMs, RETRY_SCHEDULE_MS } from './retry.ts'

const HOUR = 3_600_000

describe('RETRY_SCHEDULE_MS', () => {
  it('is ten attempts: immediately, 5 s, 5 min, 30 min, 2 h, 5 h, 10 h, 14 h, 20 h, 24 h', () => {
    expect(RETRY_SCHEDULE_MS).toEqual([
      0,
      5_000,
      300_000,
      1_800_000,
      2 * HOUR,
      5 * HOUR,
      10 * HOUR,
      14 * HOUR,
      20 * HOUR,
      24 * HOUR,
    ])
    expect(MAX_ATTEMPTS).toBe(10)
  })
})

describe('nextAttemptDelayMs', () => {
  const middle = () => 0.5

  it('follows the schedule without jitter at the midpoint', () => {
    const delays = Array.from({ length: 9 }, (_, i) => nextAttemptDelayMs(i + 1, { random: middle }))
    expect(delays).toEqual(RETRY_SCHEDULE_MS.slice(1))
  })

  it('returns null once the tenth attempt has failed', () => {
    expect(nextAttemptDelayMs(10)).toBeNull()
    expect(nextAttemptDelayMs(11)).toBeNull()
  })

  it('jitters by at most ±20%', () => {
    expect(nextAttemptDelayMs(1, { random: () => 0 })).toBe(4_000)
    expect(nextAttemptDelayMs(1, { random: () => 0.999999 })).toBe(6_000)
    for (let i = 0; i < 200; i++) {
      const d = nextAttemptDelayMs(4)
      expect(d).toBeGreaterThanOrEqual(0.8 * 2 * HOUR)
      expect(d).toBeLessThanOrEqual(1.2 * 2 * HOUR)
    }
  })

  it('scales the whole schedule', () => {
    expect(nextAttemptDelayMs(1, { scale: 0.001, random: middle })).toBe(5)
    expect(nextAttemptDelayMs(9, { scale: 0.001, random: middle })).toBe(86_400)
    expect(nextAttemptDelayMs(3, { scale: 0, random: middle })).toBe(0)
  })

  it('rejects nonsense attempt numbers and scales', () => {
    expect(() => nextAttemptDelayMs(0)).toThrow(RangeError)
    expect(() => nextAttemptDelayMs(1.5)).toThrow(RangeError)
    expect(() => nextAttemptDelayMs(1, { scale: -1 })).toThrow(RangeError)
    expect(() => nextAttemptDelayMs(1, { scale: Number.NaN })).toThrow(RangeError)
  })
})

describe('classifyResponse', () => {
  it.each([200, 201, 202, 204, 299])('%s is success', (status) => {
    expect(classifyResponse(status)).toBe('success')
  })

  it('410 Gone disables the endpoint', () => {
    expect(classifyResponse(410)).toBe('disable')
  })

  it.each([null, 100, 301, 302, 304, 400, 401, 403, 404, 408, 413, 429, 500, 502, 503, 504])(
    '%s is retried',
    (status) => {
      expect(classifyResponse(status)).toBe('retry')
    },
  )
})
