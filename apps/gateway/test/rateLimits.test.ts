import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { type LimitOutcome, RateLimits, rateLimitHeaders } from '../src/rateLimits.ts'

describe('rate limits (in memory)', () => {
  it('counts per key and window, refuses with the outcome, and refunds', async () => {
    const limits = new RateLimits(undefined)
    const first = await limits.consume('api-key', 'k1', 3, 60)
    expect(first).toMatchObject({ policy: 'api-key', limit: 3, remaining: 2, windowSeconds: 60 })
    await limits.consume('api-key', 'k1', 3, 60)
    await limits.consume('api-key', 'k1', 3, 60)
    const refused = await limits.consume('api-key', 'k1', 3, 60).catch((e: unknown) => e)
    expect(refused).toBeInstanceOf(AppError)
    expect((refused as AppError).code).toBe('RATE_LIMITED')
    const outcome = (refused as AppError).details as LimitOutcome
    expect(outcome.remaining).toBe(0)
    expect(outcome.resetSeconds).toBeGreaterThanOrEqual(1)
    expect(outcome.resetSeconds).toBeLessThanOrEqual(60)
    // Another key has its own budget; another limit (points) is another counter.
    expect((await limits.consume('api-key', 'k2', 3, 60)).remaining).toBe(2)
    expect((await limits.consume('api-key', 'k1', 10, 60)).remaining).toBe(9)

    await limits.consume('login-email', 'a@example.com', 2, 60)
    await limits.consume('login-email', 'a@example.com', 2, 60)
    await limits.reward('login-email', 'a@example.com', 2, 60)
    expect((await limits.consume('login-email', 'a@example.com', 2, 60)).remaining).toBe(0)
  })

  it('writes the IETF RateLimit headers', () => {
    expect(
      rateLimitHeaders({ policy: 'api-key', limit: 100, remaining: 42, resetSeconds: 17, windowSeconds: 60 }),
    ).toEqual({
      'ratelimit-policy': '"api-key";q=100;w=60',
      ratelimit: '"api-key";r=42;t=17',
    })
  })
})
