import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { AppError } from '@pm/contracts'
import { Pool } from 'undici'
import { afterEach, describe, expect, it } from 'vitest'
import Fastify from 'fastify'
import { callInternal, closePool, InternalTimeoutError, inProcess, internalPath } from './internalHttp.ts'

describe('internal calls', () => {
  let server: Server | undefined
  let pool: Pool | undefined

  afterEach(async () => {
    if (pool) await closePool(pool, 100)
    const s = server
    if (s) {
      s.closeAllConnections()
      await new Promise((resolve) => s.close(resolve))
    }
    pool = undefined
    server = undefined
  })

  const serve = async (handler: Parameters<typeof createServer>[1]): Promise<string> => {
    server = createServer(handler)
    await new Promise<void>((resolve) => server?.listen(0, '127.0.0.1', resolve))
    return `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  }

  it('encodes every path segment', () => {
    expect(internalPath('internal', 'memberships', 'a/b?c#d', 'e\u0000\tf%')).toBe(
      '/internal/memberships/a%2Fb%3Fc%23d/e%00%09f%25',
    )
  })

  it('refuses a path undici would refuse, and the pool keeps working afterwards', async () => {
    const seen: string[] = []
    const url = await serve((req, res) => {
      seen.push(req.url ?? '')
      res.setHeader('content-type', 'application/json')
      res.end('{"ok":true}')
    })
    pool = new Pool(url, { connections: 2 })
    for (let i = 0; i < 10; i++) {
      await expect(
        callInternal(pool, { method: 'GET', path: `/x/a\u0000\tb${i}`, headers: {}, timeoutMs: 1_000 }),
      ).rejects.toBeInstanceOf(AppError)
    }
    const ok = await callInternal(pool, { method: 'GET', path: '/x/ok', headers: {}, timeoutMs: 1_000 })
    expect(ok).toEqual({ statusCode: 200, body: { ok: true } })
    expect(seen).toEqual(['/x/ok'])
  })

  it('gives up at the deadline and destroys the connection of a call that never answers', async () => {
    let closedByClient = 0
    const url = await serve((req) => {
      req.socket.on('close', () => closedByClient++)
      // never answers
    })
    pool = new Pool(url, { connections: 1 })
    await expect(
      callInternal(pool, { method: 'GET', path: '/slow', headers: {}, timeoutMs: 200 }),
    ).rejects.toBeInstanceOf(InternalTimeoutError)
    await expect.poll(() => closedByClient, { timeout: 5_000 }).toBe(1)
  })

  it('reads an answer that is not JSON as null, and an empty one too', async () => {
    const url = await serve((req, res) => {
      res.statusCode = req.url === '/text' ? 502 : 204
      res.end(req.url === '/text' ? '<html>bad gateway</html>' : undefined)
    })
    pool = new Pool(url, { connections: 1 })
    expect(await callInternal(pool, { method: 'GET', path: '/text', headers: {}, timeoutMs: 1_000 })).toEqual(
      {
        statusCode: 502,
        body: null,
      },
    )
    expect(
      await callInternal(pool, { method: 'GET', path: '/empty', headers: {}, timeoutMs: 1_000 }),
    ).toEqual({
      statusCode: 204,
      body: null,
    })
  })

  it('calls a service of this process through its routes and hooks, with no socket', async () => {
    const app = Fastify()
    const seen: { url: string; header: unknown; body: unknown }[] = []
    app.addHook('onRequest', async (req, reply) => {
      if (req.headers['x-signed'] !== 'yes') return reply.code(401).send({ error: { code: 'UNAUTHORIZED' } })
    })
    app.post('/api/v1/prompts/:id/invoke', async (req) => {
      seen.push({ url: req.url, header: req.headers['x-request-id'], body: req.body })
      return { renderedContent: 'hi', id: (req.params as { id: string }).id }
    })
    try {
      const target = inProcess(app)
      const path = internalPath('api', 'v1', 'prompts', 'a/b', 'invoke')
      const call = (headers: Record<string, string>) =>
        callInternal(target, {
          method: 'POST',
          path,
          headers: { 'content-type': 'application/json', ...headers },
          body: JSON.stringify({ variables: { x: 1 } }),
          timeoutMs: 1_000,
        })
      expect(await call({ 'x-signed': 'yes', 'x-request-id': 'r1' })).toEqual({
        statusCode: 200,
        body: { renderedContent: 'hi', id: 'a/b' },
      })
      expect(seen).toEqual([
        { url: '/api/v1/prompts/a%2Fb/invoke', header: 'r1', body: { variables: { x: 1 } } },
      ])
      // The service's own hooks answer as they would over HTTP.
      expect(await call({})).toEqual({ statusCode: 401, body: { error: { code: 'UNAUTHORIZED' } } })
      expect(app.server.listening).toBe(false)
    } finally {
      await app.close()
    }
  })
})
