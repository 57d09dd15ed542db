import { randomBytes } from 'node:crypto'
import { connect } from '@nats-io/transport-node'
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

  it('deduplicates an id within its subject only, and hands the handler the id it was given', async () => {
    const seen: Array<{ subject: string; msgId: string }> = []
    for (const kind of ['queued', 'completed']) {
      await bus.consume(`pmtest.${suffix}.${kind}`, `c-${kind}-${suffix}`, async (_data, meta) => {
        seen.push({ subject: kind, msgId: meta.msgId })
      })
    }
    // One experiment's two events under its id: the second was dropped as the first's duplicate.
    await bus.publishDurable(`pmtest.${suffix}.queued`, { e: 1 }, 'exp-1')
    await bus.publishDurable(`pmtest.${suffix}.completed`, { e: 1 }, 'exp-1')
    await bus.publishDurable(`pmtest.${suffix}.completed`, { e: 1 }, 'exp-1')
    await vi.waitFor(() => expect(seen).toHaveLength(2), { timeout: 5_000 })
    await new Promise((resolve) => setTimeout(resolve, 200))
    expect(seen.sort((a, b) => a.subject.localeCompare(b.subject))).toEqual([
      { subject: 'completed', msgId: 'exp-1' },
      { subject: 'queued', msgId: 'exp-1' },
    ])
  })

  it('survives a message that is not JSON: a broadcast is skipped, a durable one dropped, and the next ones taken', async () => {
    const untaken: string[] = []
    const other = await NatsBus.connect({
      url: await natsUrl(),
      stream,
      streamSubjects: [`pmtest.${suffix}.>`],
      retryDelayMs: 50,
      onUntaken: (what, subj) => untaken.push(`${what} ${subj}`),
    })
    const raw = await connect({ servers: await natsUrl() })
    try {
      const bcasts: unknown[] = []
      other.onBroadcast(`pmtest.${suffix}.inval`, (d) => {
        if ((d as { boom?: boolean }).boom) throw new Error('handler refused it')
        bcasts.push(d)
      })
      const durables: unknown[] = []
      await other.consume(`pmtest.${suffix}.poison`, `c-poison-${suffix}`, async (d) => {
        durables.push(d)
      })
      await other.check()
      raw.publish(`pmtest.${suffix}.inval`, 'not json')
      raw.publish(`pmtest.${suffix}.inval`, JSON.stringify({ boom: true }))
      await raw.flush()
      bus.broadcast(`pmtest.${suffix}.inval`, { after: true })
      // Before, the first of these ended the connection's reading for good.
      await vi.waitFor(() => expect(bcasts).toEqual([{ after: true }]), { timeout: 5_000 })
      await other.check()

      const js = (await import('@nats-io/jetstream')).jetstream(raw)
      await js.publish(`pmtest.${suffix}.poison`, 'not json')
      await bus.publishDurable(`pmtest.${suffix}.poison`, { ok: 1 }, 'ok-1')
      await vi.waitFor(() => expect(durables).toEqual([{ ok: 1 }]), { timeout: 5_000 })
      expect(untaken).toEqual([
        `broadcast not taken pmtest.${suffix}.inval`,
        `broadcast not taken pmtest.${suffix}.inval`,
        `durable message not JSON, dropped pmtest.${suffix}.poison`,
      ])
      // Dropped, not redelivered every 50 ms.
      await new Promise((resolve) => setTimeout(resolve, 300))
      expect(untaken).toHaveLength(3)
    } finally {
      await raw.close()
      await other.close()
    }
  })
})
