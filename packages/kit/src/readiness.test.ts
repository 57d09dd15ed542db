import { Writable } from 'node:stream'
import { afterAll, describe, expect, it } from 'vitest'
import { createService, READINESS_CHECK_MS } from './service.ts'

describe('/health/ready', () => {
  const calledAt: Record<string, number> = {}
  const app = createService({
    name: 'readiness-test',
    internalSecret: 'x'.repeat(32),
    logStream: new Writable({ write: (_c, _e, done) => done() }),
    readiness: {
      store: () => {},
      // A NATS connection that stopped reading never answers its flush.
      bus: () => {
        calledAt.bus = Date.now()
        return new Promise<void>(() => {})
      },
      // A second one that hangs: checked beside the first, not after it.
      upstream: () => {
        calledAt.upstream = Date.now()
        return new Promise<void>(() => {})
      },
    },
  })
  afterAll(() => app.close())

  it('answers 503 naming a check that hangs, within the check bound, instead of never', async () => {
    const res = await app.inject({ method: 'GET', url: '/health/ready' })
    expect(res.statusCode).toBe(503)
    expect(res.json()).toEqual({
      status: 'unavailable',
      checks: {
        store: 'ok',
        bus: `no answer within ${READINESS_CHECK_MS} ms`,
        upstream: `no answer within ${READINESS_CHECK_MS} ms`,
      },
    })
    // Checked together: the second did not wait for the first's bound (two in turn took 4 s,
    // past a probe's own 3 s timeout).
    expect(Math.abs((calledAt.upstream ?? 0) - (calledAt.bus ?? 0))).toBeLessThan(READINESS_CHECK_MS / 2)
  })
})
