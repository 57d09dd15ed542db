import { Writable } from 'node:stream'
import { afterAll, describe, expect, it } from 'vitest'
import { createService, READINESS_CHECK_MS } from './service.ts'

describe('/health/ready', () => {
  const app = createService({
    name: 'readiness-test',
    internalSecret: 'x'.repeat(32),
    logStream: new Writable({ write: (_c, _e, done) => done() }),
    readiness: {
      store: () => {},
      // A NATS connection that stopped reading never answers its flush.
      bus: () => new Promise<void>(() => {}),
    },
  })
  afterAll(() => app.close())

  it('answers 503 naming a check that hangs, within the check bound, instead of never', async () => {
    const started = Date.now()
    const res = await app.inject({ method: 'GET', url: '/health/ready' })
    expect(res.statusCode).toBe(503)
    expect(res.json()).toEqual({
      status: 'unavailable',
      checks: { store: 'ok', bus: `no answer within ${READINESS_CHECK_MS} ms` },
    })
    expect(Date.now() - started).toBeLessThan(READINESS_CHECK_MS + 5_000)
  })
})
