import { MemoryBus } from '@pm/bus'
import { describe, expect, it } from 'vitest'
import { buildApp } from '../src/app.ts'
import { offlineConfig } from './offline.ts'

/**
 * A client that stops reading an answer held its gateway connection for good: the gateway closes
 * a connection idle for longer than any upstream may take to answer (the mechanism is tested
 * in @pm/kit's service.test.ts).
 */
describe("the gateway's idle timeout", () => {
  it.each([
    [{}, 180_000],
    [{ RUNS_UPSTREAM_TIMEOUT_MS: '20000' }, 60_000],
    [{ UPSTREAM_TIMEOUT_MS: '200000' }, 230_000],
  ])('with %j it is %i ms: the longest upstream wait, and 30 s', async (env, expected) => {
    const bus = new MemoryBus()
    const app = await buildApp({
      bus,
      config: offlineConfig(env),
    })
    try {
      expect(app.server.timeout).toBe(expected)
    } finally {
      await app.close()
      await bus.close()
    }
  })
})
