import { connect } from 'node:net'
import { Writable } from 'node:stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { createService, REQUEST_TIMEOUT_MS, type Service } from './service.ts'

/**
 * A client that never finishes sending its request must not hold its connection for good: a few
 * hundred of them took every file descriptor of the gateway. Answers are not bounded the same way.
 */
// Its cases wait on timers, each on its own connection: they run at once.
describe.concurrent('the request timeout', () => {
  let app: Service
  let port = 0
  beforeAll(async () => {
    app = createService({
      name: 'request-timeout-test',
      internalSecret: 's'.repeat(32),
      requireContext: false,
      requestTimeoutMs: 1_000,
      logStream: new Writable({ write: (_c, _e, done) => done() }),
    })
    app.post('/echo', async (request) => request.body)
    // A request sent at once, answered after the request timeout (a run not streamed).
    app.post('/wait', async (request) => {
      await new Promise((resolve) => setTimeout(resolve, 1_300))
      return request.body
    })
    // An answer that takes longer than the request timeout, as a streamed run does.
    app.get('/slow', (_request, reply) => {
      reply.hijack()
      reply.raw.writeHead(200, { 'content-type': 'text/plain' })
      let n = 0
      const timer = setInterval(() => {
        reply.raw.write(`${n}\n`)
        if (++n === 6) {
          clearInterval(timer)
          reply.raw.end()
        }
      }, 250)
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    port = (app.server.address() as { port: number }).port
  })
  afterAll(() => app.close())

  it('is on by default, in minutes', ({ expect }) => {
    expect(REQUEST_TIMEOUT_MS).toBeGreaterThanOrEqual(60_000)
    expect(REQUEST_TIMEOUT_MS).toBeLessThanOrEqual(300_000)
  })

  it('closes the connection of a body that never ends, however slowly it trickles', async ({ expect }) => {
    const started = Date.now()
    const socket = connect(port, '127.0.0.1')
    socket.on('error', () => {})
    socket.write(
      'POST /echo HTTP/1.1\r\nHost: x\r\ncontent-type: application/json\r\ncontent-length: 1000\r\n\r\n{"a":"',
    )
    const trickle = setInterval(() => socket.write('a'), 100)
    const closed = await new Promise<boolean>((resolve) => {
      socket.once('close', () => resolve(true))
      setTimeout(() => resolve(false), 5_000)
    })
    clearInterval(trickle)
    socket.destroy()
    expect(closed).toBe(true)
    expect(Date.now() - started).toBeGreaterThanOrEqual(900)
  })

  it('leaves an answer that takes longer than it alone', async ({ expect }) => {
    const res = await fetch(`http://127.0.0.1:${port}/slow`)
    expect(await res.text()).toBe('0\n1\n2\n3\n4\n5\n')
  })

  it.for(['/echo', '/wait'])('leaves a request sent in time alone (%s)', async (path, { expect }) => {
    const res = await fetch(`http://127.0.0.1:${port}${path}`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ a: 1 }),
    })
    expect(await res.json()).toEqual({ a: 1 })
  })
})

/**
 * A client that stops reading an answer must not hold its connection, and what is buffered for
 * it, for good: the gateway closes a connection idle for longer than any upstream may take.
 */
describe('the idle timeout', () => {
  let app: Service
  let port = 0
  /** How each answer of /big ended: finished, or closed before it was. */
  const ended: string[] = []
  beforeAll(async () => {
    app = createService({
      name: 'idle-timeout-test',
      internalSecret: 's'.repeat(32),
      requireContext: false,
      idleTimeoutMs: 1_000,
      logStream: new Writable({ write: (_c, _e, done) => done() }),
    })
    // Far more than the sockets' buffers hold, written as fast as the client takes it.
    app.get('/big', (_request, reply) => {
      reply.hijack()
      const res = reply.raw
      res.writeHead(200, { 'content-type': 'text/plain' })
      const chunk = Buffer.alloc(64 * 1024, 'a')
      let left = 1024
      const go = () => {
        while (left-- > 0) if (!res.write(chunk)) return void res.once('drain', go)
        res.end()
      }
      res.on('close', () => ended.push(res.writableFinished ? 'finished' : 'closed'))
      go()
    })
    // Silent for a while, under the idle timeout, then answered.
    app.get('/quiet', async () => {
      await new Promise((resolve) => setTimeout(resolve, 600))
      return { ok: true }
    })
    await app.listen({ port: 0, host: '127.0.0.1' })
    port = (app.server.address() as { port: number }).port
  })
  afterAll(() => app.close())

  it('closes the connection of a client that stopped reading', async () => {
    const socket = connect(port, '127.0.0.1', () => {
      socket.write('GET /big HTTP/1.1\r\nHost: x\r\n\r\n')
      socket.pause()
    })
    socket.on('error', () => {})
    await expect.poll(() => ended, { timeout: 5_000 }).toEqual(['closed'])
    socket.destroy()
  })

  it('leaves a client that reads, and a wait under the timeout, alone', async () => {
    const big = await fetch(`http://127.0.0.1:${port}/big`)
    expect((await big.arrayBuffer()).byteLength).toBe(64 * 1024 * 1024)
    expect(ended.at(-1)).toBe('finished')
    const quiet = await fetch(`http://127.0.0.1:${port}/quiet`)
    expect(await quiet.json()).toEqual({ ok: true })
  })
})
