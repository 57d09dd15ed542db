import { readFileSync } from 'node:fs'
import { createServer, type IncomingMessage, type ServerResponse } from 'node:http'
import { createServer as createHttpsServer } from 'node:https'
import type { AddressInfo } from 'node:net'
import type { TLSSocket } from 'node:tls'
import { fileURLToPath } from 'node:url'
import { gunzipSync } from 'node:zlib'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { createOtelTracing } from './otel.ts'
import { otlpTraceExporter, retryAfterMs, tlsFromEnvironment, UndiciOtlpTransport } from './otlpExport.ts'

interface Received {
  path: string
  headers: IncomingMessage['headers']
  body: Buffer
}

// One collector for the file; each test says how it answers.
let answer: (req: IncomingMessage, res: ServerResponse, n: number) => void = (_req, res) => res.end()
const received: Received[] = []
const server = createServer((req, res) => {
  const chunks: Buffer[] = []
  req.on('data', (c: Buffer) => chunks.push(c))
  req.on('end', () => {
    received.push({ path: req.url ?? '', headers: req.headers, body: Buffer.concat(chunks) })
    answer(req, res, received.length)
  })
})
let base = ''
beforeAll(async () => {
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  base = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
})
afterAll(() => new Promise<void>((resolve) => server.close(() => resolve())))
afterEach(() => {
  received.length = 0
  answer = (_req, res) => res.end()
  vi.unstubAllEnvs()
})

/** One span through a tracing whose exporter is `otlpTraceExporter` (the settings' default path). */
async function exportOne(protocol: 'http/protobuf' | 'http/json' = 'http/protobuf') {
  const tracing = createOtelTracing({
    endpoint: base,
    serviceName: 'test',
    sampler: 'always_on',
    ratio: 1,
    protocol,
  })
  tracing.start('exported span', { root: true }).end()
  await tracing.shutdown()
}

describe('OTLP export through undici', () => {
  it('a batch goes to <endpoint>/v1/traces in protobuf, with OTEL_EXPORTER_OTLP_[TRACES_]HEADERS', async () => {
    vi.stubEnv('OTEL_EXPORTER_OTLP_HEADERS', 'X-Api-Key=general,x-team=a%20b')
    vi.stubEnv('OTEL_EXPORTER_OTLP_TRACES_HEADERS', 'x-api-key=traces')
    await exportOne()
    expect(received).toHaveLength(1)
    const [sent] = received
    expect(sent?.path).toBe('/v1/traces')
    expect(sent?.headers['content-type']).toBe('application/x-protobuf')
    expect(sent?.headers['x-api-key']).toBe('traces')
    expect(sent?.headers['x-team']).toBe('a b')
    expect(sent?.headers['user-agent']).toMatch(/^prompt-service/)
    expect(sent?.body.includes(Buffer.from('exported span'))).toBe(true)
  })

  it('OTEL_EXPORTER_OTLP_COMPRESSION=gzip: the body is gzipped and says so; http/json stays JSON inside', async () => {
    vi.stubEnv('OTEL_EXPORTER_OTLP_COMPRESSION', 'gzip')
    await exportOne('http/json')
    const [sent] = received
    expect(sent?.headers['content-encoding']).toBe('gzip')
    expect(sent?.headers['content-type']).toBe('application/json')
    const doc = JSON.parse(gunzipSync(sent?.body ?? Buffer.alloc(0)).toString('utf8')) as {
      resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ name: string }> }> }>
    }
    expect(doc.resourceSpans[0]?.scopeSpans[0]?.spans[0]?.name).toBe('exported span')
  })

  it('429, 502, 503, 504 are retried (Retry-After honoured); the third try succeeds', async () => {
    answer = (_req, res, n) => {
      if (n === 1) res.writeHead(503, { 'retry-after': '0' }).end()
      else if (n === 2) res.writeHead(429, { 'retry-after': '0' }).end()
      else res.writeHead(200).end()
    }
    const transport = new UndiciOtlpTransport(`${base}/v1/traces`, 'application/x-protobuf', 'none')
    try {
      const result = await transport.send(new Uint8Array([1, 2, 3]), 5_000)
      expect(result.status).toBe('success')
      expect(received.map((r) => [...r.body])).toEqual([
        [1, 2, 3],
        [1, 2, 3],
        [1, 2, 3],
      ])
    } finally {
      transport.shutdown()
    }
  })

  it('another error status fails at once, with the status and what the collector said', async () => {
    answer = (_req, res) => res.writeHead(400, { 'content-type': 'text/plain' }).end('bad batch')
    const transport = new UndiciOtlpTransport(`${base}/v1/traces`, 'application/x-protobuf', 'none')
    try {
      const result = await transport.send(new Uint8Array([1]), 5_000)
      expect(result.status).toBe('failure')
      expect(received).toHaveLength(1)
      const error =
        result.status === 'failure' ? (result.error as Error & { code?: number; data?: string }) : undefined
      expect(error?.code).toBe(400)
      expect(error?.data).toBe('bad batch')
    } finally {
      transport.shutdown()
    }
  })

  it('a collector that never answers: given up at the timeout, as retryable, not waited on', async () => {
    answer = () => {} // holds the request open
    const transport = new UndiciOtlpTransport(`${base}/v1/traces`, 'application/x-protobuf', 'none')
    const started = Date.now()
    try {
      const result = await transport.send(new Uint8Array([1]), 300)
      expect(result.status).toBe('retryable')
      expect(Date.now() - started).toBeLessThan(2_000)
    } finally {
      transport.shutdown()
    }
  })

  it('an answer over 4 MiB is not read to its end: a failure', async () => {
    answer = (_req, res) => res.writeHead(200).end(Buffer.alloc(5 * 1024 * 1024, 1))
    const transport = new UndiciOtlpTransport(`${base}/v1/traces`, 'application/x-protobuf', 'none')
    try {
      const result = await transport.send(new Uint8Array([1]), 5_000)
      expect(result.status).toBe('failure')
    } finally {
      transport.shutdown()
    }
  })

  it('no collector listening: the connection refused is retryable, and the exporter reports the batch failed', async () => {
    const closed = createServer()
    await new Promise<void>((resolve) => closed.listen(0, '127.0.0.1', resolve))
    const port = (closed.address() as AddressInfo).port
    await new Promise<void>((resolve) => closed.close(() => resolve()))
    const transport = new UndiciOtlpTransport(
      `http://127.0.0.1:${port}/v1/traces`,
      'application/json',
      'none',
    )
    try {
      const result = await transport.send(new Uint8Array([1]), 500)
      expect(result.status).toBe('retryable')
    } finally {
      transport.shutdown()
    }
    vi.stubEnv('OTEL_EXPORTER_OTLP_TIMEOUT', '300')
    const exporter = otlpTraceExporter(`http://127.0.0.1:${port}/v1/traces`, 'http/json')
    const code = await new Promise<number>((resolve) => exporter.export([], (r) => resolve(r.code)))
    await exporter.shutdown()
    expect(code).toBe(1) // ExportResultCode.FAILED
  })

  describe('TLS to the collector (fixtures/otlp-tls: a test CA, the server and client it signed)', () => {
    const fixture = (name: string) => fileURLToPath(new URL(`./fixtures/otlp-tls/${name}`, import.meta.url))
    /** An HTTPS collector that answers 200 and notes the client certificate's name, if any. */
    async function collector(mutual: boolean) {
      const clients: string[] = []
      const https = createHttpsServer(
        {
          cert: readFileSync(fixture('server.pem')),
          key: readFileSync(fixture('server-key.pem')),
          ...(mutual
            ? { ca: readFileSync(fixture('ca.pem')), requestCert: true, rejectUnauthorized: true }
            : {}),
        },
        (req, res) => {
          const peer = (req.socket as TLSSocket).getPeerCertificate()
          clients.push([peer?.subject?.CN ?? ''].flat().join(','))
          req.resume()
          req.on('end', () => res.end())
        },
      )
      await new Promise<void>((resolve) => https.listen(0, '127.0.0.1', resolve))
      const url = `https://127.0.0.1:${(https.address() as AddressInfo).port}/v1/traces`
      const close = () => new Promise<void>((resolve) => https.close(() => resolve()))
      return { url, clients, close }
    }
    const exportTo = async (url: string) => {
      const exporter = otlpTraceExporter(url, 'http/json')
      try {
        return await new Promise<number>((resolve) => exporter.export([], (r) => resolve(r.code)))
      } finally {
        await exporter.shutdown()
      }
    }

    it('OTEL_EXPORTER_OTLP_CERTIFICATE: a collector signed by a private CA is trusted only with it', async () => {
      const c = await collector(false)
      try {
        vi.stubEnv('OTEL_EXPORTER_OTLP_TIMEOUT', '2000')
        // Not signed by a CA the system trusts: refused, nothing received.
        expect(await exportTo(c.url)).toBe(1)
        expect(c.clients).toEqual([])
        // The TRACES_ variable wins over the general one (which names no file that exists).
        vi.stubEnv('OTEL_EXPORTER_OTLP_CERTIFICATE', fixture('missing.pem'))
        vi.stubEnv('OTEL_EXPORTER_OTLP_TRACES_CERTIFICATE', fixture('ca.pem'))
        expect(await exportTo(c.url)).toBe(0)
        expect(c.clients).toHaveLength(1)
      } finally {
        await c.close()
      }
    })

    it('OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE and _CLIENT_KEY: mutual TLS', async () => {
      const c = await collector(true)
      try {
        vi.stubEnv('OTEL_EXPORTER_OTLP_TIMEOUT', '2000')
        vi.stubEnv('OTEL_EXPORTER_OTLP_CERTIFICATE', fixture('ca.pem'))
        // No client certificate: the collector refuses the handshake.
        expect(await exportTo(c.url)).toBe(1)
        expect(c.clients).toEqual([])
        vi.stubEnv('OTEL_EXPORTER_OTLP_CLIENT_CERTIFICATE', fixture('client.pem'))
        vi.stubEnv('OTEL_EXPORTER_OTLP_CLIENT_KEY', fixture('client-key.pem'))
        expect(await exportTo(c.url)).toBe(0)
        expect(c.clients).toEqual(['pm test client'])
      } finally {
        await c.close()
      }
    })

    it('a file that cannot be read, or half a client pair, stops the start naming the variable', () => {
      expect(() => tlsFromEnvironment({ OTEL_EXPORTER_OTLP_CERTIFICATE: fixture('missing.pem') })).toThrow(
        /^OTEL_EXPORTER_OTLP_CERTIFICATE: cannot read .*missing\.pem \(ENOENT\)$/,
      )
      expect(() =>
        tlsFromEnvironment({ OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: fixture('client.pem') }),
      ).toThrow(/^OTEL_EXPORTER_OTLP_TRACES_CLIENT_CERTIFICATE: set with its CLIENT_KEY or not at all$/)
      expect(() => tlsFromEnvironment({ OTEL_EXPORTER_OTLP_CLIENT_KEY: fixture('client-key.pem') })).toThrow(
        /^OTEL_EXPORTER_OTLP_CLIENT_KEY: set with its CLIENT_CERTIFICATE or not at all$/,
      )
      // An http endpoint reads none of them: a missing file stops nothing there.
      vi.stubEnv('OTEL_EXPORTER_OTLP_CERTIFICATE', fixture('missing.pem'))
      void otlpTraceExporter('http://127.0.0.1:9/v1/traces').shutdown()
      expect(() => otlpTraceExporter('https://127.0.0.1:9/v1/traces')).toThrow(/cannot read/)
      expect(tlsFromEnvironment({})).toEqual({})
      expect(Object.keys(tlsFromEnvironment({ OTEL_EXPORTER_OTLP_CERTIFICATE: fixture('ca.pem') }))).toEqual([
        'ca',
      ])
    })
  })

  it('Retry-After: seconds or an HTTP date, as the SDK reads it', () => {
    expect(retryAfterMs(undefined)).toBeUndefined()
    expect(retryAfterMs('3')).toBe(3_000)
    expect(retryAfterMs('0')).toBe(0)
    expect(retryAfterMs('soon')).toBeUndefined()
    const inTwoSeconds = new Date(Date.now() + 2_000).toUTCString()
    expect(retryAfterMs(inTwoSeconds)).toBeGreaterThan(0)
    expect(retryAfterMs(inTwoSeconds)).toBeLessThanOrEqual(2_000)
  })
})
