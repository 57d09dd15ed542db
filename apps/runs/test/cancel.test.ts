import type { Provider } from '@pm/contracts'
import { type FakeProvider, startFakeProvider } from '@pm/fakeprovider'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type PreparedRun, Runs } from '../src/services/runs.ts'
import { ORG, preparedRun, runsHarness } from './helpers.ts'

/**
 * A run the client stops (the browser's Stop, a closed SSE stream) is logged as `cancelled`,
 * never as a success: the provider SDKs end an aborted stream quietly, as if it were complete.
 * The Runs service is driven directly with a prepared run, against the local provider.
 */
const harness = runsHarness('cancel')
const runsDeps = harness.deps
const runs = new Runs(runsDeps())
let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(async () => {
  await fake.close()
  await harness.close()
})

function prepared(provider: Provider, marker: string, model: string, stream: boolean): PreparedRun {
  return preparedRun({ provider, baseUrl: fake.url, marker, model, stream })
}

describe.each(['openai', 'anthropic'] as const)('a run the client stops (%s)', (provider) => {
  it('streamed: logged as cancelled with what came so far, and the provider call is cut', async () => {
    const marker = `stop-stream-${provider}`
    const run = prepared(provider, marker, 'fake-drip-200', true)
    const client = new AbortController()
    const deltas: string[] = []
    const outcome = await runs
      .execute(run, client.signal, (content) => {
        deltas.push(content)
        client.abort()
      })
      .then(
        () => 'answered',
        (err: { code?: string }) => err.code,
      )
    expect(outcome).toBe('PROVIDER_ERROR')
    await expect.poll(() => fake.find(marker)[0]?.cancelled, { timeout: 5_000 }).toBe(true)

    const logged = await runs.get(ORG, run.id)
    expect(logged.status).toBe('cancelled')
    expect(logged.error?.code).toBe('CLIENT_CLOSED')
    expect(logged.finishReason).toBeNull()
    expect(logged.output).toEqual({ role: 'assistant', content: deltas.join('') })
    expect(deltas.join('')).toMatch(new RegExp(`^${marker}`))
    // Anthropic reports the input tokens when the stream starts; OpenAI only at its end.
    if (provider === 'anthropic') expect(logged.usage?.inputTokens).toBe(9)
    else expect(logged.usage).toBeNull()
  })

  it('not streamed: logged as cancelled, with no output', async () => {
    const marker = `stop-plain-${provider}`
    const run = prepared(provider, marker, 'fake-slow-5000', false)
    const client = new AbortController()
    const pending = runs.execute(run, client.signal).then(
      () => 'answered',
      (err: { code?: string }) => err.code,
    )
    await expect.poll(() => fake.find(marker).length).toBe(1)
    client.abort()
    expect(await pending).toBe('PROVIDER_ERROR')
    const logged = await runs.get(ORG, run.id)
    expect(logged).toMatchObject({ status: 'cancelled', output: null, usage: null })
    expect(logged.error?.code).toBe('CLIENT_CLOSED')
  })
})

describe('a streamed run past its deadline', () => {
  it('is a timeout (504), logged as failed, not an answer', async () => {
    const short = new Runs({ ...runsDeps(), timeoutMs: 300 })
    const run = prepared('openai', 'deadline-stream', 'fake-stall', true)
    const outcome = await short
      .execute(run, new AbortController().signal, () => {})
      .then(
        () => 'answered',
        (err: { code?: string }) => err.code,
      )
    expect(outcome).toBe('PROVIDER_TIMEOUT')
    expect(await short.get(ORG, run.id)).toMatchObject({
      status: 'failed',
      error: { code: 'PROVIDER_TIMEOUT' },
    })
  })
})
