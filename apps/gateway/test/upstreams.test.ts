import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AppError } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { loadGatewayConfig } from '../src/app.ts'
import { proxyOptions, UpstreamAgent, Upstreams } from '../src/proxy.ts'

const base = { NODE_ENV: 'test', INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex') }

describe('optional upstreams (runs, experiments)', () => {
  it('unset: their routes answer 503 SERVICE_UNAVAILABLE naming the setting, and readiness skips them', () => {
    const upstreams = new Upstreams(loadGatewayConfig(base))
    expect(upstreams.named().map(([name]) => name)).toEqual(['identity', 'prompts', 'webhooks', 'render0'])
    for (const [name, setting] of [
      ['runs', 'RUNS_URL'],
      ['experiments', 'EXPERIMENTS_URL'],
    ] as const) {
      let thrown: unknown
      try {
        upstreams.urlFor(name)
      } catch (err) {
        thrown = err
      }
      expect(thrown).toBeInstanceOf(AppError)
      expect((thrown as AppError).code).toBe('SERVICE_UNAVAILABLE')
      expect((thrown as AppError).message).toContain(setting)
    }
  })

  it('set: proxied and checked for readiness like the others', () => {
    const upstreams = new Upstreams(
      loadGatewayConfig({
        ...base,
        RUNS_URL: 'http://runs:4005',
        EXPERIMENTS_URL: 'http://experiments:4006',
      }),
    )
    expect(upstreams.urlFor('runs')).toBe('http://runs:4005')
    expect(upstreams.urlFor('experiments')).toBe('http://experiments:4006')
    expect(upstreams.named().map(([name]) => name)).toContain('runs')
  })
})

describe('upstream timeouts', () => {
  it('a run waits RUNS_UPSTREAM_TIMEOUT_MS (past the runs service’s own RUN_TIMEOUT_MS); every other route UPSTREAM_TIMEOUT_MS', () => {
    const config = loadGatewayConfig({ ...base, RUNS_URL: 'http://runs:4005' })
    expect(config.RUNS_UPSTREAM_TIMEOUT_MS).toBe(150_000)
    expect(config.UPSTREAM_TIMEOUT_MS).toBe(30_000)
    const options = proxyOptions(config, new Upstreams(config))
    const handler = options.handler
    if (!handler) throw new Error('the proxy has no handler')
    const given: { dest: string; timeout: unknown }[] = []
    const reply = {
      raw: { once: () => {} },
      from: (dest: string, opts: { timeout?: number }) => {
        given.push({ dest, timeout: opts.timeout })
        return reply
      },
    }
    for (const upstream of ['runs', 'prompts', 'experiments']) {
      const request = { policyMatch: { policy: { upstream } } }
      // @ts-expect-error: the handler reads only the request's policy match and the reply's from().
      handler(request, reply, `/api/v1/${upstream}`, { rewriteHeaders: () => ({}) })
    }
    expect(given).toEqual([
      { dest: '/api/v1/runs', timeout: 150_000 },
      { dest: '/api/v1/prompts', timeout: undefined },
      { dest: '/api/v1/experiments', timeout: undefined },
    ])
  })
})

describe('UPSTREAM_MAX_REQUESTS_PER_CONNECTION', () => {
  /** A service that answers each request with the port of the gateway's socket it came on. */
  async function service() {
    const server = createServer((req, res) => res.end(String(req.socket.remotePort)))
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    return { server, url: `http://127.0.0.1:${(server.address() as AddressInfo).port}` }
  }
  /** The sockets that `n` requests in a row, one at a time, came on. */
  async function socketsOf(env: Record<string, string>, n: number): Promise<number> {
    const { server, url } = await service()
    const agent = new UpstreamAgent(loadGatewayConfig({ ...base, ...env }))
    const seen = new Set<string>()
    try {
      for (let i = 0; i < n; i++) {
        const res = await agent.request({ origin: url, path: '/', method: 'GET' })
        seen.add(await res.body.text())
        // The socket back in the pool before the next request (else a second one may open).
        await new Promise((resolve) => setTimeout(resolve, 5))
      }
    } finally {
      await agent.destroy()
      server.closeAllConnections()
      server.close()
    }
    return seen.size
  }

  it('closes a connection after that many requests (default 1,000), so new replicas get traffic', async () => {
    expect(loadGatewayConfig(base).UPSTREAM_MAX_REQUESTS_PER_CONNECTION).toBe(1_000)
    // undici closes the socket after the request past the count: 3 gives 4 a socket.
    const sockets = await socketsOf({ UPSTREAM_MAX_REQUESTS_PER_CONNECTION: '3' }, 10)
    expect(sockets).toBeGreaterThanOrEqual(3)
    expect(sockets).toBeLessThanOrEqual(4)
    // 0: one keep-alive connection carries them all.
    expect(await socketsOf({ UPSTREAM_MAX_REQUESTS_PER_CONNECTION: '0' }, 10)).toBe(1)
  })
})
