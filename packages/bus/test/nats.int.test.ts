import { randomBytes } from 'node:crypto'
import { natsUrl } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { NatsBus } from '../src/nats.ts'

describe('NatsBus on a real NATS JetStream', () => {
  const suffix = randomBytes(4).toString('hex')
  const stream = `PM_TEST_${suffix}`
  const subject = `pmtest.${suffix}.events`
  let bus: NatsBus

  beforeAll(async () => {
    bus = await NatsBus.connect({
      url: await natsUrl(),
      stream,
      streamSubjects: [`pmtest.${suffix}.>`],
      retryDelayMs: 50,
    })
  })
  afterAll(async () => {
    await bus?.close()
  })

  it('stores a message id once (deduplication) and redelivers after a failure', async () => {
    const got: Array<{ data: unknown; attempt: number }> = []
    let failFirst = true
    await bus.consume(subject, `c-${suffix}`, async (data, meta) => {
      if (failFirst) {
        failFirst = false
        throw new Error('transient')
      }
      got.push({ data, attempt: meta.attempt })
    })
    await bus.publishDurable(subject, { v: 1 }, 'msg-1')
    await bus.publishDurable(subject, { v: 1 }, 'msg-1')
    await bus.publishDurable(subject, { v: 2 }, 'msg-2')
    // The failed message comes back after its nak delay, so after msg-2; msg-1 is stored once.
    await vi.waitFor(
      () => expect(got.map((g) => g.data)).toEqual(expect.arrayContaining([{ v: 1 }, { v: 2 }])),
      {
        timeout: 5_000,
      },
    )
    expect(got).toHaveLength(2)
    expect(got.find((g) => (g.data as { v: number }).v === 1)?.attempt).toBe(2)
  })

  it('broadcasts to every subscriber', async () => {
    const other = await NatsBus.connect({
      url: await natsUrl(),
      stream,
      streamSubjects: [`pmtest.${suffix}.>`],
    })
    const seen: unknown[] = []
    other.onBroadcast(`pmtest.${suffix}.bcast`, (d) => seen.push(d))
    await other.check()
    bus.broadcast(`pmtest.${suffix}.bcast`, { hello: true })
    await vi.waitFor(() => expect(seen).toEqual([{ hello: true }]))
    await other.close()
  })
})
