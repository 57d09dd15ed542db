import { context, ROOT_CONTEXT, SpanKind, TraceFlags, trace } from '@opentelemetry/api'
import { SamplingDecision } from '@opentelemetry/sdk-trace'
import { describe, expect, it } from 'vitest'
import { samplerFor } from './otel.ts'

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
