import { type FakeProvider, startFakeProvider } from '@pm/fakeprovider'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { runSlice, type SliceResult } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

interface Data<T> {
  data: T
}

const KEY = 'sk-distributed-SECRET-5150'

/** The same run in the distributed mode: runs as its own process, real NATS and Redis. */
describe('runs in the distributed mode', () => {
  let stack: Stack
  let slice: SliceResult
  let fake: FakeProvider

  beforeAll(async () => {
    fake = await startFakeProvider()
    stack = await startStack({ PROVIDER_ALLOWED_HOSTS: '127.0.0.1' }, { with: ['runs'] })
    slice = await runSlice(stack.gateway)
  }, 240_000)

  afterAll(async () => {
    await stack?.stop()
    await fake?.close()
  })

  it('runs a published prompt through the gateway and the runs process, streamed or not', async () => {
    const created = await call<Data<{ _id: string; keyHint: string }>>(
      stack.gateway,
      'POST',
      `/api/v1/organizations/${slice.organizationId}/connections`,
      {
        token: slice.accessToken,
        body: {
          name: 'fake',
          provider: 'openai-compatible',
          baseUrl: `${fake.url}/v1`,
          apiKey: KEY,
          models: ['gpt-fake'],
        },
      },
    )
    expect(created.status).toBe(201)
    expect(created.body.data.keyHint).toBe('5150')
    const body = { connectionId: created.body.data._id, variables: { name: 'Ada', place: 'Paris' } }

    const ran = await call<
      Data<{ output: { content: string }; usage: unknown; prompt: { version: number } }>
    >(stack.gateway, 'POST', `/api/v1/prompts/${slice.promptId}/run`, { token: slice.accessToken, body })
    expect(ran.status).toBe(200)
    expect(ran.body.data.output.content).toBe('Hello Ada, welcome to Paris!')
    expect(ran.body.data.prompt.version).toBe(1)

    const streamed = await fetch(`${stack.gateway}/api/v1/prompts/slug/greeting-prompt/run`, {
      method: 'POST',
      headers: { authorization: `Bearer ${slice.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ ...body, stream: true }),
    })
    expect(streamed.headers.get('content-type')).toContain('text/event-stream')
    const text = await streamed.text()
    const done = text.split('\n\n').find((b) => b.startsWith('event: done'))
    const result = JSON.parse(done?.split('\ndata: ')[1] ?? '{}') as { output: unknown; usage: unknown }
    expect(result.output).toEqual(ran.body.data.output)
    expect(result.usage).toEqual(ran.body.data.usage)

    const log = await call<Data<{ runs: unknown[] }>>(
      stack.gateway,
      'GET',
      `/api/v1/prompts/${slice.promptId}/runs`,
      {
        token: slice.accessToken,
      },
    )
    expect(log.body.data.runs).toHaveLength(2)
    const logs = Object.values(stack.processes).flatMap((p) => p.logs)
    expect(logs.some((l) => l.includes('"runs"'))).toBe(true)
    expect(logs.join('\n')).not.toContain(KEY)
  })
})
