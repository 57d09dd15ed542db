import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import type { FastifyRequest } from 'fastify'
import { loadGatewayConfig } from '../src/app.ts'
import { RequestLimits } from '../src/limits.ts'
import type { RoutePolicy } from '../src/policy.ts'
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

describe('the login limit per email', () => {
  const config = loadGatewayConfig({ NODE_ENV: 'test', INTERNAL_AUTH_SECRET: 'x'.repeat(64) })
  const login = { limit: 'login' } as RoutePolicy
  const request = (email: unknown) =>
    ({ ip: '203.0.113.9', peekedBody: { email, password: 'guess' } }) as unknown as FastifyRequest

  it('refuses an email that is no string (an array would be coerced past the limit by the service) or too long for one (the limiter keys on it)', async () => {
    const limits = new RequestLimits(new RateLimits(undefined), config)
    for (const email of [['carol@example.com'], 123, { a: 1 }, null, `${'a'.repeat(1_000_000)}@x.com`]) {
      const refused = await limits.public(request(email), login).catch((e: unknown) => e)
      expect(refused).toBeInstanceOf(AppError)
      expect((refused as AppError).code).toBe('VALIDATION_ERROR')
    }
  })

  it('takes a point per attempt of a string email, whatever its case and spaces', async () => {
    const limits = new RequestLimits(new RateLimits(undefined), config)
    const points = config.RATE_LIMIT_LOGIN_EMAIL_POINTS
    for (let i = 0; i < points; i++) {
      await limits.public(request(i % 2 ? ' Carol@Example.com ' : 'carol@example.com'), login)
    }
    const refused = await limits.public(request('CAROL@example.com'), login).catch((e: unknown) => e)
    expect((refused as AppError).code).toBe('RATE_LIMITED')
  })
})
