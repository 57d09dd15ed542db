import { randomBytes } from 'node:crypto'
import { createServer, type IncomingHttpHeaders, request, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { MemoryBus } from '@pm/bus'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, loadGatewayConfig } from '../src/app.ts'

/**
 * Headers that belong to the client's connection are not sent on: undici refuses `expect` and
 * `keep-alive`, and curl sends `Expect: 100-continue` with every body over 1 MiB (an import's
 * archive), which answered 503 (or nothing) before.
 */
describe('hop-by-hop headers at the gateway', () => {
  let app: Awaited<ReturnType<typeof buildApp>>
  let upstream: Server
  const bus = new MemoryBus()
  const seen: IncomingHttpHeaders[] = []

  beforeAll(async () => {
    // One upstream for prompts and identity: it notes the headers it got and answers 200.
    upstream = createServer((req, res) => {
      seen.push(req.headers)
      req.resume()
      req.on('end', () => {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(JSON.stringify({ data: { ok: true } }))
      })
    })
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const url = `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`
    const config = loadGatewayConfig({
      NODE_ENV: 'test',
      LOG_LEVEL: 'warn',
      PROMPTS_URL: url,
      IDENTITY_URL: url,
      INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
    })
    app = await buildApp({ config, bus })
    await app.listen({ host: '127.0.0.1', port: 0 })
  })

  afterAll(async () => {
    await app?.close()
    await bus.close()
    upstream?.closeAllConnections()
    await new Promise((resolve) => upstream?.close(resolve))
  })

  /** One request through node:http, which honours `Expect: 100-continue` as curl does. */
  function send(method: string, path: string, headers: Record<string, string>, body?: string) {
    const { port } = app.server.address() as AddressInfo
    return new Promise<{ status: number; body: string; headers: IncomingHttpHeaders }>((resolve, reject) => {
      const req = request({ host: '127.0.0.1', port, method, path, headers, timeout: 5_000 }, (res) => {
        let text = ''
        res.setEncoding('utf8')
        res.on('data', (chunk: string) => {
          text += chunk
        })
        res.on('end', () => resolve({ status: res.statusCode ?? 0, body: text, headers: res.headers }))
      })
      req.on('error', reject)
      req.on('timeout', () => req.destroy(new Error('timed out')))
      if (body === undefined) req.end()
      else if (headers.expect) req.on('continue', () => req.end(body))
      else req.end(body)
    })
  }

  const body = JSON.stringify({ email: 'a@example.com', password: 'x'.repeat(20) })
  it.each([
    ['Expect: 100-continue', { expect: '100-continue' }],
    ['Keep-Alive', { 'keep-alive': 'timeout=5' }],
    ['TE', { te: 'trailers' }],
    ['Proxy-Connection', { 'proxy-connection': 'keep-alive' }],
  ])('%s: the request is answered and the header goes no further', async (_label, extra) => {
    for (const [method, path, payload] of [
      ['GET', '/api/v1/public/prompts', undefined],
      ['POST', '/api/v1/auth/login', body],
    ] as const) {
      seen.length = 0
      const headers: Record<string, string> = { ...extra }
      if (payload !== undefined) headers['content-type'] = 'application/json'
      const res = await send(method, path, headers, payload)
      expect(res.status, `${method} ${path}: ${res.body}`).toBe(200)
      expect(seen).toHaveLength(1)
      for (const name of Object.keys(extra)) expect(seen[0]?.[name]).toBeUndefined()
    }
  })

  it("answers the client's Connection: close, not the upstream's keep-alive", async () => {
    const res = await send('GET', '/api/v1/public/prompts', { connection: 'close' })
    expect(res.status, res.body).toBe(200)
    expect(res.headers.connection).toBe('close')
    expect(res.headers['keep-alive']).toBeUndefined()
  })
})
