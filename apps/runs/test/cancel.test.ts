import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { request as httpRequest } from 'node:http'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import { type CallerContext, CONTEXT_HEADER, type Provider, type RunList } from '@pm/contracts'
import { type FakeProvider, startFakeProvider } from '@pm/fakeprovider'
import { type InternalTarget, newId, signContext } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, loadRunsConfig } from '../src/app.ts'
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

describe('a client gone before the model call', () => {
  it('gets no provider call, and the run is logged as cancelled', async () => {
    const marker = 'gone-before-call'
    const run = prepared('openai', marker, 'm', false)
    const client = new AbortController()
    client.abort()
    const failed = await runs.execute(run, client.signal).then(
      () => undefined,
      (err: unknown) => err,
    )
    expect(failed).toMatchObject({ code: 'PROVIDER_ERROR' })
    expect(fake.find(marker)).toEqual([])
    expect(await runs.get(ORG, run.id)).toMatchObject({
      status: 'cancelled',
      output: null,
      error: { code: 'CLIENT_CLOSED' },
    })
  })

  it('is noticed while the prompt renders: the route calls no provider', async () => {
    const marker = 'gone-while-rendering'
    const dir = mkdtempSync(join(tmpdir(), 'pm-runs-gone-'))
    const secret = randomBytes(32).toString('hex')
    const org = newId()
    const promptId = newId()
    let rendering = false
    let release = () => {}
    const rendered = new Promise<void>((resolve) => {
      release = resolve
    })
    // Render answers once the test lets it, after the client has gone.
    const render: InternalTarget = {
      async request() {
        rendering = true
        await rendered
        const answer = {
          promptId,
          versionId: newId(),
          version: 1,
          renderedContent: `${marker} one two`,
          config: {},
          references: [],
        }
        return { statusCode: 200, body: { text: async () => JSON.stringify(answer), destroy: () => {} } }
      },
    }
    const bus = new MemoryBus(10)
    const app = await buildApp({
      config: loadRunsConfig({
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        INTERNAL_AUTH_SECRET: secret,
        DATA_DIR: dir,
        PROVIDER_ALLOWED_HOSTS: '127.0.0.1',
      }),
      bus,
      inProcess: { render, prompts: render },
    })
    try {
      const caller: CallerContext = {
        kind: 'user',
        userId: newId(),
        organizationId: org,
        role: 'OWNER',
        scopes: ['organization:read', 'organization:write', 'runs:write', 'prompts:read'],
        requestId: 'req-gone',
      }
      const headers = { [CONTEXT_HEADER]: signContext(caller, secret) }
      const created = await app.inject({
        method: 'POST',
        url: `/api/v1/organizations/${org}/connections`,
        headers,
        payload: { name: 'local', provider: 'openai-compatible', baseUrl: `${fake.url}/v1`, apiKey: 'sk-x' },
      })
      expect(created.statusCode).toBe(201)
      await app.listen({ port: 0, host: '127.0.0.1' })
      const { port } = app.server.address() as AddressInfo
      const req = httpRequest({
        host: '127.0.0.1',
        port,
        method: 'POST',
        path: `/api/v1/prompts/${promptId}/run`,
        headers: { ...headers, 'content-type': 'application/json' },
      })
      req.on('error', () => {})
      req.end(JSON.stringify({ connectionId: created.json<{ _id: string }>()._id, model: 'm' }))
      await expect.poll(() => rendering, { timeout: 5_000 }).toBe(true)
      req.destroy()
      // The server has seen the connection close before the render answers.
      await expect
        .poll(() => new Promise<number>((resolve) => app.server.getConnections((_, n) => resolve(n))))
        .toBe(0)
      release()
      const runsOf = async () =>
        (await app.inject({ url: `/api/v1/prompts/${promptId}/runs`, headers })).json<RunList>().runs
      await expect.poll(async () => (await runsOf()).length, { timeout: 5_000 }).toBe(1)
      expect((await runsOf())[0]).toMatchObject({ status: 'cancelled', error: { code: 'CLIENT_CLOSED' } })
      expect(fake.find(marker)).toEqual([])
    } finally {
      await app.close()
      await bus.close()
      rmSync(dir, { recursive: true, force: true })
    }
  })
})
