import { context, ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api'
import { InMemorySpanExporter, SamplingDecision } from '@opentelemetry/sdk-trace'
import { describe, expect, it } from 'vitest'
import { createOtelTracing, samplerFor } from './otel.ts'
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
