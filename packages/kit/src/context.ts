import { createHmac, timingSafeEqual } from 'node:crypto'
import type { CallerContext } from '@pm/contracts'

/**
 * The caller context travels from the gateway to a service as
 * `base64url(JSON).base64url(HMAC-SHA256)`, with an expiry. A client cannot forge it
 * without the shared INTERNAL_AUTH_SECRET, and the gateway strips any client-sent copy.
 */
const MAX_AGE_MS = 60_000

interface Envelope extends CallerContext {
  exp: number
}

function mac(payload: string, secret: string): Buffer {
  return createHmac('sha256', secret).update(payload).digest()
}

export function signContext(context: CallerContext, secret: string, now = Date.now()): string {
  const payload = Buffer.from(JSON.stringify({ ...context, exp: now + MAX_AGE_MS })).toString('base64url')
  return `${payload}.${mac(payload, secret).toString('base64url')}`
}

export function verifyContext(
  token: string | undefined,
  secret: string,
  now = Date.now(),
): CallerContext | null {
  if (!token) return null
  const dot = token.indexOf('.')
  if (dot <= 0) return null
  const payload = token.slice(0, dot)
  const given = Buffer.from(token.slice(dot + 1), 'base64url')
  const expected = mac(payload, secret)
  if (given.length !== expected.length || !timingSafeEqual(given, expected)) return null
  try {
    const { exp, ...context } = JSON.parse(Buffer.from(payload, 'base64url').toString('utf8')) as Envelope
    if (typeof exp !== 'number' || exp < now) return null
    return context
  } catch {
    return null
  }
}
