import { createHmac, timingSafeEqual } from 'node:crypto'
import type { CallerContext } from '@pm/contracts'

/**
 * The caller context travels from the gateway to a service as
 * `base64url(JSON).base64url(HMAC-SHA256)`, with an expiry. A client cannot forge it
 * without the shared INTERNAL_AUTH_SECRET, and the gateway strips any client-sent copy.
 *
 * The token carries who the caller is, not which request it is: the request id travels in
 * `x-request-id`, and the service puts it into `request.caller.requestId`. So one token can
 * serve the same caller for a while (`ContextSigner`), and a service verifies a token it has
 * already verified with a map lookup (`ContextVerifier`).
 */
export const CONTEXT_MAX_AGE_MS = 60_000
/** How long the gateway reuses a signed token: it is then still valid for at least 30 s. */
export const CONTEXT_REUSE_MS = 30_000

/** What a verified token says: the caller without the request id. */
export type VerifiedContext = Omit<CallerContext, 'requestId'>

interface Decoded {
  context: VerifiedContext
  exp: number
}

function mac(payload: string, secret: string): Buffer {
  return createHmac('sha256', secret).update(payload).digest()
}

/** The signed JSON of a context: every field but the request id (JSON.stringify drops undefined). */
function stableJson(context: CallerContext | VerifiedContext): string {
  return JSON.stringify({ ...context, requestId: undefined })
}

function signJson(json: string, secret: string, exp: number): string {
  // json is a non-empty object: `{...}` → `{...,"exp":n}`
  const payload = Buffer.from(`${json.slice(0, -1)},"exp":${exp}}`).toString('base64url')
  return `${payload}.${mac(payload, secret).toString('base64url')}`
}

export function signContext(
  context: CallerContext | VerifiedContext,
  secret: string,
  now = Date.now(),
): string {
  return signJson(stableJson(context), secret, now + CONTEXT_MAX_AGE_MS)
}

function decode(token: string | undefined, secret: string): Decoded | null {
  if (!token) return null
  const dot = token.indexOf('.')
  if (dot <= 0) return null
  const payload = token.slice(0, dot)
  const given = Buffer.from(token.slice(dot + 1), 'base64url')
  const expected = mac(payload, secret)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
  try {
    const {
      exp,
      requestId: _ignored,
      ...context
    } = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as VerifiedContext & {
      exp: unknown
      requestId?: unknown
    }
    if (typeof exp !== 'number') return null
    return { context, exp }
  } catch {
    return null
  }
}

export function verifyContext(
  token: string | undefined,
  secret: string,
  now = Date.now(),
): VerifiedContext | null {
  const decoded = decode(token, secret)
  return decoded && decoded.exp >= now ? decoded.context : null
}

/**
 * Signs contexts for the gateway, reusing a token for the same caller (same JSON) for
 * CONTEXT_REUSE_MS. Bounded: the oldest entries go first.
 */
export class ContextSigner {
  private readonly secret: string
  private readonly max: number
  private readonly tokens = new Map<string, { token: string; reuseUntil: number }>()

  constructor(secret: string, max = 10_000) {
    this.secret = secret
    this.max = max
  }

  sign(context: CallerContext | VerifiedContext, now = Date.now()): string {
    const json = stableJson(context)
    const hit = this.tokens.get(json)
    if (hit && hit.reuseUntil > now) return hit.token
    const token = signJson(json, this.secret, now + CONTEXT_MAX_AGE_MS)
    if (hit) this.tokens.delete(json)
    else if (this.tokens.size >= this.max) this.evictOldest()
    this.tokens.set(json, { token, reuseUntil: now + CONTEXT_REUSE_MS })
    return token
  }

  private evictOldest(): void {
    const oldest = this.tokens.keys().next()
    if (!oldest.done) this.tokens.delete(oldest.value)
  }
}

function freeze(context: VerifiedContext): VerifiedContext {
  Object.freeze(context.scopes)
  return Object.freeze(context)
}

/**
 * Verifies contexts for a service. A token whose signature was checked once is remembered
 * (keyed by the whole token, signature included) until its expiry, so a repeated token costs
 * a map lookup; a forged or tampered token never enters the cache. Bounded: the oldest go first.
 * The contexts returned are frozen (shared by every request that carries the token).
 */
export class ContextVerifier {
  private readonly secret: string
  private readonly max: number
  private readonly verified = new Map<string, Decoded>()

  constructor(secret: string, max = 1_000) {
    this.secret = secret
    this.max = max
  }

  verify(token: string | undefined, now = Date.now()): VerifiedContext | null {
    if (!token) return null
    const hit = this.verified.get(token)
    if (hit) {
      if (hit.exp >= now) return hit.context
      this.verified.delete(token)
      return null
    }
    const decoded = decode(token, this.secret)
    if (!decoded || decoded.exp < now) return null
    if (this.verified.size >= this.max) {
      const oldest = this.verified.keys().next()
      if (!oldest.done) this.verified.delete(oldest.value)
    }
    decoded.context = freeze(decoded.context)
    this.verified.set(token, decoded)
    return decoded.context
  }
}
