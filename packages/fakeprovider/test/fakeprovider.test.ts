import Anthropic from '@anthropic-ai/sdk'
import OpenAI from 'openai'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type FakeProvider, RETRY_AFTER_SECONDS, slowWaitMs, startFakeProvider } from '../src/index.ts'

let fake: FakeProvider
let openai: OpenAI
let anthropic: Anthropic
beforeAll(async () => {
  fake = await startFakeProvider()
  openai = new OpenAI({ apiKey: 'sk-test-openai-0001', baseURL: `${fake.url}/v1`, maxRetries: 0 })
  anthropic = new Anthropic({ apiKey: 'sk-ant-test-0002', baseURL: fake.url, maxRetries: 0 })
})
afterAll(() => fake.close())

const messages = [
  { role: 'system' as const, content: 'be brief' },
  { role: 'user' as const, content: 'hello there world' },
]

describe('OpenAI chat completions, through the official SDK', () => {
  it('answers non-streamed with usage', async () => {
    const c = await openai.chat.completions.create({ model: 'gpt-x', messages })
    expect(c.choices[0]?.message.content).toBe('hello there world')
    expect(c.choices[0]?.finish_reason).toBe('stop')
    expect(c.usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 3, total_tokens: 8 })
    expect(fake.requests.at(-1)?.headers.authorization).toBe('Bearer sk-test-openai-0001')
  })

  it('streams chunks ending with [DONE], usage last', async () => {
    const stream = await openai.chat.completions.create({
      model: 'gpt-x',
      messages,
      stream: true,
      stream_options: { include_usage: true },
    })
    let text = ''
    let usage: unknown
    for await (const chunk of stream) {
      text += chunk.choices[0]?.delta.content ?? ''
      if (chunk.usage) usage = chunk.usage
    }
    expect(text).toBe('hello there world')
    expect(usage).toMatchObject({ prompt_tokens: 5, completion_tokens: 3 })
  })

  it('calls a tool', async () => {
    const c = await openai.chat.completions.create({
      model: 'fake-tool',
      messages,
      tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }],
    })
    const call = c.choices[0]?.message.tool_calls?.[0]
    expect(call?.type === 'function' && call.function.name).toBe('lookup')
    expect(c.choices[0]?.finish_reason).toBe('tool_calls')
  })

  it('answers 429 with Retry-After in the OpenAI error shape', async () => {
    const err = await openai.chat.completions.create({ model: 'fake-429', messages }).catch((e: unknown) => e)
    expect(err).toBeInstanceOf(OpenAI.APIError)
    const apiError = err as InstanceType<typeof OpenAI.APIError>
    expect(apiError.status).toBe(429)
    expect(apiError.headers?.get('retry-after')).toBe(String(RETRY_AFTER_SECONDS))
    expect(apiError.code).toBe('rate_limit_exceeded')
  })
})

describe('Anthropic messages, through the official SDK', () => {
  it('answers non-streamed with usage', async () => {
    const m = await anthropic.messages.create({
      model: 'claude-x',
      max_tokens: 100,
      system: 'be brief',
      messages: [messages[1] ?? { role: 'user', content: '' }],
    })
    expect(m.content[0]?.type === 'text' && m.content[0].text).toBe('hello there world')
    expect(m.usage).toMatchObject({ input_tokens: 5, output_tokens: 3 })
    const headers = fake.requests.at(-1)?.headers ?? {}
    expect(headers['x-api-key'] ?? headers.authorization).toMatch(/sk-ant-test-0002$/)
  })

  it('streams its event types', async () => {
    const stream = anthropic.messages.stream({
      model: 'claude-x',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'a b c d' }],
    })
    let text = ''
    stream.on('text', (t) => {
      text += t
    })
    const final = await stream.finalMessage()
    expect(text).toBe('a b c d')
    expect(final.stop_reason).toBe('end_turn')
    expect(final.usage.output_tokens).toBe(4)
  })

  it('uses a tool', async () => {
    const m = await anthropic.messages.create({
      model: 'fake-tool',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'x' }],
      tools: [{ name: 'lookup', input_schema: { type: 'object' } }],
    })
    expect(m.stop_reason).toBe('tool_use')
    expect(m.content[0]).toMatchObject({ type: 'tool_use', name: 'lookup', input: { input: 'x' } })
  })

  it('answers 401 in the Anthropic error shape', async () => {
    const err = await anthropic.messages
      .create({ model: 'fake-401', max_tokens: 10, messages: [{ role: 'user', content: 'x' }] })
      .catch((e: unknown) => e)
    expect(err).toBeInstanceOf(Anthropic.AuthenticationError)
  })
})

describe('cancellation', () => {
  it('records a client that left before the answer was complete', async () => {
    const controller = new AbortController()
    const stream = await openai.chat.completions.create(
      {
        model: 'fake-drip-200',
        messages: [{ role: 'user', content: 'cancel-me one two three four' }],
        stream: true,
      },
      { signal: controller.signal },
    )
    for await (const _ of stream) {
      controller.abort()
      break
    }
    await expect.poll(() => fake.find('cancel-me')[0]?.cancelled).toBe(true)
  })
})

describe('slow answers', () => {
  const timed = async (content: string) => {
    const from = performance.now()
    const c = await openai.chat.completions.create({
      model: 'fake-slow-40-160',
      messages: [{ role: 'user', content }],
    })
    expect(c.choices[0]?.message.content).toBe(content)
    return performance.now() - from
  }

  it('waits within the range for fake-slow-<min>-<max>, the same for the same text', async () => {
    // Lower bounds only: a loaded machine makes an answer later, never earlier (a timer may fire
    // a millisecond early).
    const texts = Array.from({ length: 6 }, (_, i) => `ranged wait ${i}`)
    const waits = texts.map((t) => slowWaitMs('fake-slow-40-160', t) ?? Number.NaN)
    for (const ms of waits) {
      expect(ms).toBeGreaterThanOrEqual(40)
      expect(ms).toBeLessThanOrEqual(160)
    }
    // Six texts do not all wait the same (a fixed wait would).
    expect(Math.max(...waits) - Math.min(...waits)).toBeGreaterThan(5)
    for (const [i, text] of texts.entries())
      expect(await timed(text)).toBeGreaterThanOrEqual((waits[i] ?? 0) - 2)
    // The same text waits the same again: the longest wait, once more.
    const longest = texts[waits.indexOf(Math.max(...waits))] ?? ''
    expect(slowWaitMs('fake-slow-40-160', longest)).toBe(Math.max(...waits))
    expect(await timed(longest)).toBeGreaterThanOrEqual(Math.max(...waits) - 2)
    // And the server waits each text's own wait: two texts 400 ms or more apart answer in that
    // order (wider than any load's jitter).
    const wide = Array.from({ length: 40 }, (_, i) => `wide ${i}`)
    const wideWait = (t: string) => slowWaitMs('fake-slow-10-700', t) ?? Number.NaN
    const short = wide.find((t) => wideWait(t) < 100) ?? ''
    const long = wide.find((t) => wideWait(t) > 500) ?? ''
    expect([wideWait(short) < 100, wideWait(long) > 500]).toEqual([true, true])
    const answered: string[] = []
    await Promise.all(
      [long, short].map(async (content) => {
        await openai.chat.completions.create({
          model: 'fake-slow-10-700',
          messages: [{ role: 'user', content }],
        })
        answered.push(content)
      }),
    )
    expect(answered).toEqual([short, long])
    expect(slowWaitMs('fake-slow-50', 'any')).toBe(50)
    expect(slowWaitMs('fake-echo', 'any')).toBeUndefined()
  })
})
