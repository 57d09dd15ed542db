import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Provider } from '@pm/contracts'
import { type FakeProvider, startFakeProvider } from '@pm/fakeprovider'
import { SecretBox } from '@pm/kit'
import Fastify from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Connections } from '../src/services/connections.ts'
import { Egress } from '../src/services/egress.ts'
import { OrgLimiter } from '../src/services/limiter.ts'
import { RenderClient } from '../src/services/render.ts'
import { type PreparedRun, Runs } from '../src/services/runs.ts'
import { SqliteRunStore } from '../src/store/sqlite.ts'

/**
 * A run the client stops (the browser's Stop, a closed SSE stream) is logged as `cancelled`,
 * never as a success: the provider SDKs end an aborted stream quietly, as if it were complete.
 * The Runs service is driven directly with a prepared run, against the local provider.
 */
const ORG = 'a'.repeat(24)
const dir = mkdtempSync(join(tmpdir(), 'pm-runs-cancel-'))
const store = new SqliteRunStore(join(dir, 'runs.db'))
const egress = new Egress('127.0.0.1', 1_000)
const render = new RenderClient('http://127.0.0.1:9', 'http://127.0.0.1:9')
const log = Fastify({ logger: false }).log
function runsDeps() {
  const secrets = new SecretBox(randomBytes(32))
  return {
    store,
    connections: new Connections({ store, secrets, egress, maxPerOrganization: 5 }),
    render,
    egress,
    limiter: new OrgLimiter(5),
    timeoutMs: 10_000,
    log,
  }
}
const runs = new Runs(runsDeps())
let fake: FakeProvider
beforeAll(async () => {
  fake = await startFakeProvider()
})
afterAll(async () => {
  await fake.close()
  await egress.close()
  await render.close()
  await store.close()
  rmSync(dir, { recursive: true, force: true })
})

function prepared(provider: Provider, marker: string, model: string, stream: boolean): PreparedRun {
  return {
    id: randomBytes(12).toString('hex'),
    who: {
      caller: {
        kind: 'user',
        userId: 'u1',
        organizationId: ORG,
        role: 'OWNER',
        scopes: ['runs:write'],
        requestId: 'req-1',
      },
      organizationId: ORG,
      contextHeader: '',
      requestId: 'req-1',
    },
    body: { connectionId: 'c'.repeat(24), variables: {}, stream },
    rendered: {
      promptId: 'p'.repeat(24),
      versionId: null,
      version: null,
      draft: true,
      renderedContent: `${marker} one two three four five six seven eight`,
      references: [],
      config: {},
    },
    connection: {
      _id: 'c'.repeat(24),
      provider,
      baseUrl: provider === 'anthropic' ? fake.url : `${fake.url}/v1`,
      apiKey: 'sk-test-1234',
      headers: {},
      models: [],
      revision: `${provider}-1`,
    },
    model,
    params: {},
    messages: [{ role: 'user', content: `${marker} one two three four five six seven eight` }],
    release: () => {},
  }
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
