import type {
  EnvironmentPromotedEvent,
  InjectResult,
  InvokeResult,
  Prompt,
  PromptDeletedEvent,
  PromptVersion,
  PromptVisibilityChangedEvent,
  VersionDiff,
} from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  apiKey,
  type Caller,
  caller,
  data,
  failure,
  login,
  type Session,
  type Tapped,
  tapEvents,
  upload,
} from '../src/prompts.ts'
import type { Reply } from '../src/client.ts'
import { auditResponses, type ResponseAudit } from '../src/openapi.ts'
import { type Stack, startStack } from '../src/stack.ts'

type ErrorBody = {
  error: { code: string; message: string; details?: Array<{ path: string; message: string }> }
}

const MESSAGES = [
  { role: 'system', content: 'You are {{persona}}. Answer in {{language}}.' },
  { type: 'placeholder', name: 'history' },
  { role: 'user', content: '{{question}}' },
] as const
const CONFIG = { model: 'gpt-4o-mini', temperature: 0.2, response_format: { type: 'json_object' } }
const HISTORY = [
  { role: 'user', content: 'Hi' },
  { role: 'assistant', content: 'Hello! How can I help?' },
]

/**
 * Prompts for LLM applications through the gateway (DESIGN section 9): chat prompts, config,
 * lookup by slug, and the change events; every rule with its bad input.
 */
describe('chat prompts, config, slugs and change events through the gateway', () => {
  let stack: Stack
  let audit: ResponseAudit
  let admin: Session
  let user: Caller
  let key: Caller
  let tap: { received: Tapped[]; bus: { close(): Promise<void> } }

  const create = async (body: Record<string, unknown>, who: Caller = key) =>
    data<Prompt>(await who('POST', '/api/v1/prompts', body), 201)
  const chat = (extra: Record<string, unknown> = {}) =>
    create({ name: `Support ${newId()}`, type: 'chat', messages: MESSAGES, config: CONFIG, ...extra })
  const publish = async (id: string) =>
    data<PromptVersion>(await user('POST', `/api/v1/prompts/${id}/publish`, {}), 201)
  const refused = async (reply: Promise<Reply<unknown>>, status = 400) => {
    const r = await reply
    return { code: failure(r, status), body: r.body as ErrorBody }
  }
  const variables = { persona: 'a librarian', language: 'English', history: HISTORY, question: 'Where is X?' }
  const eventsOf = <T>(type: string, promptId: string): T[] =>
    tap.received
      .map((m) => m.data as { type?: string; data?: { promptId?: string } })
      .filter((e) => e.type === type && e.data?.promptId === promptId) as T[]

  beforeAll(async () => {
    stack = await startStack()
    audit = auditResponses(stack.gateway)
    admin = await login(stack.gateway)
    user = caller(stack.gateway, admin.token)
    key = caller(stack.gateway, await apiKey(stack.gateway, admin, ['prompts:read', 'prompts:write']))
    tap = await tapEvents()
  }, 120_000)

  afterAll(async () => {
    audit?.stop()
    await tap?.bus.close()
    await stack?.stop()
  })

  describe('chat prompts', () => {
    it('creates a chat prompt: messages kept, template derived, variables detected across messages', async () => {
      const p = await chat()
      expect(p).toMatchObject({ type: 'chat', messages: MESSAGES, config: CONFIG })
      expect(p.template).toBe(
        '[system]\nYou are {{persona}}. Answer in {{language}}.\n\n[placeholder history]\n\n[user]\n{{question}}',
      )
      expect(p.variables).toEqual([
        { name: 'persona', required: true },
        { name: 'language', required: true },
        { name: 'history', required: true },
        { name: 'question', required: true },
      ])
      // A text prompt is as before: type text, no messages, no config.
      const text = await create({ name: `Plain ${newId()}`, template: 'Hi {{a}}' })
      expect(text.type).toBe('text')
      expect(text).not.toHaveProperty('messages')
      expect(text).not.toHaveProperty('config')
    })

    it('refuses bad chat input with 400 VALIDATION_ERROR and writes nothing', async () => {
      const name = `Bad ${newId()}`
      const cases: Array<Record<string, unknown>> = [
        // unknown role
        { type: 'chat', messages: [{ role: 'wizard', content: 'x' }] },
        // empty messages
        { type: 'chat', messages: [] },
        // no messages at all
        { type: 'chat' },
        // more than 100 messages
        { type: 'chat', messages: Array.from({ length: 101 }, () => ({ role: 'user', content: 'x' })) },
        // a placeholder without a valid name, a message with extra fields
        { type: 'chat', messages: [{ type: 'placeholder', name: '1bad' }] },
        { type: 'chat', messages: [{ role: 'user', content: 'x', name: 'y' }] },
        // the template of a chat prompt is derived
        { type: 'chat', messages: [{ role: 'user', content: 'x' }], template: 'x' },
        // messages are for chat prompts
        { template: 'x', messages: [{ role: 'user', content: 'x' }] },
        { type: 'text' },
        { type: 'image', template: 'x' },
        // config: not an object, or over 16 KiB
        { template: 'x', config: [1, 2] },
        { template: 'x', config: 'gpt' },
        { template: 'x', config: null },
        { template: 'x', config: { blob: 'x'.repeat(16 * 1024) } },
      ]
      for (const body of cases) {
        const { code } = await refused(key('POST', '/api/v1/prompts', { name, ...body }))
        expect(code, JSON.stringify(body).slice(0, 120)).toBe('VALIDATION_ERROR')
      }
      const listed = data<{ prompts: Prompt[] }>(
        await key('GET', `/api/v1/prompts?search=${encodeURIComponent(name)}`),
      )
      expect(listed.prompts).toEqual([])
      // 100 messages is the most.
      const most = await create({
        name: `Most ${newId()}`,
        type: 'chat',
        messages: Array.from({ length: 100 }, (_, i) => ({ role: 'user', content: `m${i}` })),
      })
      expect(most.messages).toHaveLength(100)
    })

    it('keeps the type fixed, and each type to its own content field, on update', async () => {
      const p = await chat()
      const text = await create({ name: `Fixed ${newId()}`, template: 'Hi' })
      const patch = (id: string, body: unknown) => key('PATCH', `/api/v1/prompts/${id}`, body)
      const typeChange = await refused(patch(text._id, { type: 'chat' }))
      expect(typeChange.code).toBe('VALIDATION_ERROR')
      expect(typeChange.body.error.details).toEqual([expect.objectContaining({ path: '/body/type' })])
      expect((await refused(patch(p._id, { type: 'text' }))).code).toBe('VALIDATION_ERROR')
      expect((await refused(patch(p._id, { template: 'x' }))).code).toBe('VALIDATION_ERROR')
      expect((await refused(patch(text._id, { messages: [{ role: 'user', content: 'x' }] }))).code).toBe(
        'VALIDATION_ERROR',
      )
      expect((await refused(patch(p._id, { messages: [] }))).code).toBe('VALIDATION_ERROR')
      expect((await refused(patch(p._id, { config: [] }))).code).toBe('VALIDATION_ERROR')
      // Nested deeper than 64 levels: refused before anything serializes it (5,000 deep overflowed
      // JSON.stringify's stack: a 500).
      // (The body is written by hand: the test's own JSON.stringify would overflow too.)
      const tooDeep = await fetch(`${stack.gateway}/api/v1/prompts/${p._id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
        body: `{"config":{"a":${'['.repeat(5_000)}1${']'.repeat(5_000)}}}`,
      })
      const refusal = (await tooDeep.json()) as ErrorBody
      // Past the body rule's 128 levels: refused as a body before any field is looked at.
      expect([tooDeep.status, refusal.error.code, refusal.error.details]).toEqual([
        400,
        'VALIDATION_ERROR',
        [expect.objectContaining({ path: '/body' })],
      ])
      // Within the body's bound but past the config's 64 levels: the config's own rule.
      const deepConfig = await fetch(`${stack.gateway}/api/v1/prompts/${p._id}`, {
        method: 'PATCH',
        headers: { authorization: `Bearer ${admin.token}`, 'content-type': 'application/json' },
        body: `{"config":{"a":${'['.repeat(100)}1${']'.repeat(100)}}}`,
      })
      const configRefusal = (await deepConfig.json()) as ErrorBody
      expect([deepConfig.status, configRefusal.error.code, configRefusal.error.details]).toEqual([
        400,
        'VALIDATION_ERROR',
        [expect.objectContaining({ path: '/body/config' })],
      ])
      // Naming the type it has is accepted; messages change the derived template and variables.
      const edited = data<Prompt & { staleVariables?: string[] }>(
        await patch(p._id, { type: 'chat', messages: [{ role: 'user', content: 'Only {{question}}' }] }),
      )
      expect(edited).toMatchObject({ type: 'chat', template: '[user]\nOnly {{question}}' })
      expect(edited.staleVariables).toEqual(['persona', 'language', 'history'])
      // config: replaced, then removed with null.
      expect(data<Prompt>(await patch(p._id, { config: { model: 'b' } })).config).toEqual({ model: 'b' })
      expect(data<Prompt>(await patch(p._id, { config: null }))).not.toHaveProperty('config')
    })

    it('publishes messages and config into the version; invoke and inject answer renderedMessages and config', async () => {
      const p = await chat()
      const v1 = await publish(p._id)
      expect(v1).toMatchObject({ type: 'chat', messages: MESSAGES, config: CONFIG, template: p.template })
      const invoked = data<InvokeResult>(await key('POST', `/api/v1/prompts/${p._id}/invoke`, { variables }))
      expect(invoked).toMatchObject({ version: 1, versionId: v1._id, config: CONFIG })
      expect(invoked.renderedMessages).toEqual([
        { role: 'system', content: 'You are a librarian. Answer in English.' },
        ...HISTORY,
        { role: 'user', content: 'Where is X?' },
      ])
      expect(invoked.renderedContent).toBe(
        '[system]\nYou are a librarian. Answer in English.\n\n[user]\nHi\n\n[assistant]\nHello! How can I help?\n\n[user]\nWhere is X?',
      )
      // A placeholder value that is not a list of {role, content} messages.
      for (const history of [
        'text',
        [{ role: 'user' }],
        [{ role: 'robot', content: 'x' }],
        { role: 'user', content: 'x' },
      ]) {
        const bad = await refused(
          key('POST', `/api/v1/prompts/${p._id}/invoke`, { variables: { ...variables, history } }),
        )
        expect(bad.code).toBe('VALIDATION_ERROR')
        expect(bad.body.error.details).toEqual([expect.objectContaining({ path: '/body/variables/history' })])
      }
      const missing = await refused(
        key('POST', `/api/v1/prompts/${p._id}/invoke`, { variables: { ...variables, history: undefined } }),
      )
      expect(missing.code).toBe('MISSING_REQUIRED_VARIABLES')

      const injected = data<InjectResult>(
        await key('POST', `/api/v1/prompts/${p._id}/inject`, { variables: { persona: 'P', language: 'L' } }),
      )
      expect(injected).toMatchObject({ unresolvedVariables: ['history', 'question'], config: CONFIG })
      expect(injected.renderedMessages).toEqual([
        { role: 'system', content: 'You are P. Answer in L.' },
        { role: 'user', content: '{{question}}' },
      ])
      // A text prompt's invoke answers what it always did.
      const text = await create({ name: `Text ${newId()}`, template: 'Hi {{a}}' })
      await publish(text._id)
      const plain = data<InvokeResult>(
        await key('POST', `/api/v1/prompts/${text._id}/invoke`, { variables: { a: 1 } }),
      )
      expect(Object.keys(plain).sort()).toEqual([
        'promptId',
        'renderedContent',
        'variables',
        'version',
        'versionId',
      ])
    })

    it('diffs messages by index and config; restore brings back messages and config', async () => {
      const p = await chat()
      const v1 = await publish(p._id)
      data(
        await key('PATCH', `/api/v1/prompts/${p._id}`, {
          messages: [MESSAGES[0], { role: 'user', content: 'Now: {{question}}' }],
          config: { ...CONFIG, temperature: 0.9 },
        }),
      )
      const v2 = await publish(p._id)
      const diff = data<VersionDiff>(
        await key('GET', `/api/v1/prompts/${p._id}/versions/diff?from=${v1._id}&to=${v2._id}`),
      )
      expect(diff.messages).toEqual({
        added: [],
        removed: [{ index: 2, message: MESSAGES[2] }],
        changed: [{ index: 1, before: MESSAGES[1], after: { role: 'user', content: 'Now: {{question}}' } }],
      })
      expect(diff.config).toEqual({
        changed: true,
        before: CONFIG,
        after: { ...CONFIG, temperature: 0.9 },
        // The JSON with sorted keys, line by line: one changed line, three of context before it.
        hunks: [
          {
            oldStart: 3,
            oldLines: 5,
            newStart: 3,
            newLines: 5,
            lines: [
              '   "response_format": {',
              '     "type": "json_object"',
              '   },',
              '-  "temperature": 0.2',
              '+  "temperature": 0.9',
              ' }',
            ],
          },
        ],
      })
      expect(diff.template.added).toBeGreaterThan(0)
      const same = data<VersionDiff>(
        await key('GET', `/api/v1/prompts/${p._id}/versions/diff?from=${v2._id}&to=draft`),
      )
      expect(same.messages).toEqual({ added: [], removed: [], changed: [] })
      expect(same.config.changed).toBe(false)

      data(await key('PATCH', `/api/v1/prompts/${p._id}`, { config: null }))
      const restored = data<Prompt>(
        await key('POST', `/api/v1/prompts/${p._id}/versions/${v1._id}/restore`, {}),
      )
      expect(restored).toMatchObject({
        type: 'chat',
        messages: MESSAGES,
        config: CONFIG,
        template: p.template,
      })
    })

    it('forks and public-forks copy type, messages and config', async () => {
      const p = await chat()
      const v1 = await publish(p._id)
      const fork = data<{ prompt: Prompt; version: PromptVersion }>(
        await user('POST', `/api/v1/prompts/${p._id}/versions/${v1._id}/fork`, { name: `Fork ${newId()}` }),
        201,
      )
      expect(fork.prompt).toMatchObject({ type: 'chat', messages: MESSAGES, config: CONFIG })
      expect(fork.version).toMatchObject({ type: 'chat', messages: MESSAGES, config: CONFIG })
      data(await key('PATCH', `/api/v1/prompts/${p._id}`, { isPublic: true }))
      const listed = data<{ type: string; messages: unknown; config: unknown }>(
        await caller(stack.gateway)('GET', `/api/v1/public/prompts/${p._id}`),
      )
      expect(listed).toMatchObject({ type: 'chat', messages: MESSAGES, config: CONFIG })
      const publicFork = data<Prompt>(
        await user('POST', `/api/v1/public/prompts/${p._id}/fork`, {
          organizationId: admin.organizationId,
          name: `Public fork ${newId()}`,
        }),
        201,
      )
      expect(publicFork).toMatchObject({ type: 'chat', messages: MESSAGES, config: CONFIG })
      const invoked = data<InvokeResult>(
        await key('POST', `/api/v1/prompts/${publicFork._id}/invoke`, { variables }),
      )
      expect(invoked.renderedMessages).toHaveLength(4)
    })

    it('imports chat prompts and config from CSV (optional type, messages and config columns)', async () => {
      const cell = (v: unknown) => `"${JSON.stringify(v).replaceAll('"', '""')}"`
      const tag = `csv-${newId()}`
      const csv = [
        'name,type,template,messages,config,tags',
        `Imported chat,chat,,${cell(MESSAGES)},${cell(CONFIG)},${tag}`,
        `Imported text,,Hi {{a}},,${cell({ model: 'm' })},${tag}`,
        `Huge config,,Hi,,${cell({ blob: 'x'.repeat(17_000) })},${tag}`,
      ].join('\n')
      const accepted = data<{ batchId: string }>(await upload(stack.gateway, admin.token, csv), 202)
      await vi.waitFor(
        async () => {
          const batch = data<{ status: string; created: number; failed: number; errors: unknown[] }>(
            await user('GET', `/api/v1/prompts/import/${accepted.batchId}`),
          )
          expect(batch).toMatchObject({ status: 'completed', created: 2, failed: 1 })
          expect(batch.errors).toEqual([{ row: 4, message: expect.stringMatching(/config.*16384 bytes/) }])
        },
        { timeout: 15_000, interval: 100 },
      )
      const imported = data<{ prompts: Prompt[] }>(await key('GET', `/api/v1/prompts?tags=${tag}`)).prompts
      const byName = new Map(imported.map((p) => [p.name, p]))
      expect(byName.get('Imported chat')).toMatchObject({ type: 'chat', messages: MESSAGES, config: CONFIG })
      expect(byName.get('Imported text')).toMatchObject({
        type: 'text',
        template: 'Hi {{a}}',
        config: { model: 'm' },
      })
    })
  })

  describe('slugs', () => {
    it('takes a given slug or derives one, keeps it on rename, and finds the prompt by it', async () => {
      const slug = `support-${newId()}`
      const p = await chat({ slug })
      expect(p.slug).toBe(slug)
      const derived = await create({ name: 'Ünïcode Name  Here', template: 'x' })
      expect(derived.slug).toMatch(/^unicode-name-here(-\d+)?$/)
      const renamed = data<Prompt>(await key('PATCH', `/api/v1/prompts/${p._id}`, { name: 'Another name' }))
      expect(renamed).toMatchObject({ name: 'Another name', slug })
      expect(data<Prompt>(await key('GET', `/api/v1/prompts/slug/${slug}`))._id).toBe(p._id)
      // The slug can be changed on purpose; the old one then names nothing.
      const moved = `${slug}-v2`
      expect(data<Prompt>(await key('PATCH', `/api/v1/prompts/${p._id}`, { slug: moved })).slug).toBe(moved)
      expect(failure(await key('GET', `/api/v1/prompts/slug/${slug}`), 404)).toBe('NOT_FOUND')
      expect(data<Prompt>(await key('GET', `/api/v1/prompts/slug/${moved}`))._id).toBe(p._id)
      // A user token names the workspace; another workspace's slug is not found.
      expect(
        data<Prompt>(
          await user('GET', `/api/v1/prompts/slug/${moved}?organizationId=${admin.organizationId}`),
        )._id,
      ).toBe(p._id)
    })

    it('refuses an invalid slug (400) and a taken one (409 CONFLICT)', async () => {
      const taken = `taken-${newId()}`
      const first = await create({ name: 'One', template: 'x', slug: taken })
      for (const slug of [
        'Upper',
        'two--hyphens',
        '-lead',
        'trail-',
        'has space',
        'under_score',
        '',
        'a'.repeat(101),
      ]) {
        expect(
          (await refused(key('POST', '/api/v1/prompts', { name: 'Bad slug', template: 'x', slug }))).code,
          slug,
        ).toBe('VALIDATION_ERROR')
      }
      expect(failure(await key('GET', '/api/v1/prompts/slug/Not_Valid'), 400)).toBe('VALIDATION_ERROR')
      expect((await create({ name: 'Max', template: 'x', slug: `a${'-b'.repeat(49)}1` })).slug).toHaveLength(
        100,
      )
      const conflict = await refused(
        key('POST', '/api/v1/prompts', { name: 'Two', template: 'x', slug: taken }),
        409,
      )
      expect(conflict.code).toBe('CONFLICT')
      expect(conflict.body.error.details).toEqual([expect.objectContaining({ path: '/body/slug' })])
      const other = await create({ name: 'Three', template: 'x' })
      expect((await refused(key('PATCH', `/api/v1/prompts/${other._id}`, { slug: taken }), 409)).code).toBe(
        'CONFLICT',
      )
      // Its own slug again is no change.
      expect(data<Prompt>(await key('PATCH', `/api/v1/prompts/${first._id}`, { slug: taken })).slug).toBe(
        taken,
      )
    })

    it('invokes by slug with the same query, body, result and errors as invoke by id', async () => {
      const slug = `by-slug-${newId()}`
      const p = await chat({ slug })
      const path = `/api/v1/prompts/slug/${slug}/invoke`
      expect(failure(await key('POST', path, { variables }), 400)).toBe('NO_PUBLISHED_VERSION')
      const v1 = await publish(p._id)
      const bySlug = await key('POST', path, { variables })
      const byId = await key('POST', `/api/v1/prompts/${p._id}/invoke`, { variables })
      expect(data<InvokeResult>(bySlug)).toEqual(data<InvokeResult>(byId))
      expect(bySlug.headers.get('x-service-version')).toBe('1')
      expect(failure(await key('POST', `${path}?env=production`, { variables }), 404)).toBe(
        'ENVIRONMENT_NOT_SET',
      )
      expect(failure(await key('POST', `${path}?version=9`, { variables }), 404)).toBe('VERSION_NOT_FOUND')
      expect(failure(await key('POST', path, { variables: {} }), 400)).toBe('MISSING_REQUIRED_VARIABLES')
      expect(failure(await key('POST', `/api/v1/prompts/slug/no-such-${newId()}/invoke`, {}), 404)).toBe(
        'NOT_FOUND',
      )
      data(
        await key('POST', `/api/v1/prompts/${p._id}/environments/production/promote`, { versionId: v1._id }),
      )
      await vi.waitFor(async () => {
        expect(data<InvokeResult>(await key('POST', `${path}?env=production`, { variables })).version).toBe(1)
      })
      // A key without prompts:read is refused; no credential is 401.
      const writeOnly = caller(stack.gateway, await apiKey(stack.gateway, admin, ['organization:read']))
      expect(failure(await writeOnly('POST', path, { variables }), 403)).toBe('INSUFFICIENT_SCOPE')
      expect(failure(await caller(stack.gateway)('POST', path, { variables }), 401)).toBe('AUTH_REQUIRED')
    })
  })

  describe('change events', () => {
    it('announces promote, visibility changes and delete on the durable stream', async () => {
      const p = await chat()
      const v1 = await publish(p._id)
      const pin = data<{ promotedBy: string; promotedAt: string }>(
        await key('POST', `/api/v1/prompts/${p._id}/environments/preview/promote`, { versionId: v1._id }),
      )
      data(await key('PATCH', `/api/v1/prompts/${p._id}`, { isPublic: true }))
      // No change of visibility, no event.
      data(await key('PATCH', `/api/v1/prompts/${p._id}`, { isPublic: true, description: 'still public' }))
      data(await key('DELETE', `/api/v1/prompts/${p._id}/publish`))
      data(await key('DELETE', `/api/v1/prompts/${p._id}/publish`))
      data(await key('DELETE', `/api/v1/prompts/${p._id}`))
      await vi.waitFor(() => expect(eventsOf('prompt.deleted', p._id)).toHaveLength(1), { timeout: 15_000 })
      expect(eventsOf<EnvironmentPromotedEvent>('environment.promoted', p._id)).toMatchObject([
        {
          organizationId: admin.organizationId,
          data: {
            promptId: p._id,
            slug: p.slug,
            environment: 'preview',
            versionId: v1._id,
            version: 1,
            promotedBy: pin.promotedBy,
          },
        },
      ])
      expect(
        eventsOf<PromptVisibilityChangedEvent>('prompt.visibility.changed', p._id).map(
          (e) => e.data.isPublic,
        ),
      ).toEqual([true, false])
      expect(eventsOf<PromptDeletedEvent>('prompt.deleted', p._id)).toMatchObject([
        { type: 'prompt.deleted', data: { promptId: p._id, slug: p.slug } },
      ])
      // Each event travels under its own id as message id.
      for (const m of tap.received.filter(
        (x) => (x.data as { data?: { promptId?: string } }).data?.promptId === p._id,
      )) {
        const event = m.data as { id: string; type: string }
        if (event.type !== 'version.published') expect(m.msgId).toBe(event.id)
      }
    })
  })

  it('answered every request above as the OpenAPI document describes', async () => {
    expect(audit.seen.length).toBeGreaterThan(20)
    expect(await audit.problems()).toEqual([])
  })
})
