import type { DeliveryStatus } from '@pm/contracts'
import { classifyResponse, nextAttemptDelayMs, type RetryDelayOptions } from './retry.ts'

export interface AttemptResult {
  /** null when no HTTP status arrived: refused target, network error or timeout. */
  status: number | null
  error?: string
  /** Cut short by the worker's shutdown before any status arrived; `error` says so. */
  interrupted?: boolean
}

export interface DeliveryProgress {
  attemptCount: number
  /** attemptCount when the current retry round began (0, or the count at a redelivery). */
  roundStart: number
}

export interface Decision {
  status: DeliveryStatus
  attemptCount: number
  nextAttemptAt: string | null
  lastStatusCode: number | null
  lastError: string | null
  deliveredAt: string | null
  success: boolean
  /** The receiver answered 410 Gone to a delivery (not a test-send): the subscription must be turned off. */
  disable: boolean
}

export const GONE_REASON = 'the receiver answered 410 Gone'

export function describeFailure(result: AttemptResult): string {
  return result.error ?? `the receiver answered HTTP ${result.status}`
}

/**
 * What one attempt's result does to its delivery. Success ends it; 410 ends it and turns the
 * subscription off; any other failure schedules the next attempt of the current round, or
 * ends it as FAILED when the schedule is used up (or when `retries` is false, for test sends).
 * A test-send only checks a receiver: its 410 is reported, and leaves the subscription as it is.
 * An attempt the shutdown interrupted is due again at once (the next start sends it), even past
 * the end of the schedule: the receiver may never have seen it.
 */
export function decideOutcome(
  delivery: DeliveryProgress,
  result: AttemptResult,
  nowMs: number,
  opts: RetryDelayOptions & { retries: boolean },
): Decision {
  const attemptCount = delivery.attemptCount + 1
  const base = { attemptCount, lastStatusCode: result.status }
  const kind = classifyResponse(result.status)
  if (kind === 'success') {
    return {
      ...base,
      status: 'DELIVERED',
      nextAttemptAt: null,
      lastError: null,
      deliveredAt: new Date(nowMs).toISOString(),
      success: true,
      disable: false,
    }
  }
  const failed = { ...base, lastError: describeFailure(result), deliveredAt: null, success: false }
  if (kind === 'disable') {
    return { ...failed, status: 'FAILED', nextAttemptAt: null, lastError: GONE_REASON, disable: opts.retries }
  }
  if (result.interrupted && opts.retries) {
    return { ...failed, status: 'PENDING', nextAttemptAt: new Date(nowMs).toISOString(), disable: false }
  }
  const delay = opts.retries ? nextAttemptDelayMs(attemptCount - delivery.roundStart, opts) : null
  if (delay === null) return { ...failed, status: 'FAILED', nextAttemptAt: null, disable: false }
  return {
    ...failed,
    status: 'PENDING',
    nextAttemptAt: new Date(nowMs + delay).toISOString(),
    disable: false,
  }
}
