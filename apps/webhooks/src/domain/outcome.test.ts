import { describe, expect, it } from 'vitest'
import { decideOutcome, GONE_REASON } from './outcome.ts'
import { MAX_ATTEMPTS } from './retry.ts'

const NOW = Date.parse('2030-01-01T00:00:00.000Z')
const noJitter = { random: () => 0.5 }

describe('decideOutcome', () => {
  it('ends the delivery on a 2xx', () => {
    const d = decideOutcome({ attemptCount: 2, roundStart: 0 }, { status: 204 }, NOW, {
      retries: true,
      ...noJitter,
    })
    expect(d).toEqual({
      status: 'DELIVERED',
      attemptCount: 3,
      nextAttemptAt: null,
      lastStatusCode: 204,
      lastError: null,
      deliveredAt: '2030-01-01T00:00:00.000Z',
      success: true,
      disable: false,
    })
  })

  it('schedules the next attempt of the round on a failure', () => {
    const first = decideOutcome({ attemptCount: 0, roundStart: 0 }, { status: 500 }, NOW, {
      retries: true,
      ...noJitter,
    })
    expect(first).toMatchObject({
      status: 'PENDING',
      attemptCount: 1,
      nextAttemptAt: new Date(NOW + 5_000).toISOString(),
      lastStatusCode: 500,
      lastError: 'the receiver answered HTTP 500',
      success: false,
    })
    const network = decideOutcome(
      { attemptCount: 1, roundStart: 0 },
      { status: null, error: 'ECONNREFUSED' },
      NOW,
      {
        retries: true,
        scale: 0.001,
        ...noJitter,
      },
    )
    expect(network).toMatchObject({
      status: 'PENDING',
      nextAttemptAt: new Date(NOW + 300).toISOString(),
      lastStatusCode: null,
      lastError: 'ECONNREFUSED',
    })
  })

  it('treats redirects as failures', () => {
    expect(
      decideOutcome({ attemptCount: 0, roundStart: 0 }, { status: 302 }, NOW, { retries: true }).status,
    ).toBe('PENDING')
  })

  it('fails for good when the schedule is used up, counting from the round start', () => {
    const last = decideOutcome({ attemptCount: MAX_ATTEMPTS - 1, roundStart: 0 }, { status: 503 }, NOW, {
      retries: true,
    })
    expect(last).toMatchObject({ status: 'FAILED', attemptCount: MAX_ATTEMPTS, nextAttemptAt: null })
    // After a redelivery at attempt 10, attempt 11 is the first of a new round: retried.
    const redelivered = decideOutcome(
      { attemptCount: MAX_ATTEMPTS, roundStart: MAX_ATTEMPTS },
      { status: 503 },
      NOW,
      { retries: true, ...noJitter },
    )
    expect(redelivered).toMatchObject({
      status: 'PENDING',
      nextAttemptAt: new Date(NOW + 5_000).toISOString(),
    })
  })

  it('makes one attempt only when retries are off (test-send)', () => {
    expect(
      decideOutcome({ attemptCount: 0, roundStart: 0 }, { status: 500 }, NOW, { retries: false }),
    ).toMatchObject({ status: 'FAILED', nextAttemptAt: null, lastError: 'the receiver answered HTTP 500' })
  })

  it('asks for the subscription to be disabled on 410', () => {
    expect(
      decideOutcome({ attemptCount: 0, roundStart: 0 }, { status: 410 }, NOW, { retries: true }),
    ).toMatchObject({ status: 'FAILED', nextAttemptAt: null, lastError: GONE_REASON, disable: true })
  })

  it('leaves the subscription alone on a test-send answered 410: reported only', () => {
    expect(
      decideOutcome({ attemptCount: 0, roundStart: 0 }, { status: 410 }, NOW, { retries: false }),
    ).toMatchObject({
      status: 'FAILED',
      nextAttemptAt: null,
      lastStatusCode: 410,
      lastError: GONE_REASON,
      disable: false,
    })
  })

  it('makes an attempt the shutdown interrupted due again at once, even past the schedule', () => {
    const interrupted = { status: null, error: 'interrupted by shutdown', interrupted: true }
    expect(
      decideOutcome({ attemptCount: 2, roundStart: 0 }, interrupted, NOW, { retries: true, ...noJitter }),
    ).toMatchObject({
      status: 'PENDING',
      attemptCount: 3,
      nextAttemptAt: new Date(NOW).toISOString(),
      lastError: 'interrupted by shutdown',
      success: false,
    })
    expect(
      decideOutcome({ attemptCount: MAX_ATTEMPTS - 1, roundStart: 0 }, interrupted, NOW, { retries: true }),
    ).toMatchObject({ status: 'PENDING', attemptCount: MAX_ATTEMPTS })
    // A test-send makes one attempt, interrupted or not.
    expect(
      decideOutcome({ attemptCount: 0, roundStart: 0 }, interrupted, NOW, { retries: false }),
    ).toMatchObject({ status: 'FAILED', lastError: 'interrupted by shutdown' })
  })
})
