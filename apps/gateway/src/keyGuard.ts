import { AppError } from '@pm/contracts'
import type { RateLimits } from './rateLimits.ts'

export interface KeyGuardOptions {
  points: number
  durationSeconds: number
}

/**
 * Limits failed API-key lookups per client IP (issue 14, finding 9: 1,000 random well-formed
 * keys in a second cost 1,000 identity lookups). Only API keys count: a JWT is verified locally
 * at no cost to identity, and a key whose answer is cached costs nothing either. An IP over its
 * budget gets 429 before any further lookup; a successful key is never counted, and a valid key
 * already cached keeps working, so a client is affected only while its IP keeps failing with
 * new keys.
 */
export class KeyGuard {
  private readonly limits: RateLimits
  private readonly opts: KeyGuardOptions

  constructor(limits: RateLimits, opts: KeyGuardOptions) {
    this.limits = limits
    this.opts = opts
  }

  /**
   * Runs `authenticate`; `lookup` tells whether it will ask identity (an API key whose answer is
   * not cached). Only those are limited: a cached key, valid or not, costs identity nothing.
   */
  async run<T>(ip: string, lookup: boolean, authenticate: () => Promise<T>): Promise<T> {
    if (!lookup) return authenticate()
    const { points, durationSeconds } = this.opts
    await this.limits.assertLeft('bad-key-ip', ip, points, durationSeconds)
    try {
      return await authenticate()
    } catch (err) {
      if (err instanceof AppError && err.code === 'INVALID_CREDENTIALS') {
        // Over the budget with this failure: the answer is the 429 (with Retry-After).
        await this.limits.consume('bad-key-ip', ip, points, durationSeconds)
      }
      throw err
    }
  }
}
