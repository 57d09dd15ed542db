import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { sendDelivery } from './deliver.ts'
import { generateSecret, signDelivery, verifyServiceSignature } from '../domain/signature.ts'

interface Received {
  method: string | undefined
  url: string | undefined
  headers: IncomingMessage['headers']
  body: string
}

const received: Received[] = []
let server: Server
let base: string
let closedPort: number

function streamForever(res: ServerResponse): void {
  const chunk = Buffer.alloc(64 * 1024, 'x')
  let sent = 0
  const pump = () => {
    // Stops on its own well past any cap, in case the client never hangs up.
    while (!res.destroyed && sent < 64 * 1024 * 1024) {
      sent += chunk.length
      if (!res.write(chunk)) return void res.once('drain', pump)
    }
    res.end()
  }
  pump()
}

function handle(req: IncomingMessage, res: ServerResponse, body: string): void {
  received.push({ method: req.method, url: req.url, headers: req.headers, body })
  res.on('error', () => {})
  switch (req.url) {
    case '/ok':
      res.writeHead(200, { 'content-type': 'text/plain' }).end('thanks')
      return
    case '/fail':
      res.writeHead(500).end('boom')
      return
    case '/gone':
      res.writeHead(410).end('endpoint removed')
      return
    case '/redirect':
      res.writeHead(302, { location: '/ok' }).end('moved')
      return
    case '/slow': {
      const timer = setTimeout(() => res.writeHead(200).end('late'), 3000)
      res.on('close', () => clearTimeout(timer))
      return
    }
    case '/stall-body':
      res.writeHead(200)
      res.write('partial')
      return
    case '/huge':
      res.writeHead(200, { 'content-type': 'text/plain' })
      streamForever(res)
      return
    default:
      res.writeHead(404).end()
  }
}

beforeAll(async () => {
  server = createServer((req, res) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.on('end', () => handle(req, res, Buffer.concat(chunks).toString('utf8')))
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`

  // A port that was just free: nothing listens on it during the test.
  const probe = createServer()
  await new Promise<void>((resolve) => probe.listen(0, '127.0.0.1', resolve))
  closedPort = (probe.address() as AddressInfo).port
  await new Promise<void>((resolve) => probe.close(() => resolve()))
})

afterAll(async () => {
  server.closeAllConnections()
  await new Promise<void>((resolve) => server.close(() => resolve()))
})

beforeEach(() => {
  received.length = 0
})

const body = JSON.stringify({ id: 'evt_1', type: 'prompt.created', data: { name: 'greeting' } })

describe('sendDelivery', () => {
  it('POSTs the exact body with the signed headers and reports success', async () => {
    const secret = generateSecret()
    const headers = {
      ...signDelivery({ secret, eventId: 'evt_1', body, timestampSeconds: Math.floor(Date.now() / 1000) }),
      'X-Service-Event': 'prompt.created',
      'X-Service-Delivery': 'dlv_1',
    }
    const result = await sendDelivery({ url: `${base}/ok`, body, headers, allowPrivate: true })
    expect(result).toMatchObject({ status: 200, responseBody: 'thanks' })
    expect(result.error).toBeUndefined()
    expect(result.durationMs).toBeGreaterThanOrEqual(0)

    expect(received).toHaveLength(1)
    const [got] = received
    expect(got?.method).toBe('POST')
    expect(got?.body).toBe(body)
    expect(got?.headers['content-type']).toBe('application/json')
    expect(got?.headers['x-service-delivery']).toBe('dlv_1')
    expect(verifyServiceSignature(String(got?.headers['x-service-signature']), got?.body ?? '', secret)).toBe(
      true,
    )
  })

  it('returns 500 and 410 as they come', async () => {
    expect(await sendDelivery({ url: `${base}/fail`, body, headers: {}, allowPrivate: true })).toMatchObject({
      status: 500,
      responseBody: 'boom',
    })
    expect(await sendDelivery({ url: `${base}/gone`, body, headers: {}, allowPrivate: true })).toMatchObject({
      status: 410,
      responseBody: 'endpoint removed',
    })
  })

  it('does not follow redirects', async () => {
    const result = await sendDelivery({ url: `${base}/redirect`, body, headers: {}, allowPrivate: true })
    expect(result).toMatchObject({ status: 302, responseBody: 'moved' })
    expect(received.map((r) => r.url)).toEqual(['/redirect'])
  })

  it('gives up on a server slower than the timeout', async () => {
    const result = await sendDelivery({
      url: `${base}/slow`,
      body,
      headers: {},
      allowPrivate: true,
      timeoutMs: 200,
    })
    expect(result.status).toBeNull()
    expect(result.error).toMatch(/timed out after 200 ms/)
    expect(result.durationMs).toBeLessThan(2000)
  })

  it('bounds the host lookup by the same timeout', async () => {
    const started = Date.now()
    const result = await sendDelivery({
      url: 'http://receiver.invalid/hook',
      body,
      headers: {},
      allowPrivate: true,
      timeoutMs: 200,
      lookup: () => new Promise(() => {}),
    })
    expect(result).toMatchObject({ status: null, error: 'timed out after 200 ms' })
    expect(Date.now() - started).toBeLessThan(2000)
    expect(received).toHaveLength(0)
  })

  it('ends early when its signal aborts, and says it was interrupted', async () => {
    const stop = new AbortController()
    setTimeout(() => stop.abort(new Error('interrupted by shutdown')), 100)
    const result = await sendDelivery({
      url: `${base}/slow`,
      body,
      headers: {},
      allowPrivate: true,
      timeoutMs: 10_000,
      signal: stop.signal,
    })
    expect(result).toMatchObject({ status: null, error: 'interrupted by shutdown', interrupted: true })
    expect(result.durationMs).toBeLessThan(2000)
    // During the lookup too.
    const lookingUp = await sendDelivery({
      url: 'http://receiver.invalid/hook',
      body,
      headers: {},
      allowPrivate: true,
      signal: stop.signal,
      lookup: () => new Promise(() => {}),
    })
    expect(lookingUp).toMatchObject({ status: null, interrupted: true })
  })

  it('keeps the status when the body stalls past the timeout', async () => {
    const result = await sendDelivery({
      url: `${base}/stall-body`,
      body,
      headers: {},
      allowPrivate: true,
      timeoutMs: 200,
    })
    expect(result.status).toBe(200)
    expect(result.responseBody).toBe('partial')
    expect(result.error).toBeDefined()
  })

  it('reads at most maxResponseBytes of a huge body and hangs up', async () => {
    const capped = await sendDelivery({ url: `${base}/huge`, body, headers: {}, allowPrivate: true })
    expect(capped.status).toBe(200)
    expect(capped.responseBody).toBe('x'.repeat(4096))
    expect(capped.error).toBeUndefined()

    const small = await sendDelivery({
      url: `${base}/huge`,
      body,
      headers: {},
      allowPrivate: true,
      maxResponseBytes: 10,
    })
    expect(small.responseBody).toBe('x'.repeat(10))
  })

  it('refuses a private target unless allowed, without connecting', async () => {
    const result = await sendDelivery({ url: `${base}/ok`, body, headers: {}, allowPrivate: false })
    expect(result.status).toBeNull()
    expect(result.error).toMatch(/refused target \(non_public_address\)/)
    expect(received).toHaveLength(0)
  })

  it('refuses a name whose given addresses are private', async () => {
    const port = new URL(base).port
    const result = await sendDelivery({
      url: `http://receiver.invalid:${port}/ok`,
      body,
      headers: {},
      allowPrivate: false,
      addresses: [{ address: '127.0.0.1', family: 4 }],
    })
    expect(result.status).toBeNull()
    expect(result.error).toMatch(/non_public_address/)
    expect(received).toHaveLength(0)
  })

  it('connects to the given addresses for a host name, sending that name as Host', async () => {
    const port = new URL(base).port
    const result = await sendDelivery({
      url: `http://receiver.invalid:${port}/ok`,
      body,
      headers: {},
      allowPrivate: true,
      addresses: [{ address: '127.0.0.1', family: 4 }],
    })
    expect(result.status).toBe(200)
    expect(received[0]?.headers.host).toBe(`receiver.invalid:${port}`)
  })

  it('reports network errors and bad URLs instead of throwing', async () => {
    const refused = await sendDelivery({
      url: `http://127.0.0.1:${closedPort}/`,
      body,
      headers: {},
      allowPrivate: true,
    })
    expect(refused.status).toBeNull()
    expect(refused.error).toMatch(/ECONNREFUSED/)

    const invalid = await sendDelivery({ url: 'ftp://127.0.0.1/', body, headers: {}, allowPrivate: true })
    expect(invalid.status).toBeNull()
    expect(invalid.error).toMatch(/unsupported_protocol/)
  })
})
