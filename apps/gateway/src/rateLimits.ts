import { AppError } from '@pm/contracts'
import type { Redis } from 'ioredis'
import {
  type RateLimiterAbstract,
  RateLimiterMemory,
  RateLimiterRedis,
  RateLimiterRes,
} from 'rate-limiter-flexible'

export interface LimitOutcome {
  policy: string
  limit: number
  remaining: number
  resetSeconds: number
  windowSeconds: number
}

/**
 * Fixed-window limits with rate-limiter-flexible. With Redis they are shared by every
 * gateway replica; each Redis limiter carries an in-memory insurance limiter that takes
 * over while Redis is unreachable, so requests keep being limited (per replica) and served.
 */
export class RateLimits {
  private readonly redis: Redis | undefined
  private readonly limiters = new Map<string, RateLimiterAbstract>()
  private readonly onRefused: ((limiter: string) => void) | undefined

  /** `onRefused` is told the limiter of each request refused (metrics). */
  constructor(redis: Redis | undefined, onRefused?: (limiter: string) => void) {
    this.redis = redis
    this.onRefused = onRefused
  }

  private limiter(name: string, points: number, duration: number): RateLimiterAbstract {
    const id = `${name}:${points}:${duration}`
    let limiter = this.limiters.get(id)
    if (!limiter) {
      const keyPrefix = `pm:rl:${id}`
      const memory = new RateLimiterMemory({ keyPrefix, points, duration })
      limiter = this.redis
        ? new RateLimiterRedis({
            storeClient: this.redis,
            keyPrefix,
            points,
            duration,
            insuranceLimiter: memory,
            // While Redis is down, go to the insurance limiter at once instead of waiting.
            rejectIfRedisNotReady: true,
          })
        : memory
      this.limiters.set(id, limiter)
    }
    return limiter
  }

  /**
   * Throws RATE_LIMITED when the key has no point left, without consuming one (a refusal all
   * the same: `onRefused` is told). A limiter that cannot be read (Redis down and no insurance
   * answer) lets the request through.
   */
  async assertLeft(name: string, key: string, points: number, duration: number): Promise<void> {
    const res = await this.limiter(name, points, duration)
      .get(key)
      .catch(() => null)
    if (res && res.consumedPoints >= points) {
      const o = outcome(name, points, duration, res)
      this.onRefused?.(name)
      throw new AppError('RATE_LIMITED', 'too many requests', o, {
        'retry-after': String(o.resetSeconds),
        ...rateLimitHeaders(o),
      })
    }
  }

  /** Gives one point back. */
  async reward(name: string, key: string, points: number, duration: number): Promise<void> {
    await this.limiter(name, points, duration).reward(key, 1)
  }

  /**
   * Consumes one point; when over, throws RATE_LIMITED with the outcome in details and the
   * Retry-After and RateLimit headers attached.
   */
  async consume(name: string, key: string, points: number, duration: number): Promise<LimitOutcome> {
    const limiter = this.limiter(name, points, duration)
    try {
      const res = await limiter.consume(key)
      return outcome(name, points, duration, res)
    } catch (err) {
      if (err instanceof RateLimiterRes) {
        const o = outcome(name, points, duration, err)
        this.onRefused?.(name)
        throw new AppError('RATE_LIMITED', 'too many requests', o, {
          'retry-after': String(o.resetSeconds),
          ...rateLimitHeaders(o),
        })
      }
      throw err
    }
  }
}

function outcome(policy: string, limit: number, windowSeconds: number, res: RateLimiterRes): LimitOutcome {
  return {
    policy,
    limit,
    remaining: Math.max(0, res.remainingPoints),
    resetSeconds: Math.max(1, Math.ceil(res.msBeforeNext / 1000)),
    windowSeconds,
  }
}

/** RateLimit and RateLimit-Policy per the IETF httpapi draft. */
export function rateLimitHeaders(o: LimitOutcome): Record<string, string> {
  return {
    'ratelimit-policy': `"${o.policy}";q=${o.limit};w=${o.windowSeconds}`,
    ratelimit: `"${o.policy}";r=${o.remaining};t=${o.resetSeconds}`,
  }
}
