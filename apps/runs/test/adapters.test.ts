import { type FakeProvider, startFakeProvider } from '@pm/fakeprovider'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Egress } from '../src/services/egress.ts'
import { AnthropicAdapter } from '../src/services/providers/anthropic.ts'
import { OpenAIAdapter } from '../src/services/providers/openai.ts'
import type { ProviderAdapter } from '../src/services/providers/types.ts'

/** The adapter contract: each adapter against the local wire-protocol server, the same answers. */
let fake: FakeProvider
const egress = new Egress('127.0.0.1', 1_000)
const adapters: Record<string, () => Promise<ProviderAdapter>> = {}
beforeAll(async () => {
  fake = await startFakeProvider()
  const { fetch, fetchOptions } = await egress.dispatcherFor(null)
  const target = { apiKey: 'sk-x-1234', headers: {}, fetch, fetchOptions, timeoutMs: 5_000 }
  adapters.openai = async () => new OpenAIAdapter({ ...target, baseUrl: `${fake.url}/v1` })
  adapters.anthropic = async () => new AnthropicAdapter({ ...target, baseUrl: fake.url })
})
afterAll(async () => {
  await fake.close()
  await egress.close()
})

const call = (model: string, signal = new AbortController().signal) => ({
  model,
  signal,
  messages: [
    { role: 'system' as const, content: 'be brief' },
    { role: 'user' as const, content: 'one two three' },
  ],
  params: { tools: [{ type: 'function' as const, function: { name: 'lookup' } }] },
})

describe.each(['openai', 'anthropic'])('%s adapter', (name) => {
  it('completes, and streams the same answer', async () => {
    const adapter = await adapters[name]?.()
    const plain = await adapter?.complete(call('m'))
    expect(plain).toEqual({
      content: 'one two three',
      toolCalls: [],
      finishReason: 'stop',
      usage: { inputTokens: 5, outputTokens: 3 },
    })
    const deltas: string[] = []
    const streamed = await adapter?.stream(call('m'), (d) => void deltas.push(d))
    expect(streamed).toEqual(plain)
    expect(deltas.join('')).toBe('one two three')
  })

  it('returns tool calls, streamed or not', async () => {
    const adapter = await adapters[name]?.()
    const plain = await adapter?.complete(call('fake-tool'))
    expect(plain?.finishReason).toBe('tool_calls')
    expect(plain?.toolCalls[0]).toMatchObject({
      name: 'lookup',
      arguments: JSON.stringify({ input: 'one two three' }),
    })
    const streamed = await adapter?.stream(call('fake-tool'), () => {})
    expect(JSON.parse(streamed?.toolCalls[0]?.arguments ?? '')).toEqual({ input: 'one two three' })
  })
})

describe('egress', () => {
  const lookup = (address: string) => async () => [{ address, family: 4 }]

  it('allows listed hosts over http, and only https public addresses otherwise', async () => {
    expect(await egress.checkBaseUrl('http://127.0.0.1:11434/v1/')).toBe('http://127.0.0.1:11434/v1')
    await expect(egress.checkBaseUrl('http://api.example.com/v1')).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
    })
    const rebinding = new Egress('', 1_000, lookup('10.1.2.3'))
    await expect(rebinding.checkBaseUrl('https://api.example.com/v1')).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
    })
    const publicHost = new Egress('', 1_000, lookup('93.184.216.34'))
    expect(await publicHost.checkBaseUrl('https://api.example.com/v1')).toBe('https://api.example.com/v1')
    await expect(egress.checkBaseUrl('https://user:pw@api.example.com')).rejects.toMatchObject({
      code: 'VALIDATION_ERROR',
    })
    await rebinding.close()
    await publicHost.close()
  })
})
