import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { KeyGuard } from '../src/keyGuard.ts'
import { RateLimits } from '../src/rateLimits.ts'

describe('failed API-key lookups per IP (issue 14, finding 9)', () => {
  const refused = () => Promise.reject(new AppError('INVALID_CREDENTIALS', 'invalid API key'))

  it('stops asking identity once an IP has failed its budget, and answers 429', async () => {
    const guard = new KeyGuard(new RateLimits(undefined), { points: 5, durationSeconds: 60 })
    let lookups = 0
    const lookup = () => {
      lookups++
      return refused()
    }
    const codes: string[] = []
    for (let i = 0; i < 20; i++) {
      const err = await guard.run('10.0.0.1', true, lookup).catch((e: AppError) => e)
      codes.push((err as AppError).code)
    }
    expect(codes.slice(0, 5)).toEqual(Array(5).fill('INVALID_CREDENTIALS'))
    expect(codes.slice(5)).toEqual(Array(15).fill('RATE_LIMITED'))
    expect(lookups).toBe(5)
    // Another IP is not affected; what needs no lookup (a JWT, a cached key) is never refused here.
    await expect(guard.run('10.0.0.2', true, async () => 'ok')).resolves.toBe('ok')
    await expect(guard.run('10.0.0.1', false, async () => 'cached')).resolves.toBe('cached')
    await expect(guard.run('10.0.0.1', false, refused)).rejects.toMatchObject({ code: 'INVALID_CREDENTIALS' })
  })

  it('reports every request it refuses to the refusal counter, as the other limits do', async () => {
    const refusals: string[] = []
    const guard = new KeyGuard(new RateLimits(undefined, (limiter) => refusals.push(limiter)), {
      points: 3,
      durationSeconds: 60,
    })
    for (let i = 0; i < 10; i++) await guard.run('10.0.0.4', true, refused).catch(() => {})
    expect(refusals).toEqual(Array(7).fill('bad-key-ip'))
  })

  it('does not count successes', async () => {
    const guard = new KeyGuard(new RateLimits(undefined), { points: 2, durationSeconds: 60 })
    for (let i = 0; i < 10; i++) {
      await expect(guard.run('10.0.0.3', true, async () => 'ok')).resolves.toBe('ok')
    }
  })
})
