import { createServer, type IncomingMessage, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { type FakeProvider, startFakeProvider } from '@pm/fakeprovider'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Egress } from '../src/services/egress.ts'
import { Runs } from '../src/services/runs.ts'
import { ORG, preparedRun, runsHarness } from './helpers.ts'

/**
 * A provider is not trusted to behave: one that redirects must not make the service send the
 * prompt and the connection's headers elsewhere (an internal address), and a stream that ends
 * without its closing event is a cut answer, not a complete one.
 */
const harness = runsHarness('untrusted')
const runs = new Runs(harness.deps())
/** Stands for what a redirect must not reach (an internal address): every request is recorded. */
let internal: FakeProvider
/** Answers every request with a 307 to the same path on `internal`. */
let redirecting: Server
let redirectingUrl = ''
const redirected: IncomingMessage[] = []
beforeAll(async () => {
  internal = await startFakeProvider()
  redirecting = createServer((req, res) => {
    redirected.push(req)
    req.resume()
    res.writeHead(307, { location: `${internal.url}${req.url ?? '/'}` })
    res.end()
  })
  await new Promise<void>((resolve) => redirecting.listen(0, '127.0.0.1', resolve))
  redirectingUrl = `http://127.0.0.1:${(redirecting.address() as AddressInfo).port}`
})
afterAll(async () => {
  await internal.close()
  redirecting.closeAllConnections()
  await new Promise<void>((resolve) => redirecting.close(() => resolve()))
  await harness.close()
})

const outcome = (pending: Promise<unknown>) =>
  pending.then(
    () => ({ code: 'answered', message: '' }),
    (err: { code?: string; message?: string }) => ({ code: err.code, message: err.message }),
  )

describe.each(['openai', 'anthropic'] as const)('a provider that redirects (%s)', (provider) => {
  it.each([false, true])(
    'is not followed (streamed: %s): the run fails, nothing reaches the target',
    async (stream) => {
      const marker = `redirect-${provider}-${stream}`
      const run = preparedRun({
        provider,
        baseUrl: redirectingUrl,
        marker,
        model: 'm',
        stream,
        headers: { 'api-key': 'azure-secret-value' },
      })
      const before = redirected.length
      const failed = await outcome(
        runs.execute(run, new AbortController().signal, stream ? () => {} : undefined),
      )
      expect(failed).toEqual({
        code: 'PROVIDER_ERROR',
        message: 'the model provider answered 307, a redirect, which is not followed',
      })
      expect(redirected.length).toBe(before + 1)
      expect(internal.find(marker)).toEqual([])
      expect(await runs.get(ORG, run.id)).toMatchObject({
        status: 'failed',
        error: { code: 'PROVIDER_ERROR', details: { providerStatus: 307 } },
      })
    },
  )
})

describe('egress', () => {
  it('asks every call, pinned or shared, not to follow redirects', async () => {
    const publicHost = new Egress('', 1_000, async () => [{ address: '93.184.216.34', family: 4 }])
    const pinned = await publicHost.dispatcherFor('https://api.example.com/v1')
    const shared = await publicHost.dispatcherFor(null)
    expect([pinned.pinned, pinned.fetchOptions.redirect]).toEqual([true, 'manual'])
    expect([shared.pinned, shared.fetchOptions.redirect]).toEqual([false, 'manual'])
    pinned.release()
    await publicHost.close()
  })
})

describe.each(['openai', 'anthropic'] as const)('a stream cut short by the provider (%s)', (provider) => {
  it('fails the run instead of answering the part that came', async () => {
    const marker = `cut-${provider}`
    const run = preparedRun({ provider, baseUrl: internal.url, marker, model: 'fake-cut', stream: true })
    const deltas: string[] = []
    const failed = await outcome(runs.execute(run, new AbortController().signal, (d) => deltas.push(d)))
    expect(failed).toEqual({
      code: 'PROVIDER_ERROR',
      message: 'the stream ended before the answer was complete',
    })
    expect(deltas).toEqual([`${marker} `])
    expect(internal.find(marker)[0]?.finished).toBe(true)
    expect(await runs.get(ORG, run.id)).toMatchObject({
      status: 'failed',
      output: null,
      error: { code: 'PROVIDER_ERROR', details: { providerStatus: null } },
    })
  })

  it('leaves the same model not streamed as it was: answered in full', async () => {
    const marker = `cut-plain-${provider}`
    const run = preparedRun({ provider, baseUrl: internal.url, marker, model: 'fake-cut', stream: false })
    const result = await runs.execute(run, new AbortController().signal)
    expect(result.output.content).toBe(`${marker} one two three four five six seven eight`)
    expect(result.finishReason).toBe('stop')
  })
})

describe.each(['openai', 'anthropic'] as const)('an answer past RUN_MAX_OUTPUT_BYTES (%s)', (provider) => {
  // The fake echoes the marker and eight words: longer than 40 bytes.
  const small = new Runs({ ...harness.deps(), maxOutputBytes: 40 })

  it('streamed: stops the call at the delta that goes past it, and fails the run', async () => {
    const marker = `too-long-${provider}`
    const run = preparedRun({ provider, baseUrl: internal.url, marker, model: 'fake-drip-30', stream: true })
    const deltas: string[] = []
    const failed = await outcome(small.execute(run, new AbortController().signal, (d) => deltas.push(d)))
    expect(failed).toEqual({
      code: 'PROVIDER_ERROR',
      message: 'the answer was longer than RUN_MAX_OUTPUT_BYTES allows',
    })
    expect(Buffer.byteLength(deltas.join(''))).toBeLessThanOrEqual(40)
    expect(deltas.length).toBeGreaterThan(0)
    await expect.poll(() => internal.find(marker)[0]?.cancelled, { timeout: 5_000 }).toBe(true)
    expect(await small.get(ORG, run.id)).toMatchObject({
      status: 'failed',
      output: null,
      error: { code: 'PROVIDER_ERROR', details: { providerStatus: null, maxOutputBytes: 40 } },
    })
  })

  it('not streamed: fails the run too, and answers one within it', async () => {
    const marker = `too-long-plain-${provider}`
    const run = preparedRun({ provider, baseUrl: internal.url, marker, model: 'm', stream: false })
    expect(await outcome(small.execute(run, new AbortController().signal))).toMatchObject({
      code: 'PROVIDER_ERROR',
    })
    const fits = preparedRun({ provider, baseUrl: internal.url, marker, model: 'm', stream: false })
    const result = await runs.execute(fits, new AbortController().signal)
    expect(result.output.content).toBe(`${marker} one two three four five six seven eight`)
  })
})
