import { MemoryBus } from '@pm/bus'
import { type CallerContext, CONTEXT_HEADER, type PromptChangedEvent, SUBJECTS } from '@pm/contracts'
import { type Service, signContext } from '@pm/kit'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it, vi } from 'vitest'
import { buildApp, loadRenderConfig } from '../src/app.ts'
import { FakePrompts, hexId } from './fakePrompts.ts'

const SECRET = 'render-test-secret-0123456789abcdef0123456789'
const ORG = hexId()
const OTHER_ORG = hexId()

interface Body {
  renderedMessages?: { role: string; content: string }[]
  config?: Record<string, unknown>
  renderedContent?: string
  unresolvedVariables?: string[]
  variables?: Record<string, unknown>
  version?: number
  versionId?: string
  promptId?: string
  error?: { code: string; details?: unknown; requestId: string }
}

describe('render service', () => {
  let fake: FakePrompts
  let promptsUrl: string
  let bus: MemoryBus
  let app: Service

  const start = async (env: Record<string, string> = {}) => {
    app = await buildApp({
      config: loadRenderConfig({
        INTERNAL_AUTH_SECRET: SECRET,
        PROMPTS_URL: promptsUrl,
        LOG_LEVEL: 'silent',
        RESOLVE_CACHE_TTL_MS: '60000',
        ...env,
      }),
      bus,
    })
  }

  const caller = (organizationId: string | undefined, kind: CallerContext['kind'] = 'apiKey') =>
    signContext({ kind, organizationId, scopes: ['prompts:read'], requestId: 'r' }, SECRET)

  const post = async (
    url: string,
    body?: unknown,
    opts: { org?: string | null; headers?: Record<string, string> } = {},
  ) => {
    const org = opts.org === undefined ? ORG : opts.org
    const headers: Record<string, string> = { ...opts.headers }
    headers[CONTEXT_HEADER] = org === null ? caller(undefined, 'anonymous') : caller(org)
    const res = await app.inject({
      method: 'POST',
      url,
      headers,
      ...(body === undefined ? {} : { payload: body as Record<string, unknown> }),
    })
    return { status: res.statusCode, body: res.json() as Body, headers: res.headers }
  }

  const changed = (promptId: string, reason: PromptChangedEvent['reason'] = 'published') =>
    bus.broadcast(SUBJECTS.promptChanged, {
      promptId,
      organizationId: ORG,
      reason,
      at: new Date().toISOString(),
    } satisfies PromptChangedEvent)

  beforeAll(async () => {
    fake = new FakePrompts(SECRET)
    promptsUrl = await fake.start()
  })
  afterAll(async () => {
    await fake.close()
  })
  beforeEach(async () => {
    bus = new MemoryBus()
    await start()
  })
  afterEach(async () => {
    fake.gate = null
    await app.close()
    await bus.close()
  })

  describe('output size (issue 14, finding 2)', () => {
    const big = '{{x}}'.repeat(20_000)

    it('refuses with 422 RENDER_TOO_LARGE a rendering larger than RENDER_MAX_OUTPUT_BYTES, on every render route', async () => {
      const p = fake.add(ORG, big, [{ name: 'x', required: true }])
      fake.publish(p._id)
      p.isPublic = true
      const values = { variables: { x: 'v'.repeat(1024) } }
      for (const [url, org] of [
        [`/api/v1/prompts/${p._id}/invoke`, ORG],
        [`/api/v1/prompts/${p._id}/inject`, ORG],
        [`/api/v1/public/prompts/${p._id}/invoke`, null],
      ] as const) {
        const res = await post(url, values, { org })
        expect(res.status, url).toBe(422)
        expect(res.body.error?.code, url).toBe('RENDER_TOO_LARGE')
        expect(res.body.error?.details, url).toEqual({ maxOutputBytes: 1024 * 1024 })
      }
    })

    it('renders up to the limit, counted in UTF-8 bytes', async () => {
      await app.close()
      await start({ RENDER_MAX_OUTPUT_BYTES: '4000' })
      const p = fake.add(ORG, 'ab{{x}}', [{ name: 'x', required: true }])
      fake.publish(p._id)
      // "😀" is 4 bytes in UTF-8 (2 UTF-16 units): 2 + 999 × 4 = 3998 is allowed, 4002 is not.
      const ok = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { x: '😀'.repeat(999) } })
      expect(ok.status).toBe(200)
      const over = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { x: '😀'.repeat(1000) } })
      expect(over.status).toBe(422)
    })
  })

  describe('invoke', () => {
    it('renders the current version, with X-Service-Version', async () => {
      const p = fake.add(ORG, 'Hello {{ name }}, from {{city}}!', [
        { name: 'name', required: true },
        { name: 'city', required: false, defaultValue: 'Paris' },
      ])
      const v1 = fake.publish(p._id)
      const res = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { name: 'Ada' } })
      expect(res.status).toBe(200)
      expect(res.headers['x-service-version']).toBe('1')
      expect(res.body).toEqual({
        renderedContent: 'Hello Ada, from Paris!',
        variables: { name: 'Ada' },
        promptId: p._id,
        versionId: v1._id,
        version: 1,
      })
    })

    it('uses published content, not the draft', async () => {
      const p = fake.add(ORG, 'published {{a}}')
      fake.publish(p._id)
      p.draft.template = 'draft {{a}}'
      const res = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { a: 1 } })
      expect(res.body.renderedContent).toBe('published 1')
    })

    it('accepts no body at all', async () => {
      const p = fake.add(ORG, 'static')
      fake.publish(p._id)
      const res = await post(`/api/v1/prompts/${p._id}/invoke`)
      expect(res.status).toBe(200)
      expect(res.body.renderedContent).toBe('static')
      expect(res.body.variables).toEqual({})
    })

    it('answers NO_PUBLISHED_VERSION for a prompt never published', async () => {
      const p = fake.add(ORG, 'x')
      const res = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: {} })
      expect(res.status).toBe(400)
      expect(res.body.error?.code).toBe('NO_PUBLISHED_VERSION')
    })

    it('refuses missing required variables, naming them; "" and null count as supplied', async () => {
      const p = fake.add(ORG, '{{a}}{{b}}{{c}}{{d}}', [
        { name: 'a', required: true },
        { name: 'b', required: true },
        { name: 'c', required: true },
        { name: 'd', required: false },
      ])
      fake.publish(p._id)
      const missing = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { b: 'B' } })
      expect(missing.status).toBe(400)
      expect(missing.body.error?.code).toBe('MISSING_REQUIRED_VARIABLES')
      expect(missing.body.error?.details).toEqual(['a', 'c'])
      expect(missing.headers['x-service-version']).toBeUndefined()

      const ok = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { a: '', b: null, c: 0 } })
      expect(ok.status).toBe(200)
      expect(ok.body.renderedContent).toBe('0')
    })

    it('converts values and never expands a placeholder inside a value', async () => {
      const p = fake.add(ORG, '{{n}}|{{b}}|{{o}}|{{l}}|{{s}}')
      fake.publish(p._id)
      const res = await post(`/api/v1/prompts/${p._id}/invoke`, {
        variables: { n: 1.5, b: false, o: { k: [1] }, l: ['x'], s: '{{n}} {{ s }}' },
      })
      expect(res.body.renderedContent).toBe('1.5|false|{"k":[1]}|["x"]|{{n}} {{ s }}')
    })

    it('renders version N from the query or the body', async () => {
      const p = fake.add(ORG, 'one')
      fake.publish(p._id)
      p.draft.template = 'two'
      fake.publish(p._id)
      const current = await post(`/api/v1/prompts/${p._id}/invoke`, {})
      expect(current.body.renderedContent).toBe('two')
      const byQuery = await post(`/api/v1/prompts/${p._id}/invoke?version=1`, {})
      expect(byQuery.body.renderedContent).toBe('one')
      expect(byQuery.headers['x-service-version']).toBe('1')
      const byBody = await post(`/api/v1/prompts/${p._id}/invoke`, { version: 1 })
      expect(byBody.body).toMatchObject({ renderedContent: 'one', version: 1 })
      const same = await post(`/api/v1/prompts/${p._id}/invoke?version=2`, { version: 2 })
      expect(same.body.renderedContent).toBe('two')
      const none = await post(`/api/v1/prompts/${p._id}/invoke?version=9`, {})
      expect(none.status).toBe(404)
      expect(none.body.error?.code).toBe('VERSION_NOT_FOUND')
    })

    it('refuses a version in query and body that differ, and version with env', async () => {
      const p = fake.add(ORG, 'x')
      fake.publish(p._id)
      const differ = await post(`/api/v1/prompts/${p._id}/invoke?version=1`, { version: 2 })
      expect(differ.status).toBe(400)
      expect(differ.body.error?.code).toBe('VALIDATION_ERROR')
      const both = await post(`/api/v1/prompts/${p._id}/invoke?version=1&env=production`, {})
      expect(both.status).toBe(400)
      expect(both.body.error?.code).toBe('VALIDATION_ERROR')
      expect(fake.callsFor(p._id)).toBe(0)
    })

    it('renders the snapshot pinned to an environment', async () => {
      const p = fake.add(ORG, 'one')
      const v1 = fake.publish(p._id)
      p.draft.template = 'two'
      fake.publish(p._id)
      const unset = await post(`/api/v1/prompts/${p._id}/invoke?env=production`, {})
      expect(unset.status).toBe(404)
      expect(unset.body.error?.code).toBe('ENVIRONMENT_NOT_SET')
      p.environments.production = v1._id
      changed(p._id, 'promoted')
      const pinned = await post(`/api/v1/prompts/${p._id}/invoke?env=production`, {})
      expect(pinned.status).toBe(200)
      expect(pinned.body).toMatchObject({ renderedContent: 'one', version: 1, versionId: v1._id })
      expect(pinned.headers['x-service-version']).toBe('1')
      const preview = await post(`/api/v1/prompts/${p._id}/invoke?env=preview`, {})
      expect(preview.body.error?.code).toBe('ENVIRONMENT_NOT_SET')
    })

    it('refuses unknown fields and a bad env', async () => {
      const p = fake.add(ORG, 'x')
      fake.publish(p._id)
      const field = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: {}, extra: 1 })
      expect(field.status).toBe(400)
      expect(field.body.error?.code).toBe('VALIDATION_ERROR')
      const env = await post(`/api/v1/prompts/${p._id}/invoke?env=staging`, {})
      expect(env.status).toBe(400)
      const id = await post('/api/v1/prompts/not-an-id/invoke', {})
      expect(id.status).toBe(400)
    })

    it('needs a signed caller context and a workspace', async () => {
      const p = fake.add(ORG, 'x')
      fake.publish(p._id)
      const none = await app.inject({ method: 'POST', url: `/api/v1/prompts/${p._id}/invoke`, payload: {} })
      expect(none.statusCode).toBe(401)
      const forged = await app.inject({
        method: 'POST',
        url: `/api/v1/prompts/${p._id}/invoke`,
        headers: {
          [CONTEXT_HEADER]: signContext({ kind: 'apiKey', scopes: [], requestId: 'r' }, 'x'.repeat(40)),
        },
        payload: {},
      })
      expect(forged.statusCode).toBe(401)
      const anonymous = await post(`/api/v1/prompts/${p._id}/invoke`, {}, { org: null })
      expect(anonymous.status).toBe(404)
    })

    it('never serves another workspace a cached answer', async () => {
      const p = fake.add(ORG, 'secret')
      fake.publish(p._id)
      expect((await post(`/api/v1/prompts/${p._id}/invoke`, {})).status).toBe(200)
      const other = await post(`/api/v1/prompts/${p._id}/invoke`, {}, { org: OTHER_ORG })
      expect(other.status).toBe(404)
      expect(other.body.error?.code).toBe('NOT_FOUND')
    })

    it('answers 503 when the prompts service is unreachable', async () => {
      await app.close()
      await start({ PROMPTS_URL: 'http://127.0.0.1:9' })
      const res = await post(`/api/v1/prompts/${hexId()}/invoke`, {})
      expect(res.status).toBe(503)
      expect(res.body.error?.code).toBe('SERVICE_UNAVAILABLE')
    })
  })

  describe('caching', () => {
    it('asks the prompts service once, then serves from the cache', async () => {
      const p = fake.add(ORG, 'hi {{a}}')
      fake.publish(p._id)
      for (let i = 0; i < 5; i++) {
        const res = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { a: i } })
        expect(res.body.renderedContent).toBe(`hi ${i}`)
      }
      expect(fake.callsFor(p._id)).toBe(1)
    })

    it('shares one lookup between concurrent requests', async () => {
      const p = fake.add(ORG, 'x')
      fake.publish(p._id)
      const results = await Promise.all(
        Array.from({ length: 20 }, () => post(`/api/v1/prompts/${p._id}/invoke`, {})),
      )
      expect(results.every((r) => r.status === 200)).toBe(true)
      expect(fake.callsFor(p._id)).toBe(1)
    })

    it('sees a publish as soon as the change event arrives', async () => {
      const p = fake.add(ORG, 'one')
      fake.publish(p._id)
      expect((await post(`/api/v1/prompts/${p._id}/invoke`, {})).body.version).toBe(1)
      p.draft.template = 'two'
      fake.publish(p._id)
      // No event yet: the cached pointer is still trusted (TTL 60 s in these tests).
      expect((await post(`/api/v1/prompts/${p._id}/invoke`, {})).body.version).toBe(1)
      changed(p._id)
      const res = await post(`/api/v1/prompts/${p._id}/invoke`, {})
      expect(res.body).toMatchObject({ version: 2, renderedContent: 'two' })
      expect(res.headers['x-service-version']).toBe('2')
    })

    it('drops only the changed prompt', async () => {
      const a = fake.add(ORG, 'a')
      const b = fake.add(ORG, 'b')
      fake.publish(a._id)
      fake.publish(b._id)
      await post(`/api/v1/prompts/${a._id}/invoke`, {})
      await post(`/api/v1/prompts/${b._id}/invoke`, {})
      changed(a._id)
      await post(`/api/v1/prompts/${a._id}/invoke`, {})
      await post(`/api/v1/prompts/${b._id}/invoke`, {})
      expect(fake.callsFor(a._id)).toBe(2)
      expect(fake.callsFor(b._id)).toBe(1)
    })

    it('sees a delete at once', async () => {
      const p = fake.add(ORG, 'x')
      fake.publish(p._id)
      expect((await post(`/api/v1/prompts/${p._id}/invoke`, {})).status).toBe(200)
      fake.prompts.delete(p._id)
      changed(p._id, 'deleted')
      const res = await post(`/api/v1/prompts/${p._id}/invoke`, {})
      expect(res.status).toBe(404)
      expect(res.body.error?.code).toBe('NOT_FOUND')
    })

    it('answers 504 UPSTREAM_TIMEOUT when the prompts service takes longer than PROMPTS_TIMEOUT_MS', async () => {
      await app.close()
      await start({ PROMPTS_TIMEOUT_MS: '300' })
      const p = fake.add(ORG, 'slow')
      fake.publish(p._id)
      let open = () => {}
      fake.gate = new Promise<void>((resolve) => {
        open = resolve
      })
      try {
        const started = Date.now()
        const res = await post(`/api/v1/prompts/${p._id}/invoke`, {})
        expect([res.status, res.body.error?.code]).toEqual([504, 'UPSTREAM_TIMEOUT'])
        expect(Date.now() - started).toBeGreaterThanOrEqual(290)
        expect(Date.now() - started).toBeLessThan(5_000)
      } finally {
        fake.gate = null
        open()
      }
      // Answered in time again: the lookup is made anew, nothing of the timeout kept.
      expect((await post(`/api/v1/prompts/${p._id}/invoke`, {})).status).toBe(200)
      for (const bad of ['99', '120001', '1.5', 'soon'])
        expect(
          () => loadRenderConfig({ INTERNAL_AUTH_SECRET: SECRET, PROMPTS_TIMEOUT_MS: bad }),
          bad,
        ).toThrow(/PROMPTS_TIMEOUT_MS/)
    })

    it('does not cache a lookup that was in flight when the change event arrived', async () => {
      const p = fake.add(ORG, 'one')
      fake.publish(p._id)
      let open = () => {}
      fake.gate = new Promise<void>((resolve) => {
        open = resolve
      })
      const racing = post(`/api/v1/prompts/${p._id}/invoke`, {})
      await vi.waitFor(() => expect(fake.callsFor(p._id)).toBe(1), { interval: 5, timeout: 15_000 })
      // The prompts service moves on while that answer is on its way...
      p.draft.template = 'two'
      fake.publish(p._id)
      changed(p._id)
      // ...so a request arriving now does not join the old lookup: it asks again.
      const after = post(`/api/v1/prompts/${p._id}/invoke`, {})
      await vi.waitFor(() => expect(fake.callsFor(p._id)).toBe(2), { interval: 5, timeout: 15_000 })
      fake.gate = null
      open()
      expect((await racing).status).toBe(200)
      expect((await after).body.version).toBe(2)
      // And the answer that raced with the event was not kept.
      expect((await post(`/api/v1/prompts/${p._id}/invoke`, {})).body.version).toBe(2)
    })

    it('forgets pointers after RESOLVE_CACHE_TTL_MS even without an event', async () => {
      await app.close()
      await start({ RESOLVE_CACHE_TTL_MS: '30' })
      const p = fake.add(ORG, 'one')
      fake.publish(p._id)
      await post(`/api/v1/prompts/${p._id}/invoke`, {})
      p.draft.template = 'two'
      fake.publish(p._id)
      await vi.waitFor(
        async () => expect((await post(`/api/v1/prompts/${p._id}/invoke`, {})).body.version).toBe(2),
        { timeout: 5_000, interval: 20 },
      )
    })

    it('asks every time when the pointer cache is off', async () => {
      await app.close()
      await start({ RESOLVE_CACHE_TTL_MS: '0' })
      const p = fake.add(ORG, 'x')
      fake.publish(p._id)
      await post(`/api/v1/prompts/${p._id}/invoke`, {})
      await post(`/api/v1/prompts/${p._id}/invoke`, {})
      expect(fake.callsFor(p._id)).toBe(2)
    })

    it('ignores malformed change events', async () => {
      const p = fake.add(ORG, 'x')
      fake.publish(p._id)
      await post(`/api/v1/prompts/${p._id}/invoke`, {})
      bus.broadcast(SUBJECTS.promptChanged, null)
      bus.broadcast(SUBJECTS.promptChanged, { promptId: 42 })
      expect((await post(`/api/v1/prompts/${p._id}/invoke`, {})).status).toBe(200)
      expect(fake.callsFor(p._id)).toBe(1)
    })
  })

  describe('chat prompts, config and lookup by slug', () => {
    const chat = () => {
      const p = fake.add(ORG, '', [
        { name: 'persona', required: true },
        { name: 'history', required: true },
        { name: 'question', required: true },
      ])
      p.draft.messages = [
        { role: 'system', content: 'You are {{persona}}.' },
        { type: 'placeholder', name: 'history' },
        { role: 'user', content: '{{question}}' },
      ]
      p.draft.config = { model: 'gpt-x', temperature: 0.1 }
      return p
    }
    const history = [
      { role: 'user', content: 'Hi' },
      { role: 'assistant', content: 'Hello!' },
    ]

    it('renders the messages with the placeholder spliced in, and returns the config', async () => {
      const p = chat()
      fake.publish(p._id)
      const res = await post(`/api/v1/prompts/${p._id}/invoke`, {
        variables: { persona: 'a pirate', history, question: 'Where is {{x}}?' },
      })
      expect(res.status).toBe(200)
      expect(res.body.renderedMessages).toEqual([
        { role: 'system', content: 'You are a pirate.' },
        ...history,
        // A value is never expanded again.
        { role: 'user', content: 'Where is {{x}}?' },
      ])
      expect(res.body.renderedContent).toBe(
        '[system]\nYou are a pirate.\n\n[user]\nHi\n\n[assistant]\nHello!\n\n[user]\nWhere is {{x}}?',
      )
      expect(res.body.config).toEqual({ model: 'gpt-x', temperature: 0.1 })
    })

    it('refuses a placeholder value that is not a list of {role, content}', async () => {
      const p = chat()
      fake.publish(p._id)
      for (const bad of [
        'not a list',
        [{ role: 'user' }],
        [{ role: 'wizard', content: 'x' }],
        [{ role: 'user', content: 3 }],
        [null],
        { role: 'user', content: 'x' },
      ]) {
        const res = await post(`/api/v1/prompts/${p._id}/invoke`, {
          variables: { persona: 'p', history: bad, question: 'q' },
        })
        expect(res.status, JSON.stringify(bad)).toBe(400)
        expect(res.body.error?.code).toBe('VALIDATION_ERROR')
        expect(res.body.error?.details).toEqual([
          expect.objectContaining({ path: '/body/variables/history' }),
        ])
      }
      const missing = await post(`/api/v1/prompts/${p._id}/invoke`, {
        variables: { persona: 'p', question: 'q' },
      })
      expect(missing.status).toBe(400)
      expect(missing.body.error).toMatchObject({ code: 'MISSING_REQUIRED_VARIABLES', details: ['history'] })
    })

    it('previews a chat draft: a placeholder without a value is listed, not rendered', async () => {
      const p = chat()
      const res = await post(`/api/v1/prompts/${p._id}/inject`, { variables: { persona: 'a cat' } })
      expect(res.status).toBe(200)
      expect(res.body.renderedMessages).toEqual([
        { role: 'system', content: 'You are a cat.' },
        { role: 'user', content: '{{question}}' },
      ])
      expect(res.body.unresolvedVariables).toEqual(['history', 'question'])
      expect(res.body.renderedContent).toBe(
        '[system]\nYou are a cat.\n\n[placeholder history]\n\n[user]\n{{question}}',
      )
      expect(res.body.config).toEqual({ model: 'gpt-x', temperature: 0.1 })
    })

    it("renders logic and references in a chat prompt's messages, and says what it included", async () => {
      const child = fake.add(ORG, 'Be {{tone}}.', [{ name: 'tone', required: true }])
      const childV1 = fake.publish(child._id)
      const p = fake.add(ORG, '', [{ name: 'question', required: true }])
      p.draft.messages = [
        { role: 'system', content: `{{> ${child.slug}}}{{#if vip}} VIP.{{/if}}` },
        { type: 'placeholder', name: 'history' },
        { role: 'user', content: '{{#each qs}}{{@index}}:{{this}} {{/each}}{{question}}' },
      ]
      p.draft.variables.push({ name: 'history', required: true })
      fake.publish(p._id)
      const url = `/api/v1/prompts/${p._id}/invoke`
      const res = await post(url, {
        variables: { tone: 'brief', vip: true, history, qs: ['a', 'b'], question: 'Q?' },
      })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(res.body.renderedMessages).toEqual([
        { role: 'system', content: 'Be brief. VIP.' },
        ...history,
        { role: 'user', content: '0:a 1:b Q?' },
      ])
      expect((res.body as { references?: unknown }).references).toEqual([
        { slug: child.slug, promptId: child._id, versionId: childV1._id, version: 1, via: 'latest' },
      ])
      // The included prompt's required variable is the parent's too.
      const missing = await post(url, { variables: { history, question: 'q' } })
      expect(missing.body.error).toMatchObject({ code: 'MISSING_REQUIRED_VARIABLES', details: ['tone'] })
      // The draft's preview resolves the same references.
      const preview = await post(`/api/v1/prompts/${p._id}/inject`, { variables: { question: 'q' } })
      expect(preview.body.renderedMessages?.[0]).toEqual({ role: 'system', content: 'Be {{tone}}.' })
      expect(preview.body.unresolvedVariables).toEqual(['tone', 'vip', 'history', 'qs'])
      expect((preview.body as { references?: unknown[] }).references).toHaveLength(1)
      // A chat prompt without references answers as before (no `references`).
      const plain = chat()
      fake.publish(plain._id)
      const plainRes = await post(`/api/v1/prompts/${plain._id}/invoke`, {
        variables: { persona: 'p', history, question: 'q' },
      })
      expect(plainRes.body).not.toHaveProperty('references')
    })

    it("an included {{> slug@production}} under a split serves the invoke's subject its own variant", async () => {
      const child = fake.add(ORG, 'A')
      const v1 = fake.publish(child._id)
      child.draft.template = 'B'
      const v2 = fake.publish(child._id)
      child.environments.production = v1._id
      child.splits = {
        production: {
          id: hexId(),
          variants: [
            { versionId: v1._id, version: 1, weight: 50 },
            { versionId: v2._id, version: 2, weight: 50 },
          ],
        },
      }
      const parent = fake.add(ORG, `[{{> ${child.slug}@production}}]`)
      fake.publish(parent._id)
      const seen = new Set<string>()
      for (let i = 0; i < 16; i++) {
        const subject = `user-${i}`
        const direct = await post(`/api/v1/prompts/${child._id}/invoke?env=production`, { subject })
        const text = direct.body.renderedContent as string
        seen.add(text)
        // Asked twice, through the parent, by body and by header: the child's variant for that subject.
        for (const res of [
          await post(`/api/v1/prompts/${parent._id}/invoke`, { subject }),
          await post(`/api/v1/prompts/${parent._id}/invoke`, {}, { headers: { 'x-subject-id': subject } }),
        ]) {
          expect(res.status, JSON.stringify(res.body)).toBe(200)
          expect(res.body.renderedContent, subject).toBe(`[${text}]`)
        }
      }
      expect(seen).toEqual(new Set(['A', 'B']))
    })

    it("a chat message's reference that cannot be resolved is 400 INVALID_REFERENCE, nothing rendered", async () => {
      const included = chat()
      fake.publish(included._id)
      for (const [content, reason] of [
        ['{{> no-such-slug}}', 'NOT_FOUND'],
        [`{{> ${included.slug}}}`, undefined],
        [`{{> ${included.slug}@production}}`, 'ENVIRONMENT_NOT_SET'],
      ] as const) {
        const p = fake.add(ORG, '')
        p.draft.messages = [
          { role: 'system', content: 'fine' },
          { role: 'user', content },
        ]
        fake.publish(p._id)
        const res = await post(`/api/v1/prompts/${p._id}/invoke`, {})
        expect(res.status, content).toBe(400)
        expect(res.body.error?.code).toBe('INVALID_REFERENCE')
        if (reason) expect(res.body.error?.details).toMatchObject({ reason })
        else expect(JSON.stringify(res.body.error)).toContain('is a chat prompt')
      }
    })

    it("returns a text prompt's config, and nothing new when it has none", async () => {
      const p = fake.add(ORG, 'Hi {{a}}', [{ name: 'a', required: true }])
      fake.publish(p._id)
      const plain = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { a: 1 } })
      expect(Object.keys(plain.body).sort()).toEqual([
        'promptId',
        'renderedContent',
        'variables',
        'version',
        'versionId',
      ])
      p.draft.config = { model: 'm' }
      fake.publish(p._id)
      changed(p._id)
      const withConfig = await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { a: 1 } })
      expect(withConfig.body).toMatchObject({ version: 2, config: { model: 'm' } })
      expect(withConfig.body.renderedMessages).toBeUndefined()
    })

    it("invokes by slug in the caller's workspace, cached like a lookup by id and dropped by a change event", async () => {
      const p = fake.add(ORG, 'slug {{a}}', [{ name: 'a', required: true }])
      fake.publish(p._id)
      const path = `/api/v1/prompts/slug/${p.slug}/invoke`
      const bySlug = (query = '') => post(`${path}${query}`, { variables: { a: 1 } })
      const first = await bySlug()
      expect(first.status).toBe(200)
      expect(first.body).toMatchObject({ renderedContent: 'slug 1', promptId: p._id, version: 1 })
      expect(first.headers['x-service-version']).toBe('1')
      const lookups = fake.calls.length
      expect((await bySlug()).body.renderedContent).toBe('slug 1')
      // The lookup by id of the same prompt shares the answer.
      expect((await post(`/api/v1/prompts/${p._id}/invoke`, { variables: { a: 1 } })).status).toBe(200)
      expect(fake.calls.length).toBe(lookups)

      p.draft.template = 'slug v2 {{a}}'
      fake.publish(p._id)
      changed(p._id)
      expect((await bySlug()).body).toMatchObject({ renderedContent: 'slug v2 1', version: 2 })
      expect((await bySlug('?version=1')).body).toMatchObject({ renderedContent: 'slug 1', version: 1 })
      expect((await bySlug('?env=production')).body.error?.code).toBe('ENVIRONMENT_NOT_SET')

      // Another workspace does not see it; a slug that names nothing is 404; a malformed one is 400.
      expect((await post(path, { variables: { a: 1 } }, { org: OTHER_ORG })).status).toBe(404)
      expect((await post('/api/v1/prompts/slug/nothing-here/invoke', {})).body.error?.code).toBe('NOT_FOUND')
      const malformed = await post('/api/v1/prompts/slug/Not_A_Slug/invoke', {})
      expect(malformed.status).toBe(400)
      expect(malformed.body.error?.code).toBe('VALIDATION_ERROR')
    })

    it('does not remember a slug lookup that a change event overtook', async () => {
      const p = fake.add(ORG, 'race v1')
      fake.publish(p._id)
      let release = () => {}
      fake.gate = new Promise((r) => {
        release = r
      })
      const pending = post(`/api/v1/prompts/slug/${p.slug}/invoke`, {})
      await vi.waitFor(() => expect(fake.calls.some((c) => c.path.includes(`/slug/${p.slug}/`))).toBe(true), {
        timeout: 15_000,
      })
      p.draft.template = 'race v2'
      fake.publish(p._id)
      changed(p._id)
      release()
      fake.gate = null
      expect((await pending).status).toBe(200)
      // What was in flight when the event came is not remembered: the next request asks again...
      const lookups = fake.calls.length
      expect((await post(`/api/v1/prompts/slug/${p.slug}/invoke`, {})).body.renderedContent).toBe('race v2')
      expect(fake.calls.length).toBe(lookups + 1)
      // ...and that answer is kept.
      expect((await post(`/api/v1/prompts/slug/${p.slug}/invoke`, {})).body.renderedContent).toBe('race v2')
      expect(fake.calls.length).toBe(lookups + 1)
    })
  })

  describe('inject', () => {
    it('renders the draft, lists unresolved placeholders and leaves them as written', async () => {
      const p = fake.add(ORG, 'Hi {{ name }}, {{greeting}} {{ city }}', [
        { name: 'name', required: true },
        { name: 'greeting', required: false, defaultValue: 'hello' },
        { name: 'city', required: false },
      ])
      const res = await post(`/api/v1/prompts/${p._id}/inject`, { variables: {} })
      expect(res.status).toBe(200)
      expect(res.body).toEqual({
        renderedContent: 'Hi {{ name }}, hello {{ city }}',
        unresolvedVariables: ['name', 'city'],
        variables: {},
      })
    })

    it('reads the draft every time (no published version needed)', async () => {
      const p = fake.add(ORG, 'draft {{a}}')
      expect(
        (await post(`/api/v1/prompts/${p._id}/inject`, { variables: { a: 1 } })).body.renderedContent,
      ).toBe('draft 1')
      p.draft.template = 'edited {{a}}'
      expect(
        (await post(`/api/v1/prompts/${p._id}/inject`, { variables: { a: 2 } })).body.renderedContent,
      ).toBe('edited 2')
    })

    it('is refused for another workspace', async () => {
      const p = fake.add(ORG, 'x')
      const res = await post(`/api/v1/prompts/${p._id}/inject`, {}, { org: OTHER_ORG })
      expect(res.status).toBe(404)
    })

    it('takes organizationId in the query and refuses any other query parameter', async () => {
      const p = fake.add(ORG, 'draft')
      const ok = await post(`/api/v1/prompts/${p._id}/inject?organizationId=${ORG}`, {})
      expect(ok.status).toBe(200)
      const bad = await post(`/api/v1/prompts/${p._id}/inject?organizationId=nope`, {})
      expect(bad.status).toBe(400)
      expect(bad.body.error?.code).toBe('VALIDATION_ERROR')
      const unknown = await post(`/api/v1/prompts/${p._id}/inject?version=1`, {})
      expect(unknown.status).toBe(400)
      expect(unknown.body.error?.code).toBe('VALIDATION_ERROR')
    })
  })

  describe('a body left out or null', () => {
    it('means no variables, on every render route', async () => {
      const p = fake.add(ORG, 'static')
      fake.publish(p._id)
      p.isPublic = true
      const routes: [string, string | null][] = [
        [`/api/v1/prompts/${p._id}/invoke`, ORG],
        [`/api/v1/prompts/slug/${p.slug}/invoke`, ORG],
        [`/api/v1/prompts/${p._id}/inject`, ORG],
        [`/api/v1/public/prompts/${p._id}/invoke`, null],
      ]
      for (const [url, org] of routes) {
        const missing = await post(url, undefined, { org })
        expect(missing.status, url).toBe(200)
        expect(missing.body.variables, url).toEqual({})
        const headers = {
          [CONTEXT_HEADER]: org === null ? caller(undefined, 'anonymous') : caller(org),
          'content-type': 'application/json',
        }
        const res = await app.inject({ method: 'POST', url, headers, payload: 'null' })
        expect(res.statusCode, url).toBe(200)
        expect((res.json() as Body).variables, url).toEqual({})
      }
    })
  })

  describe('deeply nested values', () => {
    it('are a 400 VALIDATION_ERROR on every render route, not a 500 from echoing them', async () => {
      const p = fake.add(ORG, 'hi {{a}}', [{ name: 'a', required: false }])
      fake.publish(p._id)
      p.isPublic = true
      // 5,000 levels in a 10 KB body: serializing the echoed `variables` overflowed the stack.
      const deep = `${'['.repeat(5000)}${']'.repeat(5000)}`
      for (const [url, org] of [
        [`/api/v1/prompts/${p._id}/invoke`, ORG],
        [`/api/v1/prompts/slug/${p.slug}/invoke`, ORG],
        [`/api/v1/prompts/${p._id}/inject`, ORG],
        [`/api/v1/public/prompts/${p._id}/invoke`, null],
      ] as const) {
        for (const name of ['a', 'undeclared']) {
          const headers = {
            [CONTEXT_HEADER]: org === null ? caller(undefined, 'anonymous') : caller(org),
            'content-type': 'application/json',
          }
          const payload = `{"variables":{"${name}":${deep}}}`
          const res = await app.inject({ method: 'POST', url, headers, payload })
          expect(res.statusCode, `${url} ${name}`).toBe(400)
          expect((res.json() as Body).error?.code, url).toBe('VALIDATION_ERROR')
        }
      }
    })
  })

  describe('public invoke', () => {
    it('renders the current version of a public prompt for an anonymous caller', async () => {
      const p = fake.add(ORG, 'public {{a}}')
      fake.publish(p._id)
      p.isPublic = true
      const res = await post(
        `/api/v1/public/prompts/${p._id}/invoke`,
        { variables: { a: 'yes' } },
        { org: null },
      )
      expect(res.status).toBe(200)
      expect(res.body).toMatchObject({ renderedContent: 'public yes', version: 1 })
      expect(res.headers['x-service-version']).toBe('1')
      expect(fake.calls.at(-1)?.path).toContain('public=true')
    })

    it('an included public {{> slug@production}} under a split follows X-Subject-Id, random without it', async () => {
      const child = fake.add(ORG, 'A')
      const v1 = fake.publish(child._id)
      child.draft.template = 'B'
      const v2 = fake.publish(child._id)
      child.isPublic = true
      child.environments.production = v1._id
      child.splits = {
        production: {
          id: hexId(),
          variants: [
            { versionId: v1._id, version: 1, weight: 50 },
            { versionId: v2._id, version: 2, weight: 50 },
          ],
        },
      }
      const parent = fake.add(ORG, `[{{> ${child.slug}@production}}]`)
      fake.publish(parent._id)
      parent.isPublic = true
      const url = `/api/v1/public/prompts/${parent._id}/invoke`
      const seen = new Set<string>()
      for (let i = 0; i < 16; i++) {
        const subject = `user-${i}`
        const direct = await post(`/api/v1/prompts/${child._id}/invoke?env=production`, { subject })
        const text = direct.body.renderedContent as string
        seen.add(text)
        const res = await post(url, {}, { org: null, headers: { 'x-subject-id': subject } })
        expect(res.status, JSON.stringify(res.body)).toBe(200)
        expect(res.body.renderedContent, subject).toBe(`[${text}]`)
      }
      expect(seen).toEqual(new Set(['A', 'B']))
      // Without a subject, each request picks anew: both variants are served.
      const anonymous = new Set<string>()
      for (let i = 0; i < 40 && anonymous.size < 2; i++) {
        anonymous.add((await post(url, {}, { org: null })).body.renderedContent as string)
      }
      expect(anonymous).toEqual(new Set(['[A]', '[B]']))
    })

    it('is 404 for a private prompt, and follows visibility changes', async () => {
      const p = fake.add(ORG, 'x')
      fake.publish(p._id)
      p.isPublic = true
      expect((await post(`/api/v1/public/prompts/${p._id}/invoke`, {}, { org: null })).status).toBe(200)
      p.isPublic = false
      changed(p._id, 'unpublished')
      const res = await post(`/api/v1/public/prompts/${p._id}/invoke`, {}, { org: null })
      expect(res.status).toBe(404)
      expect(res.body.error?.code).toBe('NOT_FOUND')
    })

    it('enforces required variables and refuses unknown fields', async () => {
      const p = fake.add(ORG, '{{a}}', [{ name: 'a', required: true }])
      fake.publish(p._id)
      p.isPublic = true
      const missing = await post(`/api/v1/public/prompts/${p._id}/invoke`, {}, { org: null })
      expect(missing.status).toBe(400)
      expect(missing.body.error?.details).toEqual(['a'])
      const version = await post(`/api/v1/public/prompts/${p._id}/invoke`, { version: 1 }, { org: null })
      expect(version.status).toBe(400)
      const query = await post(`/api/v1/public/prompts/${p._id}/invoke?version=1`, {}, { org: null })
      expect(query.status).toBe(400)
    })
  })
})
