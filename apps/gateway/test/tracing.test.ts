import { randomBytes } from 'node:crypto'
import { type Tracing, tracingFor } from '@pm/kit'
import { afterAll, describe, expect, it } from 'vitest'
import { loadGatewayConfig } from '../src/app.ts'
import { proxyOptions, Upstreams } from '../src/proxy.ts'

const config = loadGatewayConfig({ NODE_ENV: 'test', INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex') })
const TRACE = '0af7651916cd43dd8448eb211c80319c'
const clientHeaders = (flags: string) => ({
  host: 'gateway',
  traceparent: `00-${TRACE}-b7ad6b7169203331-${flags}`,
  tracestate: 'vendor=x',
})

/** The headers the gateway sends its upstream for a request, in the trace `tracing` decided. */
async function upstreamHeaders(tracing: Tracing, client: Record<string, string>) {
  const rewrite = proxyOptions(config, new Upstreams(config), tracing).replyOptions?.rewriteRequestHeaders
  if (!rewrite) throw new Error('no rewriteRequestHeaders')
  // The request's server span, as kit's traceRequests starts it at the gateway (a root there)
  // and keeps it on the request where it records.
  const server = tracing.start('POST', { kind: 'server', parent: client, root: true })
  const updates: unknown[] = []
  const traceSpan = server.recording
    ? {
        ...server,
        recording: true,
        headers: () => server.headers(),
        update: (name?: string, attributes?: unknown) => {
          updates.push(attributes)
          server.update(name, attributes as Record<string, string>)
        },
      }
    : null
  const request = {
    id: 'req-1',
    ip: '203.0.113.9',
    contextToken: null,
    peekedLength: null,
    policyMatch: { policy: { upstream: 'render' } },
    traceSpan,
  }
  // @ts-expect-error: the rewrite reads only these fields of the request.
  const headers = rewrite(request, client) as Record<string, string | undefined>
  return { headers, recording: server.recording, server: server.headers(), updates }
}

const made: Tracing[] = []
const tracingAt = async (ratio: number) => {
  const tracing = await tracingFor(
    {
      OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:9',
      OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
      OTEL_TRACES_SAMPLER_ARG: ratio,
    },
    'test',
  )
  if (!tracing) throw new Error('tracing is off')
  made.push(tracing)
  return tracing
}
afterAll(async () => {
  // Nothing was ended, so nothing is exported to the closed port.
  await Promise.all(made.map((t) => t.shutdown()))
})

describe('traces start at the gateway: what the upstream is sent', () => {
  it('a request the sampler drops: an unsampled traceparent of its own goes on (flags 00, fresh ids), nothing of a client’s', async () => {
    const tracing = await tracingAt(0)
    const own = await upstreamHeaders(tracing, { host: 'gateway' })
    expect(own.recording).toBe(false)
    expect(own.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
    const again = await upstreamHeaders(tracing, { host: 'gateway' })
    expect(again.headers.traceparent?.slice(3, 35)).not.toBe(own.headers.traceparent?.slice(3, 35))
    const client = await upstreamHeaders(tracing, clientHeaders('00'))
    expect(client.recording).toBe(false)
    expect(client.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
    expect(client.headers.traceparent).not.toContain(TRACE)
    expect(client.headers.traceparent).not.toContain('b7ad6b7169203331')
    expect(client.headers).not.toHaveProperty('tracestate')
    expect(client.updates).toEqual([])
    expect(client.headers['x-request-id']).toBe('req-1')
  })

  it('a sampled request: the gateway’s server span’s traceparent (flags 01) in the client’s trace, its tracestate kept', async () => {
    const tracing = await tracingAt(0)
    // Parent-based: the client's sampled trace is followed even at ratio 0.
    const sampled = await upstreamHeaders(tracing, clientHeaders('01'))
    expect(sampled.recording).toBe(true)
    expect(sampled.headers.traceparent).toMatch(
      new RegExp(`^00-${TRACE}-(?!b7ad6b7169203331)[0-9a-f]{16}-01$`),
    )
    // The upstream's parent is the gateway's one span for the request, which names the upstream.
    expect(sampled.headers.traceparent).toBe(sampled.server.traceparent)
    expect(sampled.headers.tracestate).toBe('vendor=x')
    expect(sampled.updates).toEqual([{ 'pm.upstream': 'render' }])
  })

  it('a root the sampler keeps: a new trace, sent on with flags 01', async () => {
    const tracing = await tracingAt(1)
    const root = await upstreamHeaders(tracing, { host: 'gateway' })
    expect(root.recording).toBe(true)
    expect(root.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/)
  })

  it('with tracing off, and a tracestate sent alone: a client’s trace context goes no further, and none is made', () => {
    const rewrite = proxyOptions(config, new Upstreams(config)).replyOptions?.rewriteRequestHeaders
    if (!rewrite) throw new Error('no rewriteRequestHeaders')
    const request = { id: 'req-2', ip: '203.0.113.9', contextToken: null, peekedLength: null }
    for (const client of [clientHeaders('01'), { host: 'gateway', tracestate: 'vendor=x' }]) {
      // @ts-expect-error: the rewrite reads only these fields of the request.
      const headers = rewrite(request, client) as Record<string, string | undefined>
      expect(headers).not.toHaveProperty('traceparent')
      expect(headers).not.toHaveProperty('tracestate')
      expect(headers['x-request-id']).toBe('req-2')
    }
  })
})
