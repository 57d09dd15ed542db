import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { connect } from 'node:net'
import { createServer, type Server } from 'node:http'
import { PassThrough } from 'node:stream'
import { MemoryBus } from '@pm/bus'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { buildApp, loadGatewayConfig } from '../src/app.ts'

/**
 * Issue 14, finding 8: a client that hung up mid-request was logged at error level with a
 * stack, several lines per request. Expected: one line, at info or warn, without a stack.
 */
describe('a client that disconnects', () => {
  let app: Awaited<ReturnType<typeof buildApp>>
  let upstream: Server
  const bus = new MemoryBus()
  const lines: Record<string, unknown>[] = []

  beforeAll(async () => {
    const logStream = new PassThrough()
    logStream.on('data', (chunk: Buffer) => {
      for (const line of chunk.toString().split('\n')) if (line.trim()) lines.push(JSON.parse(line))
    })
    // A prompts service that never answers: the client gives up first.
    upstream = createServer(() => {})
    await new Promise<void>((resolve) => upstream.listen(0, '127.0.0.1', resolve))
    const config = loadGatewayConfig({
      NODE_ENV: 'test',
      LOG_LEVEL: 'info',
      UPSTREAM_TIMEOUT_MS: '500',
      PROMPTS_URL: `http://127.0.0.1:${(upstream.address() as AddressInfo).port}`,
      INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
    })
    app = await buildApp({ config, bus, logStream })
    await app.listen({ host: '127.0.0.1', port: 0 })
  })

  afterAll(async () => {
    await app?.close()
    await bus.close()
    upstream?.closeAllConnections()
    await new Promise((resolve) => upstream?.close(resolve))
  })

  it.each([
    [
      'while its body is read',
      'gone-reading',
      'POST /api/v1/auth/login HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n' +
        'Content-Length: 1000\r\nX-Request-Id: gone-reading\r\n\r\n{"email":"a@example.com",',
    ],
    [
      'while the upstream works',
      'gone-waiting',
      'GET /api/v1/public/prompts HTTP/1.1\r\nHost: x\r\nX-Request-Id: gone-waiting\r\n\r\n',
    ],
  ])('%s: logged once, at info or warn, without a stack', async (_label, requestId, request) => {
    const { port } = app.server.address() as AddressInfo
    const socket = connect(port, '127.0.0.1')
    await new Promise<void>((resolve) => socket.once('connect', () => resolve()))
    socket.write(request)
    // The gateway has started reading the body: the client goes away.
    await new Promise((resolve) => setTimeout(resolve, 100))
    socket.destroy()
    const mine = () => lines.filter((l) => l.requestId === requestId)
    await vi.waitFor(() => expect(mine().length).toBeGreaterThan(0), { timeout: 5_000 })
    // Let anything else about it arrive.
    await new Promise((resolve) => setTimeout(resolve, 300))
    const logged = mine()
    // Nothing at error level; exactly one line says the client left, without a stack.
    expect(logged.filter((l) => Number(l.level) > 40)).toEqual([])
    const gone = logged.filter((l) => l.msg === 'client disconnected before the answer')
    expect(gone).toHaveLength(1)
    expect(JSON.stringify(gone[0])).not.toContain('"stack"')
    // Reading the body, that is all; while proxying, @fastify/reply-from adds its own warn line
    // about the upstream request it gave up (not ours to silence).
    if (requestId === 'gone-reading') expect(logged).toHaveLength(1)
  })
})
