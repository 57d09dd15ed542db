import { PassThrough } from 'node:stream'
import type { RunResult } from '@pm/contracts'
import { type FakeProvider, startFakeProvider } from '@pm/fakeprovider'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type StreamExecute, writeSse } from '../src/routes/runs.ts'
import { Runs } from '../src/services/runs.ts'
import { preparedRun, runsHarness } from './helpers.ts'

/**
 * A client that reads slower than the provider writes: the provider's stream is read no faster
 * than the client takes it, so what waits in this process is bounded by the buffers (before,
 * every delta was written to the SSE stream at once, and a stalled reader had the whole answer
 * held here).
 */
const harness = runsHarness('backpressure')
const runs = new Runs(harness.deps())
let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(async () => {
  await fake.close()
  await harness.close()
})

const turn = () => new Promise<void>((resolve) => setImmediate(resolve))

describe('the SSE answer of a streamed run', () => {
  it('stops taking deltas while the client does not read, and sends them all once it does', async () => {
    const out = new PassThrough()
    const delta = 'x'.repeat(1_000)
    const total = 2_000
    let produced = 0
    // A provider as fast as can be: one delta per event-loop turn (one read of its socket each).
    const execute: StreamExecute = async (onDelta) => {
      for (let i = 0; i < total; i++) {
        produced++
        await onDelta(delta)
        await turn()
      }
      return { runId: 'r1' } as RunResult
    }
    const done = writeSse(out, 60_000, execute, () => ({ code: 'INTERNAL_ERROR' }))

    // Nobody reads `out`: the producer is held once the buffer is past its high-water mark.
    for (let i = 0; i < 200; i++) await turn()
    const held = produced
    for (let i = 0; i < 200; i++) await turn()
    expect(produced).toBe(held)
    // Held: the stream's two buffers (written, and waiting to be read) and a delta or so beyond.
    const event = `event: delta\ndata: ${JSON.stringify({ content: delta })}\n\n`.length
    expect(held * event).toBeLessThan(out.writableHighWaterMark + out.readableHighWaterMark + 2 * event)
    expect(out.writableLength).toBeLessThan(out.writableHighWaterMark + 2 * event)

    // The client reads: everything comes, in order, then `done`.
    let text = ''
    out.setEncoding('utf8')
    out.on('data', (chunk: string) => {
      text += chunk
    })
    await done
    await new Promise((resolve) => out.once('end', resolve))
    expect(produced).toBe(total)
    expect(text.split('event: delta\n').length - 1).toBe(total)
    expect(text.endsWith(`event: done\ndata: ${JSON.stringify({ runId: 'r1' })}\n\n`)).toBe(true)
  })
})

describe.each(['openai', 'anthropic'] as const)('a streamed run whose reader is behind (%s)', (provider) => {
  it('reads no further from the provider until the delta it gave is taken', async () => {
    const marker = `behind-${provider}`
    const run = preparedRun({ provider, baseUrl: fake.url, marker, model: 'fake-drip-5', stream: true })
    const deltas: string[] = []
    let take = () => {}
    const taken = new Promise<void>((resolve) => {
      take = resolve
    })
    const pending = runs.execute(run, new AbortController().signal, (d) => {
      deltas.push(d)
      return taken
    })
    // The provider has sent its whole answer; the run has read one delta of it.
    await expect.poll(() => fake.find(marker)[0]?.finished, { timeout: 5_000 }).toBe(true)
    for (let i = 0; i < 20; i++) await turn()
    expect(deltas).toEqual([`${marker} `])
    take()
    const result = await pending
    expect(result.output.content).toBe(`${marker} one two three four five six seven eight`)
    expect(deltas.join('')).toBe(result.output.content)
  })
})
