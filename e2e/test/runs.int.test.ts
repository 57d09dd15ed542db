import { readFileSync, existsSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { countTokens, type FakeProvider, RETRY_AFTER_SECONDS, startFakeProvider } from '@pm/fakeprovider'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'

/**
 * Runs through the gateway of one embedded default (its own process, so that its log lines can
 * be read) and one local provider speaking the OpenAI and Anthropic wire protocols.
 */

interface Data<T> {
  data: T
}
interface ErrorReply {
  error: { code: string; message: string; details?: Record<string, unknown> }
}
interface RunResult {
  runId: string
  output: { role: string; content: string; toolCalls?: { id: string; name: string; arguments: string }[] }
  finishReason: string
  usage: { inputTokens: number; outputTokens: number }
  latencyMs: number
  timeToFirstTokenMs: number
  model: string
  connectionId: string
  prompt: { promptId: string; versionId: string | null; version: number | null; draft: boolean }
  references: unknown[]
  renderedMessages: { role: string; content: string }[]
}
interface Tenant {
  accessToken: string
  organizationId: string
  email: string
}

const OPENAI_KEY = 'sk-test-openai-SECRET-9f3k2'
const ANTHROPIC_KEY = 'sk-ant-test-SECRET-x81q'
const ROTATED_KEY = 'sk-test-rotated-SECRET-77aa'
const MAX_CONCURRENT = 2
const RUN_TIMEOUT_MS = 1500

let fake: FakeProvider
let proc: RunningProcess
let base: string
let dataDir: string
let owner: Tenant
let openaiConnection: string
let anthropicConnection: string
let runKey: string
let n = 0

async function signUp(label: string): Promise<Tenant> {
  n++
  const email = `${label}-${n}-${Date.now()}@example.com`
  const res = await call<Data<{ accessToken: string; organizationId: string }>>(
    base,
    'POST',
    '/api/v1/auth/register',
    {
      body: { email, password: 'correct horse battery staple', name: label },
    },
  )
  expect(res.status).toBe(201)
  return { ...res.body.data, email }
}

async function apiKey(tenant: Tenant, scopes: string[]): Promise<string> {
  const res = await call<Data<{ key: string }>>(
    base,
    'POST',
    `/api/v1/organizations/${tenant.organizationId}/api-keys`,
    {
      token: tenant.accessToken,
      body: { name: `k${n++}`, scopes },
    },
  )
  expect(res.status).toBe(201)
  return res.body.data.key
}

async function connect(tenant: Tenant, body: Record<string, unknown>) {
  return call<Data<Record<string, unknown>> & ErrorReply>(
    base,
    'POST',
    `/api/v1/organizations/${tenant.organizationId}/connections`,
    { token: tenant.accessToken, body },
  )
}

/** A published prompt (version 1), its id and slug. */
async function publishedPrompt(
  tenant: Tenant,
  body: Record<string, unknown>,
): Promise<{ id: string; slug: string }> {
  const created = await call<Data<{ _id: string; slug: string }>>(base, 'POST', '/api/v1/prompts', {
    token: tenant.accessToken,
    body: { name: `Run ${n++} ${Math.random().toString(36).slice(2, 8)}`, ...body },
  })
  expect(created.status).toBe(201)
  const published = await call(base, 'POST', `/api/v1/prompts/${created.body.data._id}/publish`, {
    token: tenant.accessToken,
    body: {},
  })
  expect(published.status).toBe(201)
  return { id: created.body.data._id, slug: created.body.data.slug }
}

function run(path: string, body: Record<string, unknown>, token = runKey) {
  return call<Data<RunResult> & ErrorReply>(base, 'POST', path, { token, body })
}

interface SseEvent {
  event: string
  data: Record<string, unknown>
}

/** Reads a whole SSE answer into its events (comment lines dropped). */
async function readSse(res: Response): Promise<SseEvent[]> {
  const text = await res.text()
  return text
    .split('\n\n')
    .filter((block) => block.trim() && !block.startsWith(':'))
    .map((block) => {
      const lines = block.split('\n')
      const event = lines.find((l) => l.startsWith('event: '))?.slice(7) ?? 'message'
      const data = lines.find((l) => l.startsWith('data: '))?.slice(6) ?? '{}'
      return { event, data: JSON.parse(data) as Record<string, unknown> }
    })
}

function stream(path: string, body: Record<string, unknown>, signal?: AbortSignal): Promise<Response> {
  return fetch(`${base}${path}`, {
    method: 'POST',
    headers: {
      authorization: `Bearer ${runKey}`,
      'content-type': 'application/json',
      accept: 'text/event-stream',
    },
    body: JSON.stringify(body),
    ...(signal ? { signal } : {}),
  })
}

beforeAll(async () => {
  fake = await startFakeProvider()
  dataDir = mkdtempSync(join(tmpdir(), 'pm-runs-'))
  const port = await freePort()
  proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
    PORT: String(port),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'debug',
    AUTH_ALLOW_SIGNUP: 'true',
    PROVIDER_ALLOWED_HOSTS: '127.0.0.1',
    RUN_MAX_CONCURRENT: String(MAX_CONCURRENT),
    RUN_TIMEOUT_MS: String(RUN_TIMEOUT_MS),
  })
  base = `http://127.0.0.1:${port}`
  await waitForHttp(`${base}/health/ready`, 120_000, proc)
  owner = await signUp('runs-owner')
  const oa = await connect(owner, {
    name: 'fake openai',
    provider: 'openai-compatible',
    baseUrl: `${fake.url}/v1`,
    apiKey: OPENAI_KEY,
    models: ['gpt-fake'],
  })
  expect(oa.status).toBe(201)
  openaiConnection = String(oa.body.data._id)
  const an = await connect(owner, {
    name: 'fake anthropic',
    provider: 'anthropic',
    baseUrl: fake.url,
    apiKey: ANTHROPIC_KEY,
  })
  expect(an.status).toBe(201)
  anthropicConnection = String(an.body.data._id)
  runKey = await apiKey(owner, ['prompts:read', 'runs:write'])
}, 180_000)

afterAll(async () => {
  await proc?.stop()
  await fake?.close()
  if (dataDir) rmSync(dataDir, { recursive: true, force: true })
})

describe('provider connections', () => {
  it('are created, listed, changed and deleted by an owner; the key is never answered', async () => {
    const created = await connect(owner, {
      name: 'crud',
      provider: 'openai',
      apiKey: 'sk-crud-key-SECRET-abcd',
      models: ['gpt-4o-mini'],
      headers: { 'OpenAI-Organization': 'org-SECRET-header' },
    })
    expect(created.status).toBe(201)
    const c = created.body.data
    expect(c).toMatchObject({
      name: 'crud',
      provider: 'openai',
      baseUrl: null,
      keyHint: 'abcd',
      headerNames: ['OpenAI-Organization'],
    })
    expect(JSON.stringify(created.body)).not.toContain('SECRET')
    const path = `/api/v1/organizations/${owner.organizationId}/connections`

    const listed = await call<Data<{ connections: { _id: string }[] }>>(base, 'GET', path, {
      token: owner.accessToken,
    })
    expect(listed.status).toBe(200)
    expect(listed.body.data.connections.map((x) => x._id)).toContain(c._id)
    expect(JSON.stringify(listed.body)).not.toContain('SECRET')

    const changed = await call<Data<Record<string, unknown>>>(base, 'PATCH', `${path}/${c._id}`, {
      token: owner.accessToken,
      body: { name: 'crud 2', apiKey: ROTATED_KEY },
    })
    expect(changed.status).toBe(200)
    expect(changed.body.data).toMatchObject({ name: 'crud 2', keyHint: '77aa' })
    expect(JSON.stringify(changed.body)).not.toContain('SECRET')

    const deleted = await call(base, 'DELETE', `${path}/${c._id}`, { token: owner.accessToken })
    expect(deleted.status).toBe(200)
    const again = await call<ErrorReply>(base, 'DELETE', `${path}/${c._id}`, { token: owner.accessToken })
    expect(again.status).toBe(404)
  })

  it('are managed by an ADMIN or OWNER only, and never across organizations', async () => {
    const member = await signUp('runs-member')
    const added = await call(base, 'POST', `/api/v1/organizations/${owner.organizationId}/members`, {
      token: owner.accessToken,
      body: { email: member.email, role: 'MEMBER' },
    })
    expect(added.status).toBe(201)
    const path = `/api/v1/organizations/${owner.organizationId}/connections?organizationId=${owner.organizationId}`
    const asMember = await call<ErrorReply>(base, 'GET', path, { token: member.accessToken })
    // A MEMBER's role lacks organization:write: the gateway refuses it before the service would.
    expect(asMember.status).toBe(403)
    expect(asMember.body.error.code).toBe('INSUFFICIENT_SCOPE')

    const other = await signUp('runs-other')
    const foreign = await call<ErrorReply>(
      base,
      'GET',
      `/api/v1/organizations/${owner.organizationId}/connections`,
      {
        token: other.accessToken,
      },
    )
    expect(foreign.status).toBe(404)

    // An API key needs organization:write.
    const readKey = await apiKey(owner, ['prompts:read'])
    const byKey = await call<ErrorReply>(
      base,
      'GET',
      `/api/v1/organizations/${owner.organizationId}/connections`,
      {
        token: readKey,
      },
    )
    expect(byKey.status).toBe(403)
    expect(byKey.body.error.code).toBe('INSUFFICIENT_SCOPE')
  })

  it('refuse a base URL that the SSRF guard refuses, unless its host is allowed', async () => {
    for (const baseUrl of [
      'https://10.0.0.8/v1',
      'https://169.254.169.254/latest',
      'http://example.com/v1',
      'https://[::1]/v1',
    ]) {
      const res = await connect(owner, {
        name: 'ssrf',
        provider: 'openai-compatible',
        baseUrl,
        apiKey: 'sk-x-1234',
      })
      expect(res.status, baseUrl).toBe(400)
      expect(res.body.error.code).toBe('VALIDATION_ERROR')
    }
    // 127.0.0.1 is in PROVIDER_ALLOWED_HOSTS (plain http allowed): the fake provider's connections above.
    const compatibleWithoutUrl = await connect(owner, {
      name: 'x',
      provider: 'openai-compatible',
      apiKey: 'sk-x-1234',
    })
    expect(compatibleWithoutUrl.status).toBe(400)
  })

  it('keep the key sealed in the store: runs.db (WAL included) never holds it', () => {
    const files = ['runs.db', 'runs.db-wal'].map((f) => join(dataDir, f)).filter((f) => existsSync(f))
    expect(files.length).toBeGreaterThan(0)
    const bytes = Buffer.concat(files.map((f) => readFileSync(f)))
    expect(bytes.length).toBeGreaterThan(0)
    for (const key of [OPENAI_KEY, ANTHROPIC_KEY, ROTATED_KEY, 'org-SECRET-header']) {
      expect(bytes.includes(Buffer.from(key)), key).toBe(false)
    }
    expect(bytes.includes(Buffer.from('enc:v1:'))).toBe(true)
  })
})

describe('running a prompt', () => {
  let text: { id: string; slug: string }
  let chat: { id: string; slug: string }

  beforeAll(async () => {
    text = await publishedPrompt(owner, {
      template: 'Describe {{thing}} briefly',
      config: {
        model: 'gpt-from-config',
        temperature: 0.3,
        max_tokens: 64,
        stop: ['END'],
        note: 'not a parameter',
      },
    })
    chat = await publishedPrompt(owner, {
      type: 'chat',
      messages: [
        { role: 'system', content: 'You are {{persona}}' },
        { role: 'user', content: 'Tell me about {{topic}} v1' },
      ],
      config: { model: 'claude-from-config', max_tokens: 100 },
    })
    // Version 2 of the chat prompt; production stays on version 1; the draft changes again.
    const patched = await call(base, 'PATCH', `/api/v1/prompts/${chat.id}`, {
      token: owner.accessToken,
      body: {
        messages: [
          { role: 'system', content: 'You are {{persona}}' },
          { role: 'user', content: 'Tell me about {{topic}} v2' },
        ],
      },
    })
    expect(patched.status).toBe(200)
    const v2 = await call<Data<{ _id: string }>>(base, 'POST', `/api/v1/prompts/${chat.id}/publish`, {
      token: owner.accessToken,
      body: {},
    })
    expect(v2.status).toBe(201)
    const versions = await call<Data<{ versions: { _id: string; version: number }[] }>>(
      base,
      'GET',
      `/api/v1/prompts/${chat.id}/versions`,
      { token: owner.accessToken },
    )
    const v1 = versions.body.data.versions.find((v) => v.version === 1)
    const promoted = await call(base, 'POST', `/api/v1/prompts/${chat.id}/environments/production/promote`, {
      token: owner.accessToken,
      body: { versionId: v1?._id },
    })
    expect(promoted.status).toBe(200)
    const draft = await call(base, 'PATCH', `/api/v1/prompts/${chat.id}`, {
      token: owner.accessToken,
      body: {
        messages: [
          { role: 'system', content: 'You are {{persona}}' },
          { role: 'user', content: 'Tell me about {{topic}} draft' },
        ],
      },
    })
    expect(draft.status).toBe(200)
  }, 30_000)

  it('runs a text prompt by id: one user message, model and params from config', async () => {
    const res = await run(`/api/v1/prompts/${text.id}/run`, {
      connectionId: openaiConnection,
      variables: { thing: 'tea-1' },
    })
    expect(res.status).toBe(200)
    const r = res.body.data
    expect(r.output).toEqual({ role: 'assistant', content: 'Describe tea-1 briefly' })
    expect(r.usage).toEqual({ inputTokens: 3, outputTokens: 3 })
    expect(r).toMatchObject({
      model: 'gpt-from-config',
      finishReason: 'stop',
      connectionId: openaiConnection,
    })
    expect(r.prompt).toMatchObject({ promptId: text.id, version: 1, draft: false })
    expect(r.renderedMessages).toEqual([{ role: 'user', content: 'Describe tea-1 briefly' }])
    expect(r.latencyMs).toBeGreaterThanOrEqual(0)
    const sent = fake.find('tea-1')[0]
    expect(sent?.body).toMatchObject({
      model: 'gpt-from-config',
      temperature: 0.3,
      max_tokens: 64,
      stop: ['END'],
      messages: [{ role: 'user', content: 'Describe tea-1 briefly' }],
    })
    expect(sent?.body).not.toHaveProperty('note')
    expect(sent?.headers.authorization).toBe(`Bearer ${OPENAI_KEY}`)
  })

  it('overrides the model and params from the body', async () => {
    const res = await run(`/api/v1/prompts/${text.id}/run`, {
      connectionId: openaiConnection,
      variables: { thing: 'tea-2' },
      model: 'gpt-override',
      params: { temperature: 1.2, top_p: 0.5 },
    })
    expect(res.status).toBe(200)
    expect(res.body.data.model).toBe('gpt-override')
    expect(fake.find('tea-2')[0]?.body).toMatchObject({
      model: 'gpt-override',
      temperature: 1.2,
      top_p: 0.5,
      max_tokens: 64,
    })
  })

  it('refuses bad params with a 400, before any call', async () => {
    const res = await run(`/api/v1/prompts/${text.id}/run`, {
      connectionId: openaiConnection,
      variables: { thing: 'tea-bad' },
      params: { temperature: 9 },
    })
    expect(res.status).toBe(400)
    expect(res.body.error.code).toBe('VALIDATION_ERROR')
    expect(fake.find('tea-bad')).toHaveLength(0)
  })

  it('runs a chat prompt by slug on Anthropic: the current version, a version, an env and the draft', async () => {
    const vars = { persona: 'a pirate', topic: 'ships' }
    const path = `/api/v1/prompts/slug/${chat.slug}/run`
    const current = await run(path, { connectionId: anthropicConnection, variables: vars })
    expect(current.status).toBe(200)
    expect(current.body.data.output.content).toBe('Tell me about ships v2')
    expect(current.body.data.prompt).toMatchObject({ promptId: chat.id, version: 2, draft: false })
    expect(current.body.data.model).toBe('claude-from-config')
    expect(current.body.data.usage).toEqual({
      inputTokens: countTokens('You are a pirate Tell me about ships v2'),
      outputTokens: countTokens('Tell me about ships v2'),
    })
    const sent = fake.requests.filter((r) => r.protocol === 'anthropic').at(-1)
    expect(sent?.body).toMatchObject({
      system: 'You are a pirate',
      max_tokens: 100,
      messages: [{ role: 'user', content: 'Tell me about ships v2' }],
    })

    const v1 = await run(path, { connectionId: anthropicConnection, variables: vars, version: 1 })
    expect(v1.body.data.output.content).toBe('Tell me about ships v1')
    const production = await run(path, {
      connectionId: anthropicConnection,
      variables: vars,
      env: 'production',
    })
    expect(production.body.data.output.content).toBe('Tell me about ships v1')
    expect(production.body.data.prompt.version).toBe(1)

    // The draft needs prompts:write, as inject does.
    const refused = await run(path, { connectionId: anthropicConnection, variables: vars, draft: true })
    expect(refused.status).toBe(403)
    expect(refused.body.error.code).toBe('INSUFFICIENT_SCOPE')
    const draft = await run(
      path,
      { connectionId: anthropicConnection, variables: vars, draft: true },
      owner.accessToken,
    )
    expect(draft.status).toBe(200)
    expect(draft.body.data.output.content).toBe('Tell me about ships draft')
    expect(draft.body.data.prompt).toEqual({ promptId: chat.id, versionId: null, version: null, draft: true })

    const byId = await run(`/api/v1/prompts/${chat.id}/run`, {
      connectionId: openaiConnection,
      variables: vars,
      version: 1,
      model: 'gpt-fake',
    })
    expect(byId.body.data.renderedMessages).toEqual([
      { role: 'system', content: 'You are a pirate' },
      { role: 'user', content: 'Tell me about ships v1' },
    ])
  })

  it('enforces required variables exactly as invoke does', async () => {
    const required = await publishedPrompt(owner, {
      template: 'Need {{must}}',
      variables: [{ name: 'must', required: true }],
    })
    const invoked = await call<ErrorReply>(base, 'POST', `/api/v1/prompts/${required.id}/invoke`, {
      token: runKey,
      body: { variables: {} },
    })
    const ran = await run(`/api/v1/prompts/${required.id}/run`, {
      connectionId: openaiConnection,
      variables: {},
    })
    expect(invoked.status).toBe(400)
    expect(ran.status).toBe(invoked.status)
    expect(ran.body.error.code).toBe(invoked.body.error.code)
    expect(ran.body.error.details).toEqual(invoked.body.error.details)
  })

  it('passes tool calls back', async () => {
    const res = await run(`/api/v1/prompts/${text.id}/run`, {
      connectionId: openaiConnection,
      variables: { thing: 'tool-1' },
      model: 'fake-tool',
      params: { tools: [{ type: 'function', function: { name: 'lookup', parameters: { type: 'object' } } }] },
    })
    expect(res.status).toBe(200)
    expect(res.body.data.finishReason).toBe('tool_calls')
    expect(res.body.data.output.toolCalls?.[0]).toMatchObject({
      name: 'lookup',
      arguments: JSON.stringify({ input: 'Describe tool-1 briefly' }),
    })
  })

  it('streams deltas then done, with the same totals as the call without streaming', async () => {
    for (const connectionId of [openaiConnection, anthropicConnection]) {
      const body = { connectionId, variables: { thing: 'a long answer of several words' }, model: 'm-1' }
      const plain = await run(`/api/v1/prompts/${text.id}/run`, body)
      const res = await stream(`/api/v1/prompts/${text.id}/run`, { ...body, stream: true })
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toContain('text/event-stream')
      const events = await readSse(res)
      const deltas = events.filter((e) => e.event === 'delta')
      expect(deltas.length).toBeGreaterThan(3)
      expect(events.at(-1)?.event).toBe('done')
      const done = events.at(-1)?.data as unknown as RunResult
      expect(deltas.map((d) => d.data.content).join('')).toBe(done.output.content)
      expect(done.output).toEqual(plain.body.data.output)
      expect(done.usage).toEqual(plain.body.data.usage)
      expect(done.finishReason).toBe(plain.body.data.finishReason)
      expect(done.timeToFirstTokenMs).toBeLessThanOrEqual(done.latencyMs)
    }
  })

  it('cancels the provider call when the client disconnects', async () => {
    const controller = new AbortController()
    const res = await stream(
      `/api/v1/prompts/${text.id}/run`,
      {
        connectionId: openaiConnection,
        variables: { thing: 'cancel-me one two three four five six' },
        model: 'fake-drip-300',
        stream: true,
      },
      controller.signal,
    )
    expect(res.status).toBe(200)
    const reader = res.body?.getReader()
    const first = await reader?.read()
    expect(new TextDecoder().decode(first?.value)).toContain('event: delta')
    controller.abort()
    await expect.poll(() => fake.find('cancel-me')[0]?.cancelled, { timeout: 5_000 }).toBe(true)
    expect(fake.find('cancel-me')[0]?.finished).toBe(false)
  })
})

describe('provider failures', () => {
  let prompt: { id: string }
  beforeAll(async () => {
    prompt = await publishedPrompt(owner, { template: 'Fail {{how}}' })
  })

  const fail = (model: string, connectionId = openaiConnection) =>
    run(`/api/v1/prompts/${prompt.id}/run`, { connectionId, variables: { how: model }, model })

  it('maps 401 and 500 to 502 PROVIDER_ERROR with the provider status, never the key', async () => {
    for (const [model, connectionId, key] of [
      ['fake-401', openaiConnection, OPENAI_KEY],
      ['fake-401', anthropicConnection, ANTHROPIC_KEY],
      ['fake-500', openaiConnection, OPENAI_KEY],
      ['fake-500', anthropicConnection, ANTHROPIC_KEY],
    ] as const) {
      const res = await fail(model, connectionId)
      expect(res.status).toBe(502)
      expect(res.body.error.code).toBe('PROVIDER_ERROR')
      expect(res.body.error.details?.providerStatus).toBe(Number(model.slice(5)))
      expect(JSON.stringify(res.body)).not.toContain(key)
      expect(JSON.stringify(res.body)).not.toContain('SECRET')
    }
  })

  it("passes a provider's 429 on as 502 with providerStatus 429 and its Retry-After", async () => {
    for (const connectionId of [openaiConnection, anthropicConnection]) {
      const res = await fail('fake-429', connectionId)
      expect(res.status).toBe(502)
      expect(res.body.error.details).toMatchObject({
        providerStatus: 429,
        retryAfter: String(RETRY_AFTER_SECONDS),
      })
      expect(res.headers.get('retry-after')).toBe(String(RETRY_AFTER_SECONDS))
    }
  })

  it('answers 504 PROVIDER_TIMEOUT past RUN_TIMEOUT_MS, and the provider call is abandoned', async () => {
    const res = await fail('fake-stall')
    expect(res.status).toBe(504)
    expect(res.body.error.code).toBe('PROVIDER_TIMEOUT')
    await expect.poll(() => fake.find('fake-stall')[0]?.cancelled).toBe(true)
  })

  it('sends a streamed failure as an error event', async () => {
    const res = await stream(`/api/v1/prompts/${prompt.id}/run`, {
      connectionId: openaiConnection,
      variables: { how: 'streamed-401' },
      model: 'fake-401',
      stream: true,
    })
    const events = await readSse(res)
    expect(events.at(-1)).toMatchObject({
      event: 'error',
      data: { code: 'PROVIDER_ERROR', details: { providerStatus: 401 } },
    })
    expect(JSON.stringify(events)).not.toContain(OPENAI_KEY)
  })
})

describe('access, limits and the run log', () => {
  it('needs runs:write for an API key', async () => {
    const prompt = await publishedPrompt(owner, { template: 'Scope {{x}}' })
    const readOnly = await apiKey(owner, ['prompts:read', 'prompts:write'])
    const res = await run(
      `/api/v1/prompts/${prompt.id}/run`,
      { connectionId: openaiConnection, variables: { x: '1' } },
      readOnly,
    )
    expect(res.status).toBe(403)
    expect(res.body.error.code).toBe('INSUFFICIENT_SCOPE')
  })

  it('refuses a connection of another organization as not found', async () => {
    const other = await signUp('runs-foreign')
    const prompt = await publishedPrompt(other, { template: 'Foreign {{x}}' })
    const res = await run(
      `/api/v1/prompts/${prompt.id}/run`,
      { connectionId: openaiConnection, variables: { x: 'f' } },
      other.accessToken,
    )
    expect(res.status).toBe(404)
    expect(fake.find('Foreign f')).toHaveLength(0)
  })

  it(`allows at most RUN_MAX_CONCURRENT (${MAX_CONCURRENT}) calls of one organization at once`, async () => {
    const tenant = await signUp('runs-busy')
    const c = await connect(tenant, {
      name: 'busy',
      provider: 'openai-compatible',
      baseUrl: `${fake.url}/v1`,
      apiKey: 'sk-busy-1234',
    })
    const prompt = await publishedPrompt(tenant, { template: 'Busy {{x}}' })
    const slow = (x: string) =>
      run(
        `/api/v1/prompts/${prompt.id}/run`,
        { connectionId: c.body.data._id, variables: { x }, model: 'fake-slow-700' },
        tenant.accessToken,
      )
    const first = [slow('a'), slow('b')]
    await expect.poll(() => fake.find('Busy ').length).toBe(2)
    const third = await slow('c')
    expect(third.status).toBe(429)
    expect(third.body.error.code).toBe('RUNS_BUSY')
    const done = await Promise.all(first)
    expect(done.map((r) => r.status)).toEqual([200, 200])
    // Another organization is not held back meanwhile, and the slots come back.
    expect((await slow('d')).status).toBe(200)
  })

  it('logs every run, newest first, paginated, and only to its organization', async () => {
    const prompt = await publishedPrompt(owner, { template: 'Log {{i}}' })
    const ids: string[] = []
    for (const i of ['1', '2', '3']) {
      const res = await run(`/api/v1/prompts/${prompt.id}/run`, {
        connectionId: openaiConnection,
        variables: { i },
      })
      ids.push(res.body.data.runId)
    }
    await run(`/api/v1/prompts/${prompt.id}/run`, {
      connectionId: openaiConnection,
      variables: { i: '4' },
      model: 'fake-500',
    })
    const page1 = await call<Data<{ runs: Record<string, unknown>[]; pagination: Record<string, unknown> }>>(
      base,
      'GET',
      `/api/v1/prompts/${prompt.id}/runs?limit=2`,
      { token: runKey },
    )
    expect(page1.status).toBe(200)
    expect(page1.body.data.pagination).toMatchObject({ page: 1, limit: 2, total: 4, hasNextPage: true })
    const [failed, newest] = page1.body.data.runs
    expect(failed).toMatchObject({
      status: 'failed',
      error: { code: 'PROVIDER_ERROR' },
      variables: { i: '4' },
    })
    expect(newest).toMatchObject({
      _id: ids[2],
      status: 'succeeded',
      variables: { i: '3' },
      output: { content: 'Log 3' },
      model: 'gpt-fake',
      connectionId: openaiConnection,
      provider: 'openai-compatible',
      renderedMessages: [{ role: 'user', content: 'Log 3' }],
      actor: { kind: 'apiKey' },
    })
    const page2 = await call<Data<{ runs: { _id: string }[] }>>(
      base,
      'GET',
      `/api/v1/prompts/${prompt.id}/runs?limit=2&page=2`,
      {
        token: runKey,
      },
    )
    expect(page2.body.data.runs.map((r) => r._id)).toEqual([ids[1], ids[0]])

    const one = await call<Data<{ _id: string; usage: unknown }>>(base, 'GET', `/api/v1/runs/${ids[0]}`, {
      token: owner.accessToken,
    })
    expect(one.status).toBe(200)
    expect(one.body.data.usage).toEqual({ inputTokens: 2, outputTokens: 2 })
    expect(JSON.stringify(page1.body) + JSON.stringify(one.body)).not.toContain(OPENAI_KEY)

    const stranger = await signUp('runs-stranger')
    const foreignRun = await call<ErrorReply>(base, 'GET', `/api/v1/runs/${ids[0]}`, {
      token: stranger.accessToken,
    })
    expect(foreignRun.status).toBe(404)
    const foreignList = await call<Data<{ runs: unknown[] }>>(
      base,
      'GET',
      `/api/v1/prompts/${prompt.id}/runs`,
      {
        token: stranger.accessToken,
      },
    )
    expect(foreignList.body.data.runs).toEqual([])
  })

  it('never writes a key to a log line', () => {
    const logs = proc.logs.join('\n')
    expect(logs).toContain('"runs"')
    for (const key of [
      OPENAI_KEY,
      ANTHROPIC_KEY,
      ROTATED_KEY,
      'sk-crud-key-SECRET-abcd',
      'org-SECRET-header',
    ]) {
      expect(logs.includes(key), key).toBe(false)
    }
  })
})
