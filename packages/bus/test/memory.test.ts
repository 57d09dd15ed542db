import { describe, expect, it, vi } from 'vitest'
import { MemoryBus } from '../src/memory.ts'

describe('MemoryBus', () => {
  it('stores a message id once and retries a failing handler', async () => {
    const bus = new MemoryBus(10)
    const seen: unknown[] = []
    let failures = 1
    await bus.consume('s', 'c1', async (data) => {
      if (failures-- > 0) throw new Error('boom')
      seen.push(data)
    })
    await bus.publishDurable('s', { n: 1 }, 'id-1')
    await bus.publishDurable('s', { n: 1 }, 'id-1')
    await vi.waitFor(() => expect(seen).toEqual([{ n: 1 }]))
    await bus.close()
  })

  it('replays the stream to a consumer that starts later, and broadcasts to every subscriber', async () => {
    const bus = new MemoryBus()
    await bus.publishDurable('s', 'a', 'x')
    const got: unknown[] = []
    await bus.consume('s', 'late', async (d) => {
      got.push(d)
    })
    await vi.waitFor(() => expect(got).toEqual(['a']))
    const a: unknown[] = []
    const b: unknown[] = []
    bus.onBroadcast('b', (d) => a.push(d))
    bus.onBroadcast('b', (d) => b.push(d))
    bus.broadcast('b', 1)
    expect(a).toEqual([1])
    expect(b).toEqual([1])
    await bus.close()
  })
})
