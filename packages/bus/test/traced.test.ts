import { describe, expect, it } from 'vitest'
import { MemoryBus } from '../src/memory.ts'
import { type BusTracer, tracedBus } from '../src/traced.ts'

const SAMPLED = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01'
const UNSAMPLED = '00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-00'
const CONTINUED = '00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01'

/** A tracer that continues a sampled traceparent given as parent, and traces nothing else. */
function fakeTracer() {
  const parents: Array<Record<string, string | undefined> | 'current'> = []
  const tracer: BusTracer = {
    start: (_name, opts) => {
      parents.push(opts?.parent ?? 'current')
      const sampled = opts?.parent?.traceparent === SAMPLED
      return {
        run: (fn) => fn(),
        headers: (): Record<string, string> => (sampled ? { traceparent: CONTINUED } : {}),
        end: () => {},
      }
    },
  }
  return { tracer, parents }
}

describe('the traced bus: a publish carries its own span’s trace context, and no other', () => {
  it('given headers are the parent, `{}` included (a row written in no trace); without them, the current span', async () => {
    const inner = new MemoryBus()
    const { tracer, parents } = fakeTracer()
    const bus = tracedBus(inner, tracer)
    // What the messages carry, read from the bus underneath.
    const sent = new Map<string, Record<string, string> | undefined>()
    await inner.consume('s', 'c', async (_data, meta) => {
      sent.set(meta.msgId, meta.headers)
    })
    await bus.publishDurable('s', 1, 'untraced-row', {})
    await bus.publishDurable('s', 2, 'stale-row', {
      traceparent: UNSAMPLED,
      tracestate: 'v=1',
      other: 'kept',
    })
    await bus.publishDurable('s', 3, 'sampled-row', { traceparent: SAMPLED, tracestate: 'v=1' })
    await bus.publishDurable('s', 4, 'no-headers')
    expect(parents).toEqual([
      {},
      { traceparent: UNSAMPLED, tracestate: 'v=1', other: 'kept' },
      { traceparent: SAMPLED, tracestate: 'v=1' },
      'current',
    ])
    await expect.poll(() => sent.size).toBe(4)
    expect(Object.fromEntries(sent)).toEqual({
      'untraced-row': undefined,
      // A traceparent the span did not continue goes no further; other headers do.
      'stale-row': { other: 'kept' },
      'sampled-row': { traceparent: CONTINUED },
      'no-headers': undefined,
    })
    await bus.close()
  })
})
