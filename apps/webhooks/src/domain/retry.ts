const SECOND = 1000
const MINUTE = 60 * SECOND
const HOUR = 60 * MINUTE

/**
 * Delay before each attempt, counted from the failure of the previous one (the Standard
 * Webhooks / Svix convention): entry 0 is the first attempt, sent immediately. Ten attempts
 * spread over about three and a half days ride out a receiver's long outage.
 */
export const RETRY_SCHEDULE_MS: readonly number[] = [
  0,
  5 * SECOND,
  5 * MINUTE,
  30 * MINUTE,
  2 * HOUR,
  5 * HOUR,
  10 * HOUR,
  14 * HOUR,
  20 * HOUR,
  24 * HOUR,
]

export const MAX_ATTEMPTS = RETRY_SCHEDULE_MS.length

/** Spreads retries of deliveries that failed together (a receiver outage) so they don't return together. */
export const RETRY_JITTER = 0.2

export interface RetryDelayOptions {
  /** Multiplies every delay, e.g. 0.001 to run the whole schedule in seconds in tests. */
  scale?: number
  /** Uniform in [0, 1), like Math.random, which is the default. */
  random?: () => number
}

/**
 * Milliseconds to wait before the attempt after `attemptNumberJustFailed` (1-based), jittered
 * by ±20%, or null when that was the last attempt and the delivery has failed.
 */
export function nextAttemptDelayMs(
  attemptNumberJustFailed: number,
  opts: RetryDelayOptions = {},
): number | null {
  if (!Number.isInteger(attemptNumberJustFailed) || attemptNumberJustFailed < 1) {
    throw new RangeError(`attempt numbers start at 1, got ${attemptNumberJustFailed}`)
  }
  const base = RETRY_SCHEDULE_MS[attemptNumberJustFailed]
  if (base === undefined) return null
  const scale = opts.scale ?? 1
  if (!(scale >= 0) || !Number.isFinite(scale))
    throw new RangeError(`scale must be a finite non-negative number`)
  const random = opts.random ?? Math.random
  const factor = 1 + (random() * 2 - 1) * RETRY_JITTER
  return Math.max(0, Math.round(base * scale * factor))
}

export type ResponseOutcome = 'success' | 'retry' | 'disable'

/**
 * What a delivery attempt's result means. `status` is null for network errors and timeouts.
 * 410 Gone is the receiver telling us the endpoint is gone for good, so we stop sending to it;
 * every other failure, 4xx included, may be a transient misconfiguration worth retrying.
 */
export function classifyResponse(status: number | null): ResponseOutcome {
  if (status !== null && status >= 200 && status < 300) return 'success'
  if (status === 410) return 'disable'
  return 'retry'
}
