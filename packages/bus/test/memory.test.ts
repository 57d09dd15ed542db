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

  it('keeps what a consumer that starts within the start-up grace needs, then only what is unacknowledged', async () => {
    const bus = new MemoryBus(10, { startupGraceMs: 200 })
    // Published before any consumer (prompts' relay before webhooks subscribes).
    await bus.publishDurable('s', 'early', 'e1')
    await bus.publishDurable('other', 'nobody yet', 'o1')
    const first: unknown[] = []
    await bus.consume('s', 'first', async (d) => {
      first.push(d)
    })
    await vi.waitFor(() => expect(first).toEqual(['early']))
    // Acknowledged, but the grace is not over: a second consumer still gets it.
    const second: unknown[] = []
    await bus.consume('s', 'second', async (d) => {
      second.push(d)
    })
    await vi.waitFor(() => expect(second).toEqual(['early']))
    expect(bus.sizes.messages).toBe(2)
    await new Promise((r) => setTimeout(r, 250))

    // Past the grace: every acknowledged message goes, and many publishes keep nothing.
    for (let i = 0; i < 2_000; i++) await bus.publishDurable('s', { i, pad: 'x'.repeat(1024) }, `m${i}`)
    await vi.waitFor(() => expect(second).toHaveLength(2_001))
    await vi.waitFor(() => expect(bus.sizes.messages).toBe(0))
    expect(first).toHaveLength(2_001)
    await bus.close()
  })

  it('keeps a message a consumer has not acknowledged, and at most maxMessages', async () => {
    const bus = new MemoryBus(10_000, { startupGraceMs: 0, maxMessages: 5 })
    await bus.consume('s', 'c', async () => {
      throw new Error('not now')
    })
    await bus.publishDurable('s', 1, 'a')
    await vi.waitFor(() => expect(bus.sizes.messages).toBe(1))
    for (let i = 0; i < 20; i++) await bus.publishDurable('s', i, `b${i}`)
    expect(bus.sizes.messages).toBe(5)
    await bus.close()
  })

  it('drops a duplicate within the window, and forgets ids past it or past the cap', async () => {
    const bus = new MemoryBus(10, { duplicateWindowMs: 100, maxDuplicateIds: 1_000 })
    const got: unknown[] = []
    await bus.consume('s', 'c', async (d) => {
      got.push(d)
    })
    await bus.publishDurable('s', 'one', 'id-1')
    await bus.publishDurable('s', 'again', 'id-1')
    await vi.waitFor(() => expect(got).toEqual(['one']))
    await new Promise((r) => setTimeout(r, 150))
    // Past the window the id is forgotten, as JetStream's duplicate window does.
    await bus.publishDurable('s', 'later', 'id-1')
    await vi.waitFor(() => expect(got).toEqual(['one', 'later']))
    for (let i = 0; i < 5_000; i++) await bus.publishDurable('s', i, `n${i}`)
    expect(bus.sizes.duplicateIds).toBeLessThanOrEqual(1_000)
    // The newest ids are still remembered.
    await bus.publishDurable('s', 'dup', 'n4999')
    await vi.waitFor(() => expect(got).toHaveLength(5_002))
    expect(got.at(-1)).toBe(4_999)
    await bus.close()
  })
})
