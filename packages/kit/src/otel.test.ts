import { context, ROOT_CONTEXT, SpanKind, SpanStatusCode, TraceFlags, trace } from '@opentelemetry/api'
import {
  BatchSpanProcessor,
  InMemorySpanExporter,
  SamplingDecision,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace'
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createOtelTracing, notSampled, ratioKeeps, samplerFor } from './otel.ts'
import { loadOperatingSettings } from './server.ts'
import { type Tracing, tracingFor, traceMethods } from './tracing.ts'

const TRACE_LOW = '00000000000000000000000000000001' // kept by any ratio above 0
const TRACE_HIGH = 'ffffffff000000000000000000000000' // kept by none below 1

function decide(
  name: Parameters<typeof samplerFor>[0],
  ratio: number,
  traceId: string,
  parentSampled?: boolean,
) {
  const parent =
    parentSampled === undefined
      ? ROOT_CONTEXT
      : trace.setSpanContext(ROOT_CONTEXT, {
          traceId,
          spanId: '0000000000000001',
          traceFlags: parentSampled ? TraceFlags.SAMPLED : TraceFlags.NONE,
          isRemote: true,
        })
  return samplerFor(name, ratio).shouldSample(parent, traceId, 'x', SpanKind.SERVER, {}, []).decision
}

describe('OTEL_TRACES_SAMPLER', () => {
  const kept = SamplingDecision.RECORD_AND_SAMPLED
  const dropped = SamplingDecision.NOT_RECORD
  it('always_on and always_off, whatever the ratio', () => {
    expect(decide('always_on', 0, TRACE_HIGH)).toBe(kept)
    expect(decide('always_off', 1, TRACE_LOW)).toBe(dropped)
  })

  it('traceidratio keeps the share of trace ids the ratio says', () => {
    expect(decide('traceidratio', 0.1, TRACE_LOW)).toBe(kept)
    expect(decide('traceidratio', 0.1, TRACE_HIGH)).toBe(dropped)
    expect(decide('traceidratio', 0, TRACE_LOW)).toBe(dropped)
  })

  it('parentbased_*: a caller’s decision wins; without one, the root sampler decides', () => {
    expect(decide('parentbased_traceidratio', 0, TRACE_HIGH, true)).toBe(kept)
    expect(decide('parentbased_always_on', 1, TRACE_LOW, false)).toBe(dropped)
    expect(decide('parentbased_always_off', 1, TRACE_LOW)).toBe(dropped)
    expect(decide('parentbased_traceidratio', 0.1, TRACE_HIGH)).toBe(dropped)
    expect(context.active()).toBe(ROOT_CONTEXT)
  })
})

/** Keeps what it was sent when the provider shuts down (which flushes the batch into it). */
class KeepingExporter extends InMemorySpanExporter {
  override shutdown() {
    return Promise.resolve()
  }
}

/** A tracing under `sampler` at `ratio` whose exporter keeps what it is sent. */
function tracingWith(
  sampler: Parameters<typeof samplerFor>[0],
  ratio: number,
  more: { serviceName?: string; scheduleDelayMs?: number; maxBatchSize?: number } = {},
) {
  const exporter = new KeepingExporter()
  const tracing = createOtelTracing({
    endpoint: 'http://127.0.0.1:9',
    serviceName: 'test',
    sampler,
    ratio,
    exporter,
    ...more,
  })
  return { exporter, tracing }
}

describe('a trace the sampler drops costs no span work', () => {
  const TRACEPARENT = (flags: string) => `00-${TRACE_HIGH}-00000000000000aa-${flags}`
  const names = async (t: Tracing, exporter: InMemorySpanExporter) => {
    await t.shutdown()
    return exporter.getFinishedSpans().map((s) => s.name)
  }

  it('a dropped root: nothing entered, its children and outgoing headers untraced, nothing recorded', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 0)
    const root = tracing.start('root', { kind: 'server', parent: {}, root: true })
    expect(root.recording).toBe(false)
    expect(root.headers()).toEqual({})
    const inner = root.run(() => {
      const a = tracing.start('a')
      const b = tracing.start('b')
      return { a, b, headers: tracing.headers(), nested: a.run(() => tracing.start('c')) }
    })
    expect(inner.a.recording).toBe(false)
    expect(inner.b).toBe(inner.a)
    expect(inner.nested).toBe(inner.a)
    expect(inner.headers).toEqual({})
    // span(): the function runs and its result comes back.
    expect(await root.run(() => tracing.span('d', async () => 42))).toBe(42)
    inner.a.end(new Error('ignored'))
    root.end()
    expect(await names(tracing, exporter)).toEqual([])
  })

  it('a caller’s unsampled traceparent is followed by parent-based samplers, even at ratio 1: not sent on', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 1)
    const root = tracing.start('root', {
      kind: 'server',
      parent: { traceparent: TRACEPARENT('00') },
      root: true,
    })
    expect(root.recording).toBe(false)
    expect(root.headers()).toEqual({})
    expect(root.run(() => tracing.start('child').recording)).toBe(false)
    root.end()
    expect(await names(tracing, exporter)).toEqual([])
  })

  it('no trace to continue: nothing is traced unless the span is asked to be a root', async () => {
    const { exporter, tracing } = tracingWith('always_on', 1)
    // A service behind the gateway, a request without a traceparent; a poller's store call.
    expect(tracing.start('POST /render', { kind: 'server', parent: {} }).recording).toBe(false)
    const store = traceMethods({ claim: async () => [1] }, tracing, 'store')
    expect(await store.claim()).toEqual([1])
    expect(tracing.start('poll').recording).toBe(false)
    expect(tracing.headers()).toEqual({})
    // A traceparent that is not valid (trace id all zeros) is no trace to continue either.
    const invalid = { traceparent: `00-${'0'.repeat(32)}-00000000000000aa-01` }
    expect(tracing.start('POST /render', { kind: 'server', parent: invalid }).recording).toBe(false)
    // Asked to be a root (the gateway's requests, a webhook worker's delivery): the sampler decides.
    const root = tracing.start('GET /x', { kind: 'server', parent: invalid, root: true })
    expect(root.recording).toBe(true)
    root.end()
    expect(await names(tracing, exporter)).toEqual(['GET /x'])
  })

  it('a sampled trace records every span, children of an ended span included', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 1)
    const root = tracing.start('root', { kind: 'server', parent: { traceparent: TRACEPARENT('01') } })
    expect(root.recording).toBe(true)
    const child = root.run(() => tracing.start('child'))
    expect(child.recording).toBe(true)
    root.end()
    const late = root.run(() => tracing.start('late'))
    expect(late.recording).toBe(true)
    child.end()
    late.end()
    expect((await names(tracing, exporter)).sort()).toEqual(['child', 'late', 'root'])
  })

  it('traceMethods: in a dropped trace the call’s own result comes back unwrapped', async () => {
    const { exporter, tracing } = tracingWith('traceidratio', 0)
    const promise = Promise.resolve(42)
    const target = { get: () => promise, sync: (x: number) => x + 1 }
    const traced = traceMethods(target, tracing, 'store')
    expect(traced.get).toBe(traced.get)
    const root = tracing.start('root', { parent: {}, root: true })
    root.run(() => {
      expect(traced.get()).toBe(promise)
      expect(traced.sync(1)).toBe(2)
    })
    expect(await names(tracing, exporter)).toEqual([])
  })

  it('traceMethods: in a sampled trace each call is a span', async () => {
    const { exporter, tracing } = tracingWith('always_on', 0)
    const traced = traceMethods({ get: async () => 42, sync: (x: number) => x + 1 }, tracing, 'store')
    const root = tracing.start('root', { parent: {}, root: true })
    await root.run(async () => {
      expect(await traced.get()).toBe(42)
      expect(traced.sync(1)).toBe(2)
    })
    root.end()
    expect((await names(tracing, exporter)).sort()).toEqual(['root', 'store.get', 'store.sync'])
  })
})

/** Counts the spans handed to a batch processor (every recorded span, once it ends) while installed. */
function countRecorded() {
  const counter = { recorded: 0 }
  const onEnd = BatchSpanProcessor.prototype.onEnd
  const spy = vi.spyOn(BatchSpanProcessor.prototype, 'onEnd').mockImplementation(function (
    this: BatchSpanProcessor,
    ...args: Parameters<BatchSpanProcessor['onEnd']>
  ) {
    counter.recorded++
    return onEnd.apply(this, args)
  })
  return { counter, restore: () => spy.mockRestore() }
}

describe('a dropped span records nothing; a sampled one is recorded once', () => {
  const traceIdOf = (traceparent: string | undefined) => traceparent?.split('-')[1] ?? ''
  const flagsOf = (traceparent: string | undefined) => traceparent?.split('-')[3]
  let processed: ReturnType<typeof countRecorded>
  beforeEach(() => {
    processed = countRecorded()
  })
  afterEach(() => processed.restore())
  it('a root the ratio drops: nothing recorded, nothing sent downstream, a store call in it starts nothing', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 0)
    const store = traceMethods({ get: async () => 42 }, tracing, 'store')
    const root = tracing.start('GET /x', { kind: 'server', parent: {}, root: true })
    expect(root.recording).toBe(false)
    const inside = await root.run(async () => {
      const outgoing = tracing.headers()
      expect(await store.get()).toBe(42)
      return { outgoing, child: tracing.start('gateway.proxy render', { kind: 'client' }).headers() }
    })
    expect(inside).toEqual({ outgoing: {}, child: {} })
    // The next service gets no traceparent, and starts no trace of its own (even at ratio 1).
    const next = tracingWith('parentbased_traceidratio', 1)
    const downstream = next.tracing.start('POST /render', { kind: 'server', parent: inside.outgoing })
    expect(downstream.recording).toBe(false)
    expect(processed.counter.recorded).toBe(0)
    await next.tracing.shutdown()
    await tracing.shutdown()
    expect(exporter.getFinishedSpans()).toEqual([])
  })

  it('a caller’s unsampled traceparent and tracestate: nothing recorded, nothing goes on', async () => {
    const { tracing } = tracingWith('parentbased_always_on', 1)
    const parent = { traceparent: `00-${TRACE_LOW}-00000000000000aa-00`, tracestate: 'vendor=x' }
    const span = tracing.start('POST /render', { kind: 'server', parent })
    expect(span.recording).toBe(false)
    expect(span.run(() => tracing.headers())).toEqual({})
    expect(processed.counter.recorded).toBe(0)
    await tracing.shutdown()
  })

  it('an unsampled traceparent behind the gateway: not traced whatever the sampler; at a root the sampler still decides', async () => {
    const { exporter, tracing } = tracingWith('always_on', 1)
    const sent = tracing.unsampled()
    expect(Object.keys(sent)).toEqual(['traceparent'])
    expect(sent.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
    expect(sent.traceparent).not.toContain('0'.repeat(16))
    expect(tracing.unsampled().traceparent).not.toBe(sent.traceparent)
    // A service behind the gateway, always_on or not: the trace was decided where it started.
    const behind = tracing.start('POST /render', { kind: 'server', parent: sent })
    expect(behind.recording).toBe(false)
    expect(behind.run(() => tracing.headers())).toEqual({})
    // Any version-00 header whose sampled bit is clear (flags 02 too).
    expect(
      tracing.start('x', { parent: { traceparent: `00-${TRACE_LOW}-00000000000000aa-02` } }).recording,
    ).toBe(false)
    // The sampled bit set, or another version: read by the propagator as before.
    const sampled = tracing.start('x', { parent: { traceparent: `00-${TRACE_LOW}-00000000000000aa-03` } })
    expect(sampled.recording).toBe(true)
    sampled.end()
    // A root (the gateway, a webhook worker's delivery): the sampler decides, always_on records.
    const root = tracing.start('GET /x', { kind: 'server', parent: sent, root: true })
    expect(root.recording).toBe(true)
    root.end()
    await tracing.shutdown()
    expect(exporter.getFinishedSpans().map((s) => s.name)).toEqual(['x', 'GET /x'])
  })

  it('notSampled reads the flags of a version-00 traceparent only', () => {
    expect(notSampled(`00-${TRACE_LOW}-00000000000000aa-00`)).toBe(true)
    expect(notSampled(`00-${TRACE_LOW}-00000000000000aa-fe`)).toBe(true)
    expect(notSampled(`00-${TRACE_LOW}-00000000000000aa-01`)).toBe(false)
    expect(notSampled(`00-${TRACE_LOW}-00000000000000aa-ff`)).toBe(false)
    expect(notSampled(`01-${TRACE_LOW}-00000000000000aa-00`)).toBe(false)
    expect(notSampled(`00-${TRACE_LOW}-00000000000000aa-00-more`)).toBe(false)
    expect(notSampled([`00-${TRACE_LOW}-00000000000000aa-00`])).toBe(false)
    expect(notSampled(undefined)).toBe(false)
  })

  it('a caller’s traceparent is read by the W3C propagator', async () => {
    const { tracing } = tracingWith('parentbased_always_on', 1)
    // A later version with more fields, flags 00: the propagator reads it, the trace is dropped.
    const later = tracing.start('a', {
      kind: 'server',
      parent: { traceparent: `cc-${TRACE_LOW}-00000000000000aa-00-more` },
      root: true,
    })
    expect(later.recording).toBe(false)
    // An invalid one (trace id all zeros) is no parent: a root, which always_on records.
    const invalid = tracing.start('b', {
      kind: 'server',
      parent: { traceparent: `00-${'0'.repeat(32)}-00000000000000aa-00` },
      root: true,
    })
    expect(invalid.recording).toBe(true)
    expect(invalid.headers().traceparent).not.toContain('0'.repeat(32))
    invalid.end()
    // Sampled (flags 01): recorded in the caller's trace, its tracestate carried on.
    const sampled = tracing.start('c', {
      kind: 'server',
      parent: { traceparent: `00-${TRACE_HIGH}-00000000000000aa-01`, tracestate: 'vendor=x' },
    })
    expect(sampled.recording).toBe(true)
    expect(sampled.headers()).toEqual({
      traceparent: expect.stringMatching(
        new RegExp(`^00-${TRACE_HIGH}-(?!00000000000000aa)[0-9a-f]{16}-01$`),
      ),
      tracestate: 'vendor=x',
    })
    sampled.end()
    expect(processed.counter.recorded).toBe(2)
    await tracing.shutdown()
  })

  it('a root the ratio samples is recorded, in the trace id decided on, as a root', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 1)
    const root = tracing.start('GET /x', { kind: 'server', parent: {}, root: true })
    expect(root.recording).toBe(true)
    const traceparent = root.headers().traceparent
    expect(flagsOf(traceparent)).toBe('01')
    const child = root.run(() => tracing.start('store.get'))
    child.end()
    root.end()
    expect(processed.counter.recorded).toBe(2)
    // Another root gets another trace id (the one decided on is used once).
    const other = tracing.start('GET /y', { kind: 'server', parent: {}, root: true })
    other.end()
    await tracing.shutdown()
    const spans = exporter.getFinishedSpans()
    const recorded = spans.find((s) => s.name === 'GET /x')
    expect(recorded?.spanContext().traceId).toBe(traceIdOf(traceparent))
    expect(recorded?.parentSpanContext).toBeUndefined()
    expect(recorded?.kind).toBe(SpanKind.SERVER)
    expect(spans.find((s) => s.name === 'store.get')?.parentSpanContext?.spanId).toBe(
      recorded?.spanContext().spanId,
    )
    expect(spans.find((s) => s.name === 'GET /y')?.spanContext().traceId).not.toBe(traceIdOf(traceparent))
  })

  it('a root under the ratio: recorded in a trace id the SDK’s sampler keeps, about the ratio’s share (many roots)', async () => {
    const ratio = 0.3
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', ratio)
    const reference = new TraceIdRatioBasedSampler(ratio)
    const kept: string[] = []
    const n = 4000
    for (let i = 0; i < n; i++) {
      const root = tracing.start('GET /x', { kind: 'server', parent: {}, root: true })
      if (root.recording) {
        const traceId = traceIdOf(root.headers().traceparent)
        expect(reference.shouldSample(ROOT_CONTEXT, traceId).decision, traceId).toBe(
          SamplingDecision.RECORD_AND_SAMPLED,
        )
        kept.push(traceId)
      }
      root.end()
    }
    // About the ratio's share (binomial: ±4.5 standard deviations at n = 4000), ...
    expect(Math.abs(kept.length / n - ratio)).toBeLessThan(0.033)
    // ... and only those recorded, in those traces.
    expect(processed.counter.recorded).toBe(kept.length)
    await tracing.shutdown()
    expect(exporter.getFinishedSpans().map((s) => s.spanContext().traceId)).toEqual(kept)
  })

  it('ratioKeeps decides a trace id’s bytes as the SDK’s ratio sampler decides its hex', () => {
    const ids = Array.from({ length: 20_000 }, () => randomBytes(16))
    // Ids whose four words XOR to just below, at and just above a ratio's bound, and the extremes.
    const word = (xor: number) => {
      const id = Buffer.alloc(16)
      id.writeUInt32BE(xor >>> 0, 12)
      id[0] = 1 // not all zeros
      id.writeUInt32BE((xor ^ id.readUInt32BE(0)) >>> 0, 12)
      return id
    }
    const bound = Math.floor(0.25 * 0xffffffff)
    ids.push(word(bound - 1), word(bound), word(bound + 1), word(0), word(0xffffffff))
    for (const ratio of [0, 1e-4, 0.1, 0.25, 0.5, 0.999, 1, -1, 2, Number.NaN]) {
      const ours = ratioKeeps(ratio)
      const sdk = new TraceIdRatioBasedSampler(ratio)
      const differ = ids.filter(
        (id) =>
          ours(id) !==
          (sdk.shouldSample(ROOT_CONTEXT, id.toString('hex')).decision ===
            SamplingDecision.RECORD_AND_SAMPLED),
      )
      expect(
        differ.map((id) => id.toString('hex')),
        `ratio ${ratio}`,
      ).toEqual([])
    }
    const quarter = ratioKeeps(0.25)
    expect([word(bound - 1), word(bound)].map((id) => quarter(id))).toEqual([true, false])
    // Read where they lie in a larger buffer (kit's random pool), the same 16 bytes decide alike.
    for (const id of [word(bound - 1), word(bound), ...ids.slice(0, 200)]) {
      const pool = Buffer.concat([randomBytes(7), id, randomBytes(9)])
      expect(quarter(pool, 7)).toBe(quarter(id))
    }
  })

  it('traceidratio (not parent-based) decides a caller’s trace by its id, flags aside, where a trace may start', async () => {
    const { tracing } = tracingWith('traceidratio', 0.1)
    // Unsampled: only a root asks the sampler (behind the gateway it is not traced, above).
    const low = tracing.start('a', {
      kind: 'server',
      parent: { traceparent: `00-${TRACE_LOW}-00000000000000aa-00` },
      root: true,
    })
    const high = tracing.start('b', {
      kind: 'server',
      parent: { traceparent: `00-${TRACE_HIGH}-00000000000000aa-01` },
    })
    expect(low.recording).toBe(true)
    expect(high.recording).toBe(false)
    low.end()
    high.end()
    expect(processed.counter.recorded).toBe(1)
    await tracing.shutdown()
  })
})

describe('a recorded span, as the exporters read it', () => {
  it('names, kinds, ids, times, attributes, status and the exception event of what the services record', async () => {
    const { exporter, tracing } = tracingWith('parentbased_always_on', 1, { serviceName: 'svc' })
    const callerSpan = '00000000000000aa'
    const server = tracing.start('POST', {
      kind: 'server',
      parent: { traceparent: `00-${TRACE_LOW}-${callerSpan}-01` },
      attributes: { 'http.request.method': 'POST' },
    })
    server.update('POST /render', { 'http.route': '/render' })
    const failure = Object.assign(new Error('store down'), { code: 'ECONNREFUSED' })
    const child = server.run(() => tracing.start('render.prompts', { kind: 'client' }))
    child.end(failure)
    child.end() // a second end changes nothing
    server.end()
    server.update('renamed after its end', { late: true })
    await tracing.shutdown()
    const spans = exporter.getFinishedSpans()
    expect(spans.map((s) => s.name)).toEqual(['render.prompts', 'POST /render'])
    const [c, s] = spans
    if (!c || !s) throw new Error('two spans expected')
    expect(s.kind).toBe(SpanKind.SERVER)
    expect(c.kind).toBe(SpanKind.CLIENT)
    expect(s.spanContext()).toMatchObject({ traceId: TRACE_LOW, traceFlags: TraceFlags.SAMPLED })
    expect(s.parentSpanContext).toMatchObject({ traceId: TRACE_LOW, spanId: callerSpan, isRemote: true })
    expect(c.parentSpanContext?.spanId).toBe(s.spanContext().spanId)
    expect(c.parentSpanContext?.isRemote).toBeFalsy()
    expect(s.attributes).toEqual({ 'http.request.method': 'POST', 'http.route': '/render' })
    expect(s.status).toEqual({ code: SpanStatusCode.UNSET })
    expect(c.status).toEqual({ code: SpanStatusCode.ERROR, message: 'store down' })
    expect(
      c.events.map((e) => [e.name, e.attributes?.['exception.type'], e.attributes?.['exception.message']]),
    ).toEqual([['exception', 'ECONNREFUSED', 'store down']])
    expect(String(c.events[0]?.attributes?.['exception.stacktrace'])).toContain('store down')
    expect(s.resource.attributes['service.name']).toBe('svc')
    expect(s.instrumentationScope.name).toBe('prompt-service')
    // HrTime [seconds, nanoseconds] near now; the server span outlasts its child.
    const ms = (t: [number, number]) => t[0] * 1e3 + t[1] / 1e6
    expect(Math.abs(ms(s.startTime) - Date.now())).toBeLessThan(5_000)
    expect(ms(s.endTime)).toBeGreaterThanOrEqual(ms(c.endTime))
    expect(ms(c.startTime)).toBeGreaterThanOrEqual(ms(s.startTime))
    expect(ms(s.duration)).toBeCloseTo(ms(s.endTime) - ms(s.startTime), 3)
    expect(s.ended).toBe(true)
  })
})

describe('the span batch', () => {
  beforeEach(() => {
    vi.useFakeTimers()
  })
  afterEach(() => {
    vi.useRealTimers()
  })
  /** A tracing that records every span, its batch's settings as given; its exporter keeps what it is sent. */
  const batched = (batch: { scheduleDelayMs?: number; maxBatchSize?: number }) =>
    tracingWith('always_on', 1, batch)
  const sent = (exporter: InMemorySpanExporter) => exporter.getFinishedSpans().map((s) => s.name)

  it('OTEL_BSP_SCHEDULE_DELAY (scheduleDelayMs): an ended span waits that long for its batch, not the 1 s default', async () => {
    const late = batched({ scheduleDelayMs: 5_000 })
    const usual = batched({})
    late.tracing.start('one', { root: true }).end()
    usual.tracing.start('one', { root: true }).end()
    await vi.advanceTimersByTimeAsync(1_100)
    expect(sent(usual.exporter)).toEqual(['one'])
    expect(sent(late.exporter)).toEqual([])
    await vi.advanceTimersByTimeAsync(4_000)
    expect(sent(late.exporter)).toEqual(['one'])
  })

  it('OTEL_BSP_MAX_EXPORT_BATCH_SIZE (maxBatchSize): a batch that size goes at once', async () => {
    const { exporter, tracing } = batched({ scheduleDelayMs: 60_000, maxBatchSize: 2 })
    tracing.start('one', { root: true }).end()
    await vi.advanceTimersByTimeAsync(10)
    expect(sent(exporter)).toEqual([])
    tracing.start('two', { root: true }).end()
    await vi.advanceTimersByTimeAsync(10)
    expect(sent(exporter)).toEqual(['one', 'two'])
  })
})

describe('OTEL_EXPORTER_OTLP_PROTOCOL', () => {
  /** What a collector at a local port is sent when a span of `settings`' tracing ends and it shuts down. */
  async function exported(protocol?: string) {
    const received: Array<{ path: string; type: string; body: Buffer }> = []
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        received.push({
          path: req.url ?? '',
          type: String(req.headers['content-type']),
          body: Buffer.concat(chunks),
        })
        res.writeHead(200).end()
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const settings = loadOperatingSettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: `http://127.0.0.1:${(server.address() as AddressInfo).port}/`,
        ...(protocol ? { OTEL_EXPORTER_OTLP_PROTOCOL: protocol } : {}),
      })
      const tracing = await tracingFor(settings, 'test')
      tracing?.start('exported span', { root: true }).end()
      await tracing?.shutdown()
    } finally {
      server.close()
    }
    return received
  }

  it('http/protobuf by default (OTLP’s own default): the binary encoding, to <endpoint>/v1/traces', async () => {
    const [sent, ...more] = await exported()
    expect(more).toEqual([])
    expect(sent?.path).toBe('/v1/traces')
    expect(sent?.type).toBe('application/x-protobuf')
    // Protobuf strings are their UTF-8 bytes, each after its field's tag and length.
    const name = Buffer.from('exported span')
    const at = sent?.body.indexOf(name) ?? -1
    expect(at).toBeGreaterThan(0)
    expect(sent?.body[at - 1]).toBe(name.length)
    expect(() => JSON.parse(sent?.body.toString('utf8') ?? '')).toThrow()
  })

  it('http/json: the JSON encoding', async () => {
    const [sent] = await exported('http/json')
    expect(sent?.type).toBe('application/json')
    const body = JSON.parse(sent?.body.toString('utf8') ?? '') as {
      resourceSpans: Array<{ scopeSpans: Array<{ spans: Array<{ name: string }> }> }>
    }
    expect(body.resourceSpans[0]?.scopeSpans[0]?.spans[0]?.name).toBe('exported span')
  })

  it('anything else (grpc is not offered) is refused at start, naming the setting', () => {
    expect(() =>
      loadOperatingSettings({
        OTEL_EXPORTER_OTLP_ENDPOINT: 'http://127.0.0.1:4318',
        OTEL_EXPORTER_OTLP_PROTOCOL: 'grpc',
      }),
    ).toThrow(/OTEL_EXPORTER_OTLP_PROTOCOL/)
  })
})
