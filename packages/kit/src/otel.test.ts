import { context, createContextKey, ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api'
import {
  InMemorySpanExporter,
  SamplingDecision,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import { createOtelTracing, DroppedSpan, samplerFor, withDropped } from './otel.ts'
import { type Tracing, traceMethods } from './tracing.ts'

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

describe('the context of a dropped span', () => {
  it('reads as the API’s trace.setSpan would: the span, the parent’s values, writes kept', () => {
    const key = createContextKey('test key')
    const other = createContextKey('other key')
    const parent = ROOT_CONTEXT.setValue(key, 'from the parent')
    const span = new DroppedSpan({
      traceId: TRACE_LOW,
      spanId: '00000000000000aa',
      traceFlags: TraceFlags.NONE,
    })
    const ctx = withDropped(parent, span)
    const api = trace.setSpan(parent, span)
    expect(ctx.constructor.name).toBe('DroppedContext') // the cheap one, as the API keys spans today
    expect(trace.getSpan(ctx)).toBe(span)
    expect(trace.getSpanContext(ctx)).toEqual(trace.getSpanContext(api))
    expect(ctx.getValue(key)).toBe('from the parent')
    expect(ctx.getValue(other)).toBeUndefined()
    const written = ctx.setValue(other, 2)
    expect([trace.getSpan(written), written.getValue(key), written.getValue(other)]).toEqual([
      span,
      'from the parent',
      2,
    ])
    expect(ctx.getValue(other)).toBeUndefined() // contexts are immutable
    const deleted = ctx.deleteValue(key)
    expect([trace.getSpan(deleted), deleted.getValue(key)]).toEqual([span, undefined])
    expect(span.headers()).toEqual({ traceparent: `00-${TRACE_LOW}-00000000000000aa-00` })
  })
})

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

describe('a trace the sampler drops costs no span work', () => {
  const TRACEPARENT = (flags: string) => `00-${TRACE_HIGH}-00000000000000aa-${flags}`
  const tracingWith = (sampler: Parameters<typeof samplerFor>[0], ratio: number) => {
    const exporter = new KeepingExporter()
    const tracing = createOtelTracing({
      endpoint: 'http://127.0.0.1:9',
      serviceName: 'test',
      sampler,
      ratio,
      exporter,
    })
    return { exporter, tracing }
  }
  const names = async (t: Tracing, exporter: InMemorySpanExporter) => {
    await t.shutdown()
    return exporter.getFinishedSpans().map((s) => s.name)
  }

  it('a dropped root: its children are one shared handle, nothing is recorded, traceparent says unsampled', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 0)
    const root = tracing.start('root', { kind: 'server', parent: {} })
    expect(root.recording).toBe(false)
    const inner = root.run(() => {
      const a = tracing.start('a')
      const b = tracing.start('b')
      return { a, b, headers: tracing.headers(), nested: a.run(() => tracing.start('c')) }
    })
    expect(inner.a.recording).toBe(false)
    expect(inner.b).toBe(inner.a)
    expect(inner.nested).toBe(inner.a)
    expect(inner.headers.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
    expect(inner.headers.traceparent).toBe(root.headers().traceparent)
    // span(): the function runs and its result comes back, in the dropped root's context.
    expect(await root.run(() => tracing.span('d', async () => tracing.headers().traceparent))).toBe(
      inner.headers.traceparent,
    )
    inner.a.end(new Error('ignored'))
    root.end()
    expect(await names(tracing, exporter)).toEqual([])
  })

  it('a caller’s unsampled traceparent is followed by parent-based samplers, even at ratio 1', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 1)
    const root = tracing.start('root', { kind: 'server', parent: { traceparent: TRACEPARENT('00') } })
    expect(root.recording).toBe(false)
    expect(root.headers().traceparent).toMatch(new RegExp(`^00-${TRACE_HIGH}-[0-9a-f]{16}-00$`))
    expect(root.run(() => tracing.start('child').recording)).toBe(false)
    root.end()
    expect(await names(tracing, exporter)).toEqual([])
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
    const root = tracing.start('root', { parent: {} })
    root.run(() => {
      expect(traced.get()).toBe(promise)
      expect(traced.sync(1)).toBe(2)
    })
    expect(await names(tracing, exporter)).toEqual([])
  })

  it('traceMethods: in a sampled trace each call is a span', async () => {
    const { exporter, tracing } = tracingWith('always_on', 0)
    const traced = traceMethods({ get: async () => 42, sync: (x: number) => x + 1 }, tracing, 'store')
    const root = tracing.start('root', { parent: {} })
    await root.run(async () => {
      expect(await traced.get()).toBe(42)
      expect(traced.sync(1)).toBe(2)
    })
    root.end()
    expect((await names(tracing, exporter)).sort()).toEqual(['root', 'store.get', 'store.sync'])
  })
})

/** Counts the SDK's startSpan calls of every tracer made while it is installed. */
function countSdkSpans() {
  const counter = { started: 0 }
  const getTracer = TracerProvider.prototype.getTracer
  const spy = vi.spyOn(TracerProvider.prototype, 'getTracer').mockImplementation(function (
    this: TracerProvider,
    ...args: Parameters<TracerProvider['getTracer']>
  ) {
    const tracer = getTracer.apply(this, args)
    const startSpan = tracer.startSpan.bind(tracer)
    tracer.startSpan = (...a: Parameters<typeof startSpan>) => {
      counter.started++
      return startSpan(...a)
    }
    return tracer
  })
  return { counter, restore: () => spy.mockRestore() }
}

describe('a dropped server span is decided without the SDK', () => {
  const traceIdOf = (traceparent: string | undefined) => traceparent?.split('-')[1] ?? ''
  const flagsOf = (traceparent: string | undefined) => traceparent?.split('-')[3]
  let sdk: ReturnType<typeof countSdkSpans>
  beforeEach(() => {
    sdk = countSdkSpans()
  })
  afterEach(() => sdk.restore())
  const tracingWith = (sampler: Parameters<typeof samplerFor>[0], ratio: number) => {
    const exporter = new KeepingExporter()
    return {
      exporter,
      tracing: createOtelTracing({
        endpoint: 'http://127.0.0.1:9',
        serviceName: 'test',
        sampler,
        ratio,
        exporter,
      }),
    }
  }

  it('a root the ratio drops: no SDK span; its trace id goes downstream with flags 00; a store call in it starts nothing', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 0)
    const store = traceMethods({ get: async () => 42 }, tracing, 'store')
    const root = tracing.start('GET /x', { kind: 'server', parent: {} })
    expect(root.recording).toBe(false)
    const own = root.headers().traceparent
    expect(own).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-00$/)
    const inside = await root.run(async () => {
      const outgoing = tracing.headers().traceparent
      expect(await store.get()).toBe(42)
      return {
        outgoing,
        child: tracing.start('gateway.proxy render', { kind: 'client' }).headers().traceparent,
      }
    })
    expect(inside.outgoing).toBe(own)
    expect(inside.child).toBe(own)
    // The next service, under a parent-based sampler, drops it too, in the same trace.
    const next = tracingWith('parentbased_traceidratio', 1)
    const downstream = next.tracing.start('POST /render', { kind: 'server', parent: { traceparent: own } })
    expect(downstream.recording).toBe(false)
    expect(traceIdOf(downstream.headers().traceparent)).toBe(traceIdOf(own))
    expect(flagsOf(downstream.headers().traceparent)).toBe('00')
    expect(downstream.headers().traceparent).not.toBe(own) // a span id of its own
    expect(sdk.counter.started).toBe(0)
    await next.tracing.shutdown()
    await tracing.shutdown()
    expect(exporter.getFinishedSpans()).toEqual([])
  })

  it('a caller’s unsampled traceparent: no SDK span, its tracestate goes on', async () => {
    const { tracing } = tracingWith('parentbased_always_on', 1)
    const parent = { traceparent: `00-${TRACE_LOW}-00000000000000aa-00`, tracestate: 'vendor=x' }
    const span = tracing.start('POST /render', { kind: 'server', parent })
    expect(span.recording).toBe(false)
    const headers = span.run(() => tracing.headers())
    expect(headers.traceparent).toMatch(new RegExp(`^00-${TRACE_LOW}-(?!00000000000000aa)[0-9a-f]{16}-00$`))
    expect(headers.tracestate).toBe('vendor=x')
    expect(sdk.counter.started).toBe(0)
    await tracing.shutdown()
  })

  it('a caller’s traceparent the short path does not read goes to the propagator, as before', async () => {
    const { tracing } = tracingWith('parentbased_always_on', 1)
    // A later version with more fields, flags 00: the propagator reads it, the trace is dropped.
    const later = tracing.start('a', {
      kind: 'server',
      parent: { traceparent: `cc-${TRACE_LOW}-00000000000000aa-00-more` },
    })
    expect(later.recording).toBe(false)
    expect(later.headers().traceparent).toMatch(new RegExp(`^00-${TRACE_LOW}-[0-9a-f]{16}-00$`))
    // An invalid one (trace id all zeros) is no parent: a root, which always_on records.
    const invalid = tracing.start('b', {
      kind: 'server',
      parent: { traceparent: `00-${'0'.repeat(32)}-00000000000000aa-00` },
    })
    expect(invalid.recording).toBe(true)
    expect(invalid.headers().traceparent).not.toContain('0'.repeat(32))
    invalid.end()
    // Sampled (flags 01): recorded in the caller's trace.
    const sampled = tracing.start('c', {
      kind: 'server',
      parent: { traceparent: `00-${TRACE_HIGH}-00000000000000aa-01` },
    })
    expect(sampled.recording).toBe(true)
    expect(sampled.headers().traceparent).toMatch(new RegExp(`^00-${TRACE_HIGH}-[0-9a-f]{16}-01$`))
    sampled.end()
    expect(sdk.counter.started).toBe(2)
    await tracing.shutdown()
  })

  it('a root the ratio samples is recorded by the SDK, in the trace id decided on, as a root', async () => {
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', 1)
    const root = tracing.start('GET /x', { kind: 'server', parent: {} })
    expect(root.recording).toBe(true)
    const traceparent = root.headers().traceparent
    expect(flagsOf(traceparent)).toBe('01')
    const child = root.run(() => tracing.start('store.get'))
    child.end()
    root.end()
    expect(sdk.counter.started).toBe(2)
    // Another root gets another trace id (the one decided on is used once).
    const other = tracing.start('GET /y', { kind: 'server', parent: {} })
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

  it('the ratio decision is the SDK sampler’s for the root’s trace id (many random ids)', async () => {
    const ratio = 0.3
    const { exporter, tracing } = tracingWith('parentbased_traceidratio', ratio)
    const reference = new TraceIdRatioBasedSampler(ratio)
    const kept: string[] = []
    const n = 4000
    for (let i = 0; i < n; i++) {
      const root = tracing.start('GET /x', { kind: 'server', parent: {} })
      const traceId = traceIdOf(root.headers().traceparent)
      const sdkSays =
        reference.shouldSample(ROOT_CONTEXT, traceId).decision === SamplingDecision.RECORD_AND_SAMPLED
      expect(root.recording, traceId).toBe(sdkSays)
      expect(flagsOf(root.headers().traceparent)).toBe(sdkSays ? '01' : '00')
      if (root.recording) kept.push(traceId)
      root.end()
    }
    // About the ratio's share (binomial: ±4.5 standard deviations at n = 4000), ...
    expect(Math.abs(kept.length / n - ratio)).toBeLessThan(0.033)
    // ... and only the SDK's spans for those, in those traces.
    expect(sdk.counter.started).toBe(kept.length)
    await tracing.shutdown()
    expect(exporter.getFinishedSpans().map((s) => s.spanContext().traceId)).toEqual(kept)
  })

  it('traceidratio (not parent-based) decides a caller’s trace by its id, flags aside', async () => {
    const { tracing } = tracingWith('traceidratio', 0.1)
    const low = tracing.start('a', {
      kind: 'server',
      parent: { traceparent: `00-${TRACE_LOW}-00000000000000aa-00` },
    })
    const high = tracing.start('b', {
      kind: 'server',
      parent: { traceparent: `00-${TRACE_HIGH}-00000000000000aa-01` },
    })
    expect(low.recording).toBe(true)
    expect(high.recording).toBe(false)
    expect(sdk.counter.started).toBe(1)
    low.end()
    await tracing.shutdown()
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
  const batched = (batch: { scheduleDelayMs?: number; maxBatchSize?: number }) => {
    const exporter = new KeepingExporter()
    const tracing = createOtelTracing({
      endpoint: 'http://127.0.0.1:9',
      serviceName: 'test',
      sampler: 'always_on',
      ratio: 1,
      exporter,
      ...batch,
    })
    return { exporter, tracing }
  }
  const sent = (exporter: InMemorySpanExporter) => exporter.getFinishedSpans().map((s) => s.name)

  it('OTEL_BSP_SCHEDULE_DELAY (scheduleDelayMs): an ended span waits that long for its batch, not the 1 s default', async () => {
    const late = batched({ scheduleDelayMs: 5_000 })
    const usual = batched({})
    late.tracing.start('one').end()
    usual.tracing.start('one').end()
    await vi.advanceTimersByTimeAsync(1_100)
    expect(sent(usual.exporter)).toEqual(['one'])
    expect(sent(late.exporter)).toEqual([])
    await vi.advanceTimersByTimeAsync(4_000)
    expect(sent(late.exporter)).toEqual(['one'])
  })

  it('OTEL_BSP_MAX_EXPORT_BATCH_SIZE (maxBatchSize): a batch that size goes at once', async () => {
    const { exporter, tracing } = batched({ scheduleDelayMs: 60_000, maxBatchSize: 2 })
    tracing.start('one').end()
    await vi.advanceTimersByTimeAsync(10)
    expect(sent(exporter)).toEqual([])
    tracing.start('two').end()
    await vi.advanceTimersByTimeAsync(10)
    expect(sent(exporter)).toEqual(['one', 'two'])
  })
})
