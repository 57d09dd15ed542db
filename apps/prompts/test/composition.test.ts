import { type PromptDependencyChangedEvent, SUBJECTS } from '@pm/contracts'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { type Harness, harness } from './helpers.ts'

/** `prompt.dependency.changed` through the outbox, and a change of slug of an included prompt (DESIGN section 12). */
describe('composition in the prompts service', () => {
  let t: Harness
  const received: PromptDependencyChangedEvent[] = []

  beforeAll(async () => {
    t = await harness()
    await t.bus.consume(SUBJECTS.promptDependencyChanged, 'test-dependency', async (data) => {
      received.push(data as PromptDependencyChangedEvent)
    })
  })
  afterAll(async () => {
    await t?.close()
  })

  const req = async (method: 'POST' | 'PATCH', url: string, payload: unknown, status: number) => {
    const res = await t.app.inject({ method, url, headers: t.as(), payload: payload as object })
    expect(res.statusCode, res.body).toBe(status)
    return res.json<{ _id: string }>()
  }
  const create = (slug: string, template: string) =>
    req('POST', '/api/v1/prompts', { name: slug, slug, template }, 201)
  const publish = (id: string) => req('POST', `/api/v1/prompts/${id}/publish`, {}, 201)

  it('is written for the prompts whose render moves with a publish or promote of one they include', async () => {
    const child = await create('child', 'child')
    const latest = await create('uses-latest', '{{> child}}')
    const prod = await create('uses-production', '{{> child@production}}')
    await create('uses-v1', '{{> child@v1}}')
    const v1 = await publish(child._id)
    await vi.waitFor(() => expect(received).toHaveLength(1))
    expect(received[0]?.data).toEqual({
      promptId: latest._id,
      slug: 'uses-latest',
      includedSlug: 'child',
      via: 'latest',
    })
    await req(
      'POST',
      `/api/v1/prompts/${child._id}/environments/production/promote`,
      { versionId: v1._id },
      200,
    )
    await vi.waitFor(() => expect(received).toHaveLength(2))
    expect(received[1]?.data).toMatchObject({ promptId: prod._id, via: 'production' })
    expect(received[1]?.type).toBe('prompt.dependency.changed')
  })

  it("checks a chat prompt's messages at save like a template, and lists it as a dependent", async () => {
    const chat = (slug: string, messages: object[]) =>
      t.app.inject({
        method: 'POST',
        url: '/api/v1/prompts',
        headers: t.as(),
        payload: { name: slug, slug, type: 'chat', messages },
      })
    const detail = (body: string) =>
      (
        JSON.parse(body) as {
          error: { code: string; details: Array<{ path: string; message: string; chain?: string }> }
        }
      ).error
    const tone = await create('tone', 'Be {{style}}.')
    // A syntax error, a missing slug, a chat prompt: 400 naming the message.
    const unclosed = await chat('c-unclosed', [
      { role: 'system', content: 'fine' },
      { role: 'user', content: '{{#if vip}}VIP' },
    ])
    expect(unclosed.statusCode).toBe(400)
    expect(detail(unclosed.body).details[0]).toMatchObject({ path: '/body/messages/1/content' })
    expect(detail(unclosed.body).details[0]?.message).toContain('{{#if}} is never closed')
    // A block does not span messages (each message's content is one template).
    const spanning = await chat('c-span', [
      { role: 'system', content: '{{#if vip}}' },
      { role: 'user', content: '{{/if}}' },
    ])
    expect(detail(spanning.body).details[0]?.path).toBe('/body/messages/0/content')
    const missing = await chat('c-missing', [
      { type: 'placeholder', name: 'history' },
      { role: 'user', content: '{{> nowhere}}' },
    ])
    expect(detail(missing.body).details[0]).toMatchObject({
      path: '/body/messages/1/content',
      chain: 'c-missing -> nowhere',
    })
    const ok = await chat('c-ok', [
      { role: 'system', content: '{{> tone}}{{#if vip}} VIP{{/if}}' },
      { role: 'user', content: '{{#each items}}{{this}}{{/each}} {{question}}' },
    ])
    expect(ok.statusCode, ok.body).toBe(201)
    const created = ok.json<{ _id: string; variables: Array<{ name: string }> }>()
    // Block operands are variables; the included prompt's stay its own (merged at render).
    expect(created.variables.map((v) => v.name)).toEqual(['vip', 'items', 'question'])
    const ofChat = await chat('c-of-chat', [{ role: 'user', content: '{{> c-ok}}' }])
    expect(detail(ofChat.body).details[0]?.message).toContain('chat prompt')
    const self = await chat('c-self', [{ role: 'user', content: '{{> c-self}}' }])
    expect(detail(self.body).details[0]?.chain).toBe('c-self -> c-self')
    // 50 includes over the whole prompt, not per message.
    const leaf = '{{> tone}}'
    const many = await chat('c-many', [
      { role: 'system', content: leaf.repeat(25) },
      { role: 'user', content: leaf.repeat(26) },
    ])
    expect(detail(many.body).details[0]?.message).toContain('more than 50 includes')
    // An update of the messages is checked too; the draft is kept.
    const bad = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/prompts/${created._id}`,
      headers: t.as(),
      payload: { messages: [{ role: 'user', content: 'a {{else}} b' }] },
    })
    expect(bad.statusCode).toBe(400)
    expect(detail(bad.body).details[0]?.path).toBe('/body/messages/0/content')
    // The chat prompt includes tone: it is a dependent, and tone's delete is refused.
    const dependents = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${tone._id}/dependents`,
      headers: t.as(),
    })
    expect(dependents.json<{ dependents: unknown[] }>().dependents).toEqual([
      { promptId: created._id, slug: 'c-ok', name: 'c-ok', in: ['draft'] },
    ])
    const del = await t.app.inject({ method: 'DELETE', url: `/api/v1/prompts/${tone._id}`, headers: t.as() })
    expect(del.statusCode).toBe(409)
  })

  it('refuses to change the slug of a prompt others include (409 naming them) unless forced', async () => {
    const shared = await create('shared', 'shared text')
    const user = await create('shared-user', 'A {{> shared}} B')
    const patch = (query: string, payload: object) =>
      t.app.inject({
        method: 'PATCH',
        url: `/api/v1/prompts/${shared._id}${query}`,
        headers: t.as(),
        payload,
      })
    const refused = await patch('', { slug: 'shared-renamed' })
    expect(refused.statusCode, refused.body).toBe(409)
    const error = refused.json<{ error: { code: string; message: string; details: unknown } }>().error
    expect(error.code).toBe('CONFLICT')
    expect(error.message).toContain('shared-user')
    expect(error.details).toEqual({
      dependents: [{ promptId: user._id, slug: 'shared-user', name: 'shared-user', in: ['draft'] }],
    })
    // Nothing changed; a save that keeps the slug (or names it as it is) is not refused.
    const kept = await t.app.inject({ method: 'GET', url: `/api/v1/prompts/${shared._id}`, headers: t.as() })
    expect(kept.json<{ slug: string }>().slug).toBe('shared')
    expect((await patch('', { slug: 'shared', name: 'Shared', template: 'new text' })).statusCode).toBe(200)
    expect((await patch('?force=false', { slug: 'shared-renamed' })).statusCode).toBe(409)
    // Forced: the slug changes (the includer's {{> shared}} now names nothing until edited).
    const forced = await patch('?force=true', { slug: 'shared-renamed' })
    expect(forced.statusCode, forced.body).toBe(200)
    expect(forced.json<{ slug: string }>().slug).toBe('shared-renamed')
    const after = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${shared._id}/dependents`,
      headers: t.as(),
    })
    expect(after.json<{ dependents: unknown[] }>().dependents).toEqual([])
    // A prompt nobody includes changes its slug freely; an unknown query parameter is refused.
    const alone = await create('alone', 'alone')
    const free = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/prompts/${alone._id}`,
      headers: t.as(),
      payload: { slug: 'alone-2' },
    })
    expect(free.statusCode, free.body).toBe(200)
    const unknown = await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/prompts/${alone._id}?forse=true`,
      headers: t.as(),
      payload: { slug: 'alone-3' },
    })
    expect(unknown.statusCode).toBe(400)
  })

  describe('the save-time checks on every way a draft or a slug changes', () => {
    const call = (method: 'POST' | 'PATCH' | 'DELETE', url: string, payload?: object) =>
      t.app.inject({ method, url, headers: t.as(), ...(payload ? { payload } : {}) })
    const errorOf = (body: string) => {
      const { requestId: _, ...error } = (
        JSON.parse(body) as { error: { code: string; message: string; details: unknown; requestId: string } }
      ).error
      return error
    }

    it('refuses a restore that would close a cycle, as PATCH refuses the same template', async () => {
      const rb = await create('rb', 'plain')
      const ra = await create('ra', 'ra:{{> rb}}')
      const v1 = await publish(ra._id)
      await req('PATCH', `/api/v1/prompts/${ra._id}`, { template: 'plain' }, 200)
      await publish(ra._id)
      await req('PATCH', `/api/v1/prompts/${rb._id}`, { template: 'rb:{{> ra}}' }, 200)
      const patch = await call('PATCH', `/api/v1/prompts/${ra._id}`, { template: 'ra:{{> rb}}' })
      expect(patch.statusCode).toBe(400)
      const restore = await call('POST', `/api/v1/prompts/${ra._id}/versions/${v1._id}/restore`, {})
      expect(restore.statusCode, restore.body).toBe(400)
      expect(errorOf(restore.body)).toEqual(errorOf(patch.body))
      expect(errorOf(restore.body).message).toContain('cycle: ra -> rb -> ra')
      const kept = await t.app.inject({ method: 'GET', url: `/api/v1/prompts/${ra._id}`, headers: t.as() })
      expect(kept.json<{ template: string }>().template).toBe('plain')
    })

    it('checks a prompt created without a slug against the slug it really gets', async () => {
      await create('wrapped', 'wrapped text')
      // Its name would slugify to `wrapped`, which is taken: it gets `wrapped-2`, and no cycle.
      const res = await call('POST', '/api/v1/prompts', { name: 'Wrapped', template: 'wraps {{> wrapped}}' })
      expect(res.statusCode, res.body).toBe(201)
      expect(res.json<{ slug: string }>().slug).toBe('wrapped-2')
      // A free slug that a dangling reference names is this prompt's: a real cycle.
      const target = await create('late-target', 'x')
      await create('late-user', 'u {{> late-target}}')
      expect((await call('DELETE', `/api/v1/prompts/${target._id}?force=true`)).statusCode).toBe(200)
      const cycle = await call('POST', '/api/v1/prompts', {
        name: 'Late Target',
        template: '{{> late-user}}',
      })
      expect(cycle.statusCode, cycle.body).toBe(400)
      expect(errorOf(cycle.body).message).toContain('cycle: late-target -> late-user -> late-target')
    })

    it('refuses a change of slug alone that closes a cycle through a dangling reference', async () => {
      const gone = await create('gone-child', 'x')
      await create('holder', 'h {{> gone-child}}')
      const top = await create('top-of-holder', 't {{> holder}}')
      const dangling = await create('dangling-user', 'd {{> gone-child}}')
      expect((await call('DELETE', `/api/v1/prompts/${gone._id}?force=true`)).statusCode).toBe(200)
      const renamed = await call('PATCH', `/api/v1/prompts/${top._id}`, { slug: 'gone-child' })
      expect(renamed.statusCode, renamed.body).toBe(400)
      expect(errorOf(renamed.body)).toMatchObject({
        code: 'VALIDATION_ERROR',
        message: expect.stringContaining('cycle: gone-child -> holder -> gone-child'),
      })
      // Only a cycle: a draft naming a missing prompt still changes its slug.
      const other = await call('PATCH', `/api/v1/prompts/${top._id}`, { slug: 'top-renamed' })
      expect(other.statusCode, other.body).toBe(200)
      expect(
        (await call('PATCH', `/api/v1/prompts/${dangling._id}`, { slug: 'dangling-2' })).statusCode,
      ).toBe(200)
    })
  })
})
