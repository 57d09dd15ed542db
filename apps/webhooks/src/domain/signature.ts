import { createHmac, randomBytes, timingSafeEqual } from 'node:crypto'

/**
 * Endpoint secrets use the Standard Webhooks format: `whsec_` followed by the base64 of the
 * key bytes. Both signature schemes below use those decoded key bytes as the HMAC key (never
 * the secret string itself), so a receiver holding one secret can verify either header, and
 * the official `standardwebhooks` libraries work unchanged.
 */
export const SECRET_PREFIX = 'whsec_'

export const SERVICE_SIGNATURE_HEADER = 'X-Service-Signature'

const SECRET_KEY_BYTES = 32
const BASE64 = /^[A-Za-z0-9+/]+={0,2}$/

export function generateSecret(): string {
  return `${SECRET_PREFIX}${randomBytes(SECRET_KEY_BYTES).toString('base64')}`
}

/**
 * Throws on a malformed secret rather than signing or verifying with garbage: secrets are
 * ours (generated above), so a bad one is a bug to surface, not attacker input to tolerate.
 */
export function secretKeyBytes(secret: string): Buffer {
  // The prefix is optional, like in the standardwebhooks libraries, which strip it when present.
  const encoded = secret.startsWith(SECRET_PREFIX) ? secret.slice(SECRET_PREFIX.length) : secret
  if (!BASE64.test(encoded)) throw new Error('webhook secret is not base64 after the whsec_ prefix')
  const key = Buffer.from(encoded, 'base64')
  if (key.length === 0) throw new Error('webhook secret is empty')
  return key
}

/**
 * Until when a subscription's rotated-out secret still signs, or null: none kept, or its time is
 * over at `now` (ISO-8601; an expired one stays stored, sealed, until the next rotation drops it,
 * and signs nothing).
 */
export function previousSecretUntil(
  sub: { previousSecret?: string | null; previousSecretExpiresAt?: string | null },
  now: string,
): string | null {
  const until = sub.previousSecretExpiresAt ?? null
  return sub.previousSecret && until !== null && until > now ? until : null
}

export interface SignDeliveryInput {
  secret: string
  /**
   * A rotated-out secret still in its overlap: each header then carries a second signature made
   * with it, after the current one (`v1=<current>,v1=<previous>`; `v1,<current> v1,<previous>` in
   * Standard Webhooks' space-separated list), so a receiver verifies with either secret.
   */
  previousSecret?: string | undefined
  /** Becomes `webhook-id`: stable across retries, so receivers can deduplicate on it. */
  eventId: string
  /**
   * Accepted so callers can pass their delivery record as is, but deliberately not signed: a
   * per-attempt id in `webhook-id` would defeat receiver-side deduplication across retries.
   */
  deliveryId?: string
  /** The exact bytes that will be sent: any re-serialisation would break the signatures. */
  body: string
  /** Sign at each attempt, not once per event, or retries late in the schedule fall outside tolerance. */
  timestampSeconds: number
}

export function signDelivery(input: SignDeliveryInput): Record<string, string> {
  const keys = [input.secret, ...(input.previousSecret === undefined ? [] : [input.previousSecret])].map(
    secretKeyBytes,
  )
  const t = Math.floor(input.timestampSeconds)
  if (!Number.isSafeInteger(t) || t < 0)
    throw new RangeError('timestampSeconds must be a unix time in seconds')
  const serviceSigs = keys.map(
    (key) => `v1=${createHmac('sha256', key).update(`${t}.${input.body}`, 'utf8').digest('hex')}`,
  )
  const standardSigs = keys.map(
    (key) =>
      `v1,${createHmac('sha256', key).update(`${input.eventId}.${t}.${input.body}`, 'utf8').digest('base64')}`,
  )
  return {
    [SERVICE_SIGNATURE_HEADER]: `t=${t},${serviceSigs.join(',')}`,
    'webhook-id': input.eventId,
    'webhook-timestamp': String(t),
    'webhook-signature': standardSigs.join(' '),
    'content-type': 'application/json',
  }
}

/**
 * Verifies an `X-Service-Signature` header (`t=<seconds>,v1=<hex>`), accepting any of several
 * `v1=` entries so a receiver can keep verifying while a secret is being rotated.
 * `nowSeconds` defaults to the current unix time.
 */
export function verifyServiceSignature(
  header: string | null | undefined,
  body: string,
  secret: string,
  toleranceSeconds = 300,
  nowSeconds: number = Math.floor(Date.now() / 1000),
): boolean {
  if (!header) return false
  const key = secretKeyBytes(secret)
  let timestamp: string | undefined
  const candidates: Buffer[] = []
  for (const part of header.split(',')) {
    const eq = part.indexOf('=')
    if (eq < 0) continue
    const name = part.slice(0, eq).trim()
    const value = part.slice(eq + 1).trim()
    if (name === 't') timestamp = value
    // Only well-formed digests are compared, so timingSafeEqual always sees equal lengths.
    else if (name === 'v1' && /^[0-9a-f]{64}$/i.test(value)) candidates.push(Buffer.from(value, 'hex'))
  }
  if (timestamp === undefined || !/^\d{1,15}$/.test(timestamp) || candidates.length === 0) return false
  if (Math.abs(nowSeconds - Number(timestamp)) > toleranceSeconds) return false
  const expected = createHmac('sha256', key).update(`${timestamp}.${body}`, 'utf8').digest()
  let matched = false
  // No early exit: the time taken must not reveal which candidate, if any, matched.
  for (const candidate of candidates) {
    if (timingSafeEqual(candidate, expected)) matched = true
  }
  return matched
}
