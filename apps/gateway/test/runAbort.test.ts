import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import proxy from '@fastify/http-proxy'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { loadGatewayConfig } from '../src/app.ts'
import type { RoutePolicy } from '../src/policy.ts'
import { proxyOptions, Upstreams } from '../src/proxy.ts'

/**
 * A run's client that leaves before the answer: the gateway gives up its upstream request, so
 * the runs service sees its client gone and stops calling the model. Other routes' requests are
 * left to finish (a write the client stopped waiting for still lands).
 */
describe('a client that leaves a run', () => {
  let app: FastifyInstance
  let upstream: Server
  const arrived: { url: string; req: IncomingMessage; closed: boolean }[] = []

  beforeAll(async () => {
    // Runs and prompts at one upstream that answers nothing until told.
    upstream = createServer((req) => {
      const entry = { url: req.url ?? '', req, closed: false }
      arrived.push(entry)
      req.resume()
      req.socket.once('close', () => {
        entry.closed = true
      })
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
    const config = loadGatewayConfig({
      NODE_ENV: 'test',
      PROMPTS_URL: url,
      RUNS_URL: url,
      INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
    })
    // The proxy alone, each request's route matched by its path (the gateway's access checks are
    // tested elsewhere).
    app = Fastify()
    app.decorateRequest('policyMatch', null)
    app.decorateRequest('contextToken', null)
    app.decorateRequest('peekedLength', null)
    app.decorateRequest('traceSpan', null)
    app.addHook('onRequest', async (request) => {
      const upstreamName = request.url.includes('/run') ? 'runs' : 'prompts'
      request.policyMatch = { policy: { upstream: upstreamName } as RoutePolicy, params: {} }
    })
    await app.register(proxy, proxyOptions(config, new Upstreams(config)))
    await app.listen({ host: '127.0.0.1', port: 0 })
  })

  afterAll(async () => {
    await app?.close()
    upstream?.closeAllConnections()
    await new Promise((resolve) => upstream?.close(resolve))
  })

  async function leave(path: string) {
    const { port } = app.server.address() as AddressInfo
    const socket = connect(port, '127.0.0.1')
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
    const body = '{"variables":{}}'
    socket.write(
      `POST ${path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: ${body.length}\r\n\r\n${body}`,
    )
    await vi.waitFor(() => expect(arrived.find((a) => a.url === path)).toBeDefined(), { timeout: 5_000 })
    socket.destroy()
    return arrived.find((a) => a.url === path)
  }

  it('a run: its upstream request is given up, and the abort key is not sent on', async () => {
    const entry = await leave('/api/v1/prompts/p1/run')
    expect(entry?.req.headers['x-pm-abort-key']).toBeUndefined()
    await vi.waitFor(() => expect(entry?.closed).toBe(true), { timeout: 5_000 })
  })

  it('another route: its upstream request is left to finish', async () => {
    const entry = await leave('/api/v1/prompts/p1/publish')
    await new Promise((resolve) => setTimeout(resolve, 300))
    expect(entry?.closed).toBe(false)
  })
})
