import { type HrTime, SpanKind, SpanStatusCode, TraceFlags, type TraceState } from '@opentelemetry/api'
import { ProtobufTraceSerializer } from '@opentelemetry/otlp-transformer'
import { resourceFromAttributes } from '@opentelemetry/resources'
import { InMemorySpanExporter, type ReadableSpan } from '@opentelemetry/sdk-trace'
import { describe, expect, it } from 'vitest'
import { createOtelTracing } from './otel.ts'
import { encodeTraces, protobufTraceSerializer } from './otlpProtobuf.ts'

/** What OpenTelemetry's own serializer writes for `spans`, and this file's, as hex (a mismatch shows where). */
function both(spans: ReadableSpan[]): { ours: string; sdk: string } {
  const sdk = ProtobufTraceSerializer.serializeRequest(spans) ?? new Uint8Array()
  return { ours: Buffer.from(encodeTraces(spans)).toString('hex'), sdk: Buffer.from(sdk).toString('hex') }
}

/** Keeps what it was sent when the tracing shuts down (which flushes the batch into it). */
class KeepingExporter extends InMemorySpanExporter {
  override shutdown() {
    return Promise.resolve()
  }
}

const LONG = 'a'.repeat(200)
const HUGE = `${'x'.repeat(20_000)}é`

/** Spans as the services make them: roots, children, a caller's parent with tracestate, errors, every attribute type. */
async function recordedSpans(): Promise<ReadableSpan[]> {
  const exporter = new KeepingExporter()
  const tracing = createOtelTracing({
    endpoint: 'http://127.0.0.1:9',
    serviceName: 'gateway',
    sampler: 'parentbased_always_on',
    ratio: 1,
    exporter,
  })
  for (let i = 0; i < 20; i++) {
    const root = tracing.start('POST', { kind: 'server', parent: {}, root: true })
    root.update(undefined, {
      'http.request.method': 'POST',
      'url.path': `/api/v1/prompts/6751c0ffee0123456789ab${String(i).padStart(2, '0')}/invoke`,
      'pm.service': 'gateway',
    })
    root.run(() => {
      const client = tracing.start('POST', {
        kind: 'client',
        attributes: { 'server.port': 3003, ok: true, share: 0.25, big: 2 ** 40, below: -7, nan: Number.NaN },
      })
      const behind = tracing.start('POST', {
        kind: 'server',
        parent: { ...client.headers(), tracestate: 'vendor=abc,other=1' },
      })
      behind.run(() => {
        tracing.start('prompts.store.getServed').end()
        tracing.start('naïve ünïcode 🚀', { attributes: { long: LONG, huge: HUGE, empty: '' } }).end()
        tracing.start('failed').end(new Error('store down: ECONNREFUSED'))
        tracing.start('failed with a string').end('a reason')
      })
      behind.end()
      client.end()
    })
    root.update('POST /api/v1/prompts/:id/invoke', {
      'http.route': '/api/v1/prompts/:id/invoke',
      'http.response.status_code': 200,
    })
    root.end(i % 5 === 0 ? new Error('HTTP 503') : undefined)
  }
  await tracing.shutdown()
  return exporter.getFinishedSpans()
}

const traceState = (value: string): TraceState => ({
  set: () => traceState(value),
  unset: () => traceState(value),
  get: () => undefined,
  serialize: () => value,
})

/** A span of any shape ReadableSpan allows, fields the services never set included. */
function synthetic(
  over: Partial<ReadableSpan> & { traceId?: string; state?: string; remote?: boolean },
): ReadableSpan {
  const traceId = over.traceId ?? '0af7651916cd43dd8448eb211c80319c'
  const t = (s: number, n: number): HrTime => [s, n]
  return {
    name: 'synthetic',
    kind: SpanKind.INTERNAL,
    spanContext: () => ({
      traceId,
      spanId: 'b7ad6b7169203331',
      traceFlags: TraceFlags.SAMPLED,
      ...(over.state ? { traceState: traceState(over.state) } : {}),
    }),
    parentSpanContext: {
      traceId,
      spanId: '00f067aa0ba902b7',
      traceFlags: TraceFlags.SAMPLED,
      ...(over.remote !== undefined ? { isRemote: over.remote } : {}),
    },
    startTime: t(1_764_000_000, 123_456_789),
    endTime: t(1_764_000_001, 999_999_999),
    status: { code: SpanStatusCode.OK },
    attributes: {},
    links: [],
    events: [],
    duration: t(1, 876_543_210),
    ended: true,
    resource: resourceFromAttributes({ 'service.name': 'synthetic' }),
    instrumentationScope: { name: 'scope' },
    droppedAttributesCount: 0,
    droppedEventsCount: 0,
    droppedLinksCount: 0,
    ...over,
  }
}

describe('OTLP/protobuf in one pass: the bytes OpenTelemetry’s serializer writes', () => {
  it('the services’ spans: roots, children, a remote parent with tracestate, errors, every attribute type, long and non-ASCII strings', async () => {
    const spans = await recordedSpans()
    expect(spans).toHaveLength(20 * 7)
    const { ours, sdk } = both(spans)
    expect(ours.length).toBeGreaterThan(20 * 7 * 2 * 100)
    expect(ours).toBe(sdk)
  })

  it('what ReadableSpan allows beyond them: links, arrays, bytes, nested values, scopes and resources of their own, schema URLs', () => {
    const resource = resourceFromAttributes({ 'service.name': 'other', 'host.cores': 16 })
    const scoped = { name: 'lib', version: '1.2.3', schemaUrl: 'https://opentelemetry.io/schemas/1.30.0' }
    const spans = [
      synthetic({
        attributes: {
          list: ['a', 'b', 'ç'],
          numbers: [1, 2.5, -3],
          flags: [true, false],
          holes: [null, undefined, 'x'] as unknown as string[],
        },
        links: [
          {
            context: {
              traceId: 'ABCDEF0123456789abcdef0123456789',
              spanId: '0123456789abcdef',
              traceFlags: TraceFlags.NONE,
              isRemote: true,
              traceState: traceState('k=v'),
            },
            attributes: { why: 'retry' },
            droppedAttributesCount: 2,
          },
          {
            context: {
              traceId: '0af7651916cd43dd8448eb211c80319c',
              spanId: '1111111111111111',
              traceFlags: 1,
            },
          },
        ],
        events: [
          { name: 'no attributes', time: [1, 2] },
          { name: 'some', time: [1_764_000_000, 5], attributes: { n: 1 }, droppedAttributesCount: 3 },
        ],
        droppedAttributesCount: 4,
        droppedEventsCount: 5,
        droppedLinksCount: 6,
        state: 'a=1',
        remote: true,
      }),
      synthetic({
        kind: SpanKind.CONSUMER,
        remote: false,
        status: { code: SpanStatusCode.ERROR, message: 'boom' },
        instrumentationScope: scoped,
        attributes: {
          bytes: new Uint8Array([0, 1, 255]),
          nested: { a: 'b', deeper: { c: [1, { d: true }] } },
          odd: (() => {}) as unknown as string,
        } as unknown as ReadableSpan['attributes'],
      }),
      synthetic({
        resource,
        instrumentationScope: scoped,
        name: '',
        status: { code: SpanStatusCode.UNSET, message: 'said' },
      }),
      synthetic({ resource, kind: undefined as unknown as SpanKind, parentSpanContext: undefined }),
      synthetic({ startTime: [0, 0], endTime: [4_294_967_295, 999_999_999] }),
      synthetic({
        attributes: {
          big: 2 ** 62,
          small: -(2 ** 62),
          max: 2 ** 63,
          min: -(2 ** 63),
          inf: Number.POSITIVE_INFINITY,
        },
      }),
    ]
    const { ours, sdk } = both(spans)
    expect(ours).toBe(sdk)
  })

  it('strings at every length boundary and of every UTF-8 width, lone surrogates included', () => {
    const pieces = ['a', 'é', '€', '🚀', '\ud800', '\udc00x', '\u0000', '\u007f', '\u0080']
    const spans: ReadableSpan[] = []
    for (const piece of pieces) {
      for (const n of [0, 1, 41, 42, 43, 63, 64, 127, 128, 129, 8191, 8192, 16384]) {
        const s = piece.repeat(Math.ceil(n / piece.length)).slice(0, n)
        spans.push(synthetic({ name: s, attributes: { [s || 'k']: s, tail: `${'a'.repeat(n)}${piece}` } }))
      }
    }
    const { ours, sdk } = both(spans)
    expect(ours).toBe(sdk)
  })

  it('random spans', () => {
    let seed = 42
    const rand = (n: number) => {
      seed = (seed * 1103515245 + 12345) % 2 ** 31
      return seed % n
    }
    const alphabet = ['a', 'Z', '/', ' ', 'é', 'ß', '中', '🙂', '\ud83d', '\n', '"']
    const text = () => Array.from({ length: rand(60) }, () => alphabet[rand(alphabet.length)]).join('')
    const value = () =>
      [text(), rand(1000) - 500, rand(2) === 0, rand(1000) / 7, 2 ** (20 + rand(40))][rand(5)]
    const spans = Array.from({ length: 300 }, () =>
      synthetic({
        name: text(),
        kind: rand(5) as SpanKind,
        attributes: Object.fromEntries(Array.from({ length: rand(8) }, () => [text(), value()])),
        events: Array.from({ length: rand(3) }, () => ({
          name: text(),
          time: [rand(2 ** 31), rand(1e9)] as HrTime,
          attributes: { m: text() },
        })),
        status:
          rand(3) === 0 ? { code: SpanStatusCode.ERROR, message: text() } : { code: SpanStatusCode.UNSET },
        remote: rand(2) === 0,
      }),
    )
    const { ours, sdk } = both(spans)
    expect(ours).toBe(sdk)
  })

  it('no spans: no bytes, as the SDK writes none; the collector’s answer read as the SDK reads it', () => {
    expect(encodeTraces([])).toHaveLength(0)
    expect(protobufTraceSerializer.deserializeResponse(new Uint8Array())).toEqual(
      ProtobufTraceSerializer.deserializeResponse(new Uint8Array()),
    )
  })
})
