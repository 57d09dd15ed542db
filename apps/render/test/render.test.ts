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

    it('does not cache a lookup that was in flight when the change event arrived', async () => {
      const p = fake.add(ORG, 'one')
      fake.publish(p._id)
      let open = () => {}
      fake.gate = new Promise<void>((resolve) => {
        open = resolve
      })
      const racing = post(`/api/v1/prompts/${p._id}/invoke`, {})
      await vi.waitFor(() => expect(fake.callsFor(p._id)).toBe(1), { interval: 5 })
      // The prompts service moves on while that answer is on its way...
      p.draft.template = 'two'
      fake.publish(p._id)
      changed(p._id)
      // ...so a request arriving now does not join the old lookup: it asks again.
      const after = post(`/api/v1/prompts/${p._id}/invoke`, {})
      await vi.waitFor(() => expect(fake.callsFor(p._id)).toBe(2), { interval: 5 })
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
