import { randomBytes } from 'node:crypto'
import { MemoryBus } from '@pm/bus'
import { describe, expect, it } from 'vitest'
import { buildApp, loadGatewayConfig } from '../src/app.ts'

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
      config: loadGatewayConfig({
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
        IDENTITY_URL: 'http://127.0.0.1:9',
        PROMPTS_URL: 'http://127.0.0.1:9',
        RENDER_URLS: 'http://127.0.0.1:9',
        WEBHOOKS_URL: 'http://127.0.0.1:9',
        ...env,
      }),
    })
    try {
      expect(app.server.timeout).toBe(expected)
    } finally {
      await app.close()
      await bus.close()
    }
  })
})
