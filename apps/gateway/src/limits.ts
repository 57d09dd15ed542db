import { AppError, Email, type ResolvedApiKey } from '@pm/contracts'
import type { FastifyRequest } from 'fastify'
import { bodyField } from './body.ts'
import type { GatewayConfig } from './config.ts'
import type { RoutePolicy } from './policy.ts'
import type { RateLimits } from './rateLimits.ts'

/** The longest email: identity's `Email` schema's bound (RFC 5321's path limit). */
const EMAIL_MAX_LENGTH = Email.maxLength ?? 254

/**
 * The gateway's rate-limit rules (DESIGN section 7): per IP on login and on the public
 * catalog, per email on failed logins, per API key (its own limit, else the default). Each
 * consumption is remembered on the request for the RateLimit headers.
 */
export class RequestLimits {
  private readonly limits: RateLimits
  private readonly config: GatewayConfig

  constructor(limits: RateLimits, config: GatewayConfig) {
    this.limits = limits
    this.config = config
  }

  private async take(request: FastifyRequest, name: string, key: string, points: number, duration: number) {
    request.limitOutcome = await this.limits.consume(name, key, points, duration)
  }

  /** The limits of an unauthenticated route (login: per IP and per email; public: per IP). */
  async public(request: FastifyRequest, policy: RoutePolicy): Promise<void> {
    const c = this.config
    if (policy.limit === 'login') {
      await this.take(
        request,
        'login-ip',
        request.ip,
        c.RATE_LIMIT_LOGIN_IP_POINTS,
        c.RATE_LIMIT_LOGIN_DURATION_S,
      )
      // Per email, only failures count: a point is taken now (atomic, so parallel guesses
      // cannot slip past the limit) and given back when the login succeeds. An email that is no
      // string is refused here: the services' validation turns a one-item array into its item,
      // so `["a@example.com"]` would sign in with no point taken.
      // Nor one longer than an email can be (254, as identity's schema): it is the limiter's key,
      // and a 1 MB one took 1 MB of Redis for the window, per request.
      const given = request.peekedBody?.email
      if (given !== undefined && (typeof given !== 'string' || given.length > EMAIL_MAX_LENGTH)) {
        throw new AppError('VALIDATION_ERROR', 'request is invalid', [
          { path: '/body/email', message: `must be a string of at most ${EMAIL_MAX_LENGTH} characters` },
        ])
      }
      const email = bodyField(request, 'email')?.trim().toLowerCase()
      if (email) {
        await this.take(
          request,
          'login-email',
          email,
          c.RATE_LIMIT_LOGIN_EMAIL_POINTS,
          c.RATE_LIMIT_LOGIN_DURATION_S,
        )
        request.loginEmail = email
      }
    } else if (policy.limit === 'public') {
      await this.take(
        request,
        'public-ip',
        request.ip,
        c.RATE_LIMIT_PUBLIC_POINTS,
        c.RATE_LIMIT_PUBLIC_DURATION_S,
      )
    }
  }

  /** An API key's own limit, else the default one. */
  async apiKey(request: FastifyRequest, key: ResolvedApiKey): Promise<void> {
    const rl = key.rateLimit ?? {
      points: this.config.RATE_LIMIT_KEY_POINTS,
      durationSeconds: this.config.RATE_LIMIT_KEY_DURATION_S,
    }
    await this.take(request, 'api-key', key._id, rl.points, rl.durationSeconds)
  }

  /** A successful login gives its email's point back. */
  async settle(request: FastifyRequest, statusCode: number): Promise<void> {
    if (!request.loginEmail || statusCode >= 400) return
    await this.limits
      .reward(
        'login-email',
        request.loginEmail,
        this.config.RATE_LIMIT_LOGIN_EMAIL_POINTS,
        this.config.RATE_LIMIT_LOGIN_DURATION_S,
      )
      .catch((err: unknown) => request.log.warn({ err }, 'could not refund a login attempt'))
  }
}
