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

  it("bounds the base URL's lookup by the connect timeout: one that never answers is a 504", async () => {
    const silentDns = new Egress('', 200, () => new Promise(() => {}))
    const slow = new Runs({ ...harness.deps(), egress: silentDns })
    const run = preparedRun({
      provider: 'openai',
      baseUrl: 'https://api.example.com',
      marker: 'dns',
      model: 'm',
      stream: false,
    })
    const failed = await slow.execute(run, new AbortController().signal).then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(failed).toMatchObject({
      code: 'PROVIDER_TIMEOUT',
      details: {
        timeoutMs: 200,
        message: 'resolving api.example.com took longer than RUN_CONNECT_TIMEOUT_MS',
      },
    })
    expect(await slow.get(ORG, run.id)).toMatchObject({
      status: 'failed',
      error: { code: 'PROVIDER_TIMEOUT' },
    })
    await silentDns.close()
  })
})

describe.each(['openai', 'anthropic'] as const)('a stream cut short by the provider (%s)', (provider) => {
  it('fails the run instead of answering the part that came', async () => {
    const marker = `cut-${provider}`
    const run = preparedRun({ provider, baseUrl: internal.url, marker, model: 'fake-cut', stream: true })
    const deltas: string[] = []
    const failed = await outcome(runs.execute(run, new AbortController().signal, (d) => void deltas.push(d)))
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
    const failed = await outcome(small.execute(run, new AbortController().signal, (d) => void deltas.push(d)))
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

/**
 * Answers as each protocol does, with one field wrong, chosen by the model: `bad-content` (an
 * object for the text), `bad-finish` (a number for the finish reason), `bad-usage` (token counts
 * negative and fractional, the text "hello").
 */
function garbageProvider(): Server {
  return createServer((req, res) => {
    let raw = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => {
      raw += chunk
    })
    req.on('end', () => {
      const body = JSON.parse(raw) as { model: string; stream?: boolean }
      const anthropic = (req.url ?? '').endsWith('/messages')
      const content: unknown = body.model === 'bad-content' ? { text: 'hello' } : 'hello'
      const reason: unknown = body.model === 'bad-finish' ? 42 : anthropic ? 'end_turn' : 'stop'
      const [input, output] = body.model === 'bad-usage' ? [-1, 2.5] : [1, 1]
      if (!body.stream) {
        res.writeHead(200, { 'content-type': 'application/json' })
        res.end(
          JSON.stringify(
            anthropic
              ? {
                  id: 'msg_1',
                  type: 'message',
                  role: 'assistant',
                  model: body.model,
                  content: [{ type: 'text', text: content }],
                  stop_reason: reason,
                  usage: { input_tokens: input, output_tokens: output },
                }
              : {
                  id: 'c1',
                  object: 'chat.completion',
                  model: body.model,
                  choices: [{ index: 0, message: { role: 'assistant', content }, finish_reason: reason }],
                  usage: { prompt_tokens: input, completion_tokens: output },
                },
          ),
        )
        return
      }
      res.writeHead(200, { 'content-type': 'text/event-stream' })
      const send = (type: string | null, data: unknown) =>
        res.write(`${type ? `event: ${type}\n` : ''}data: ${JSON.stringify(data)}\n\n`)
      if (anthropic) {
        send('message_start', {
          type: 'message_start',
          message: {
            id: 'msg_1',
            type: 'message',
            role: 'assistant',
            content: [],
            usage: { input_tokens: input, output_tokens: 0 },
          },
        })
        send('content_block_start', {
          type: 'content_block_start',
          index: 0,
          content_block: { type: 'text', text: '' },
        })
        send('content_block_delta', {
          type: 'content_block_delta',
          index: 0,
          delta: { type: 'text_delta', text: content },
        })
        send('content_block_stop', { type: 'content_block_stop', index: 0 })
        send('message_delta', {
          type: 'message_delta',
          delta: { stop_reason: reason },
          usage: { output_tokens: output },
        })
        send('message_stop', { type: 'message_stop' })
      } else {
        const chunk = (delta: unknown, finish: unknown, usage?: unknown) => ({
          id: 'c1',
          object: 'chat.completion.chunk',
          model: body.model,
          choices: [{ index: 0, delta, finish_reason: finish }],
          ...(usage ? { usage } : {}),
        })
        send(null, chunk({ role: 'assistant', content }, null))
        send(null, chunk({}, reason))
        send(null, {
          ...chunk({}, null),
          choices: [],
          usage: { prompt_tokens: input, completion_tokens: output },
        })
        res.write('data: [DONE]\n\n')
      }
      res.end()
    })
  })
}

describe.each(['openai', 'anthropic'] as const)('a provider answering garbage (%s)', (provider) => {
  let garbage: Server
  let garbageUrl = ''
  beforeAll(async () => {
    garbage = garbageProvider()
    await new Promise<void>((resolve) => garbage.listen(0, '127.0.0.1', resolve))
    garbageUrl = `http://127.0.0.1:${(garbage.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    garbage.closeAllConnections()
    await new Promise<void>((resolve) => garbage.close(() => resolve()))
  })

  const runOn = (model: string, stream: boolean) => {
    const run = preparedRun({ provider, baseUrl: garbageUrl, marker: model, model, stream })
    return {
      run,
      pending: runs.execute(run, new AbortController().signal, stream ? () => undefined : undefined),
    }
  }

  it.each([false, true])('fails the run on a text that is not a string (streamed: %s)', async (stream) => {
    const { run, pending } = runOn('bad-content', stream)
    expect(await outcome(pending)).toEqual({
      code: 'PROVIDER_ERROR',
      message: "the provider's answer is not valid: content is not a string",
    })
    expect(await runs.get(ORG, run.id)).toMatchObject({ status: 'failed', output: null })
  })

  it.each([false, true])(
    'fails the run on a finish reason that is not a string (streamed: %s)',
    async (stream) => {
      const { pending } = runOn('bad-finish', stream)
      const field = provider === 'anthropic' ? 'stop_reason' : 'finish_reason'
      expect(await outcome(pending)).toEqual({
        code: 'PROVIDER_ERROR',
        message: `the provider's answer is not valid: ${field} is not a string`,
      })
    },
  )

  it.each([false, true])('counts token numbers that make no sense as 0 (streamed: %s)', async (stream) => {
    const { pending } = runOn('bad-usage', stream)
    const result = await pending
    expect(result.output.content).toBe('hello')
    expect(result.usage).toEqual({ inputTokens: 0, outputTokens: 0 })
  })
})
