import type {
  Environments,
  InvokeResult,
  Pin,
  Prompt,
  PromptVersion,
  PublicPrompt,
  Variable,
  VersionPublishedEvent,
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
  register,
  type Session,
  type Tapped,
  tapEvents,
} from '../src/prompts.ts'
import { auditResponses, type ResponseAudit } from '../src/openapi.ts'
import { type Stack, startStack } from '../src/stack.ts'

interface PromptList {
  prompts: Prompt[]
  pagination: { page: number; limit: number; total: number; totalPages: number; hasNextPage: boolean }
  summary: { total: number; public: number; private: number; published: number; unpublished: number }
}
type PromptWithStale = Prompt & { staleVariables?: string[] }
interface ForkResult {
  prompt: Prompt
  version: PromptVersion
}
interface VersionDiff {
  from: string
  to: string
  template: {
    hunks: Array<{ oldStart: number; oldLines: number; newStart: number; newLines: number; lines: string[] }>
    added: number
    removed: number
  }
  variables: {
    added: Variable[]
    removed: Variable[]
    changed: Array<{ name: string; before: Variable; after: Variable }>
  }
}

/**
 * Prompts and versions through the gateway (distributed mode: five processes, real NATS and
 * Redis): every move of spec section 3, the invoke rules of section 4, fork rules 1 to 5 and
 * the public fork, the limits of section 8 and the versioning promises of section 9.
 */
describe('prompts and versions through the gateway', () => {
  let stack: Stack
  let audit: ResponseAudit
  let admin: Session
  /** The admin's user token. */
  let user: Caller
  /** An API key of the admin's workspace with prompts:read and prompts:write. */
  let key: Caller
  let readOnly: Caller
  let anonymous: Caller
  let tap: { received: Tapped[]; bus: { close(): Promise<void> } }

  const published = (versionId: string) =>
    tap.received.filter((m) => m.msgId === versionId).map((m) => m.data as VersionPublishedEvent)

  async function create(who: Caller, body: Record<string, unknown>): Promise<Prompt> {
    return data<Prompt>(await who('POST', '/api/v1/prompts', { template: 'Hello {{name}}', ...body }), 201)
  }
  async function publish(id: string, body: unknown = {}): Promise<PromptVersion> {
    return data<PromptVersion>(await user('POST', `/api/v1/prompts/${id}/publish`, body), 201)
  }
  async function edit(who: Caller, id: string, body: Record<string, unknown>): Promise<PromptWithStale> {
    return data<PromptWithStale>(await who('PATCH', `/api/v1/prompts/${id}`, body))
  }
  async function invoke(id: string, query = '', body: unknown = { variables: { name: 'Ada' } }) {
    return key('POST', `/api/v1/prompts/${id}/invoke${query}`, body)
  }

  beforeAll(async () => {
    stack = await startStack({ AUTH_ALLOW_SIGNUP: 'true' })
    audit = auditResponses(stack.gateway)
    admin = await login(stack.gateway)
    user = caller(stack.gateway, admin.token)
    key = caller(stack.gateway, await apiKey(stack.gateway, admin, ['prompts:read', 'prompts:write']))
    readOnly = caller(stack.gateway, await apiKey(stack.gateway, admin, ['prompts:read']))
    anonymous = caller(stack.gateway)
    tap = await tapEvents()
  }, 120_000)

  afterAll(async () => {
    audit?.stop()
    await tap?.bus.close()
    await stack?.stop()
  })

  describe('prompts', () => {
    it('lists with page, limit, search, tags, visibility and organizationId, with pagination and summary', async () => {
      const workspace = data<{ _id: string }>(
        await user('POST', '/api/v1/organizations', { name: 'Listing' }),
        201,
      )
      const org = workspace._id
      const inOrg = (path: string) => `${path}${path.includes('?') ? '&' : '?'}organizationId=${org}`
      const alpha = await create(user, { organizationId: org, name: 'Alpha one', tags: ['x', 'y'] })
      await create(user, { organizationId: org, name: 'Alpha two', tags: ['y'] })
      await create(user, {
        organizationId: org,
        name: 'Beta',
        description: 'about alpha things',
        tags: ['z'],
      })
      data(await user('POST', `/api/v1/prompts/${alpha._id}/publish`, { organizationId: org }), 201)
      data(await user('PATCH', `/api/v1/prompts/${alpha._id}`, { organizationId: org, isPublic: true }))

      const page1 = data<PromptList>(await user('GET', inOrg('/api/v1/prompts?limit=2')))
      expect(page1.prompts).toHaveLength(2)
      expect(page1.pagination).toEqual({ page: 1, limit: 2, total: 3, totalPages: 2, hasNextPage: true })
      expect(page1.summary).toEqual({ total: 3, public: 1, private: 2, published: 1, unpublished: 2 })
      const page2 = data<PromptList>(await user('GET', inOrg('/api/v1/prompts?limit=2&page=2')))
      expect(page2.prompts).toHaveLength(1)
      expect(page2.pagination).toMatchObject({ page: 2, hasNextPage: false })
      // Newest first, no prompt on two pages.
      expect(new Set([...page1.prompts, ...page2.prompts].map((p) => p._id)).size).toBe(3)
      const created = [...page1.prompts, ...page2.prompts].map((p) => Date.parse(p.createdAt))
      expect(created).toEqual([...created].sort((a, b) => b - a))

      const names = async (query: string) =>
        data<PromptList>(await user('GET', inOrg(`/api/v1/prompts?${query}`)))
          .prompts.map((p) => p.name)
          .sort()
      expect(await names('search=alpha')).toEqual(['Alpha one', 'Alpha two', 'Beta'])
      expect(await names('search=TWO')).toEqual(['Alpha two'])
      expect(await names('tags=x')).toEqual(['Alpha one'])
      expect(await names('tags=x,z')).toEqual(['Alpha one', 'Beta'])
      expect(await names('visibility=public')).toEqual(['Alpha one'])
      expect(await names('visibility=private')).toEqual(['Alpha two', 'Beta'])
      expect(await names('visibility=all')).toEqual(['Alpha one', 'Alpha two', 'Beta'])
      // The summary counts the workspace, whatever the filter.
      const filtered = data<PromptList>(await user('GET', inOrg('/api/v1/prompts?visibility=public')))
      expect(filtered.pagination.total).toBe(1)
      expect(filtered.summary.total).toBe(3)

      // The default page size is 20; a page size over 100, page 0 and an unknown visibility are refused.
      expect(data<PromptList>(await user('GET', inOrg('/api/v1/prompts'))).pagination.limit).toBe(20)
      expect(data<PromptList>(await user('GET', inOrg('/api/v1/prompts?limit=100'))).pagination.limit).toBe(
        100,
      )
      expect(failure(await user('GET', inOrg('/api/v1/prompts?limit=101')), 400)).toBe('VALIDATION_ERROR')
      expect(failure(await user('GET', inOrg('/api/v1/prompts?page=0')), 400)).toBe('VALIDATION_ERROR')
      expect(failure(await user('GET', inOrg('/api/v1/prompts?visibility=secret')), 400)).toBe(
        'VALIDATION_ERROR',
      )

      // Without organizationId the token's own workspace is listed; another user's workspace is a 404.
      const own = data<PromptList>(await user('GET', '/api/v1/prompts?limit=100'))
      expect(own.prompts.some((p) => p.organizationId === org)).toBe(false)
      const stranger = await register(stack.gateway, 'Stranger')
      expect(
        failure(await user('GET', `/api/v1/prompts?organizationId=${stranger.organizationId}`), 404),
      ).toBe('NOT_FOUND')
      // An API key lists its own workspace only; asking for another is a 404.
      expect(failure(await key('GET', `/api/v1/prompts?organizationId=${org}`), 404)).toBe('NOT_FOUND')
    })

    it('creates, reads, updates (with staleVariables and variables routes) and deletes', async () => {
      const p = await create(key, {
        name: '  Welcome Mail ',
        description: 'd',
        tags: ['mail'],
        template: 'Dear {{ name }}, see {{link}}',
      })
      expect(p).toMatchObject({
        name: 'Welcome Mail',
        slug: 'welcome-mail',
        isPublic: false,
        versionCount: 0,
        currentVersionId: null,
        organizationId: admin.organizationId,
      })
      expect(p.variables).toEqual([
        { name: 'name', required: true },
        { name: 'link', required: true },
      ])
      expect((await create(key, { name: 'Welcome mail' })).slug).toBe('welcome-mail-2')
      expect(data<Prompt>(await key('GET', `/api/v1/prompts/${p._id}`))._id).toBe(p._id)

      // Save: the template drops {{link}} and adds {{sender}}; link is kept and reported stale.
      const saved = await edit(key, p._id, { template: 'Dear {{name}}, from {{sender}}' })
      expect(saved.staleVariables).toEqual(['link'])
      expect(saved.variables.map((v) => v.name)).toEqual(['name', 'link', 'sender'])
      // A rename keeps the slug: code refers to prompts by it (DESIGN section 9).
      const renamed = await edit(key, p._id, { name: 'Welcome Letter' })
      expect(renamed).toMatchObject({ name: 'Welcome Letter', slug: 'welcome-mail' })
      expect(renamed).not.toHaveProperty('staleVariables')
      expect(failure(await key('PATCH', `/api/v1/prompts/${p._id}`, { colour: 'red' }), 400)).toBe(
        'VALIDATION_ERROR',
      )
      expect(failure(await key('PATCH', `/api/v1/prompts/${p._id}`, { isPublic: true }), 400)).toBe(
        'NO_PUBLISHED_VERSION',
      )
      expect(failure(await readOnly('PATCH', `/api/v1/prompts/${p._id}`, { name: 'x' }), 403)).toBe(
        'INSUFFICIENT_SCOPE',
      )

      // Variables: read the list, change one variable's metadata.
      const vars = data<Variable[]>(await readOnly('GET', `/api/v1/prompts/${p._id}/variables`))
      expect(vars.map((v) => v.name)).toEqual(['name', 'link', 'sender'])
      const changed = data<Prompt>(
        await key('PATCH', `/api/v1/prompts/${p._id}/variables/sender`, {
          required: false,
          defaultValue: 'the team',
          description: 'who signs',
        }),
      )
      expect(changed.variables[2]).toEqual({
        name: 'sender',
        required: false,
        defaultValue: 'the team',
        description: 'who signs',
      })
      const cleared = data<Prompt>(
        await key('PATCH', `/api/v1/prompts/${p._id}/variables/sender`, { description: null }),
      )
      expect(cleared.variables[2]).toEqual({ name: 'sender', required: false, defaultValue: 'the team' })
      expect(
        failure(await key('PATCH', `/api/v1/prompts/${p._id}/variables/nope`, { required: true }), 404),
      ).toBe('NOT_FOUND')

      // Another workspace's prompt is a 404, like one that does not exist.
      const stranger = await register(stack.gateway, 'Other')
      const theirs = caller(stack.gateway, stranger.token)
      expect(failure(await theirs('GET', `/api/v1/prompts/${p._id}`), 404)).toBe('NOT_FOUND')
      expect(failure(await theirs('DELETE', `/api/v1/prompts/${p._id}`), 404)).toBe('NOT_FOUND')
      expect(failure(await key('GET', `/api/v1/prompts/${newId()}`), 404)).toBe('NOT_FOUND')

      // Delete removes the prompt, its versions and pins.
      const v1 = await publish(p._id)
      data(
        await key('POST', `/api/v1/prompts/${p._id}/environments/production/promote`, { versionId: v1._id }),
      )
      expect(data(await key('DELETE', `/api/v1/prompts/${p._id}`))).toEqual({ _id: p._id, deleted: true })
      expect(failure(await key('GET', `/api/v1/prompts/${p._id}`), 404)).toBe('NOT_FOUND')
      expect(failure(await key('GET', `/api/v1/prompts/${p._id}/versions/${v1._id}`), 404)).toBe('NOT_FOUND')
      expect(failure(await invoke(p._id, '?env=production'), 404)).toBe('NOT_FOUND')
      expect(failure(await key('DELETE', `/api/v1/prompts/${p._id}`), 404)).toBe('NOT_FOUND')
    })
  })

  describe('the moves of spec section 3', () => {
    it('save changes the draft only: no version record', async () => {
      const p = await create(key, { name: 'Save only' })
      await edit(key, p._id, { template: 'Changed {{name}}' })
      await edit(key, p._id, { template: 'Changed again {{name}}' })
      expect(
        data<{ versions: PromptVersion[] }>(await key('GET', `/api/v1/prompts/${p._id}/versions`)),
      ).toEqual({
        versions: [],
      })
      expect(data<Prompt>(await key('GET', `/api/v1/prompts/${p._id}`))).toMatchObject({
        versionCount: 0,
        currentVersionId: null,
        template: 'Changed again {{name}}',
      })
    })

    it('publish snapshots the draft as the next PUBLISHED version and announces version.published', async () => {
      const p = await create(key, { name: 'Publishing', template: 'One {{name}}' })
      expect(failure(await key('POST', `/api/v1/prompts/${p._id}/publish`, {}), 403)).toBe(
        'USER_TOKEN_REQUIRED',
      )
      const v1 = await publish(p._id, { changeLog: 'first cut' })
      expect(v1).toMatchObject({
        promptId: p._id,
        version: 1,
        status: 'PUBLISHED',
        template: 'One {{name}}',
        variables: [{ name: 'name', required: true }],
        changeLog: 'first cut',
        createdBy: { _id: admin.userId },
      })
      expect(Date.parse(v1.publishedAt)).not.toBeNaN()
      const after = data<Prompt>(await key('GET', `/api/v1/prompts/${p._id}`))
      expect(after).toMatchObject({ versionCount: 1, currentVersionId: v1._id })

      // The draft stays editable; the snapshot does not move.
      await edit(key, p._id, { template: 'Two {{name}}' })
      expect(data<PromptVersion>(await key('GET', `/api/v1/prompts/${p._id}/versions/${v1._id}`))).toEqual(v1)
      const v2 = await publish(p._id)
      expect(v2).toMatchObject({ version: 2, template: 'Two {{name}}', changeLog: '' })

      await vi.waitFor(
        () => {
          expect(published(v1._id)).toHaveLength(1)
          expect(published(v2._id)).toHaveLength(1)
        },
        { timeout: 10_000, interval: 50 },
      )
      expect(published(v1._id)[0]).toMatchObject({
        type: 'version.published',
        organizationId: admin.organizationId,
        data: {
          promptId: p._id,
          name: 'Publishing',
          slug: 'publishing',
          versionId: v1._id,
          version: 1,
          publishedAt: v1.publishedAt,
          publishedBy: admin.userId,
          changeLog: 'first cut',
        },
      })
    })

    it('save-and-publish publishes the server-side draft, takes no content, and announces it', async () => {
      const p = await create(key, { name: 'Save and publish', template: 'Draft {{name}}' })
      expect(failure(await key('POST', `/api/v1/prompts/${p._id}/save-and-publish`), 403)).toBe(
        'USER_TOKEN_REQUIRED',
      )
      expect(
        failure(
          await user('POST', `/api/v1/prompts/${p._id}/save-and-publish`, { template: 'Client {{x}}' }),
          400,
        ),
      ).toBe('VALIDATION_ERROR')
      await edit(key, p._id, { template: 'Server draft {{name}}' })
      // No payload at all: the request has no body.
      const v1 = data<PromptVersion>(await user('POST', `/api/v1/prompts/${p._id}/save-and-publish`), 201)
      expect(v1).toMatchObject({ version: 1, status: 'PUBLISHED', template: 'Server draft {{name}}' })
      await vi.waitFor(() => expect(published(v1._id)).toHaveLength(1), { timeout: 10_000, interval: 50 })
    })

    it('restore copies a version onto the draft; history and currentVersionId stay', async () => {
      const p = await create(key, {
        name: 'Restoring',
        template: 'First {{name}}',
        variables: [{ name: 'name', required: false }],
      })
      const v1 = await publish(p._id)
      await edit(key, p._id, { template: 'Second {{name}} {{extra}}' })
      const v2 = await publish(p._id)
      await edit(key, p._id, { template: 'Unsaved idea' })
      const restored = data<Prompt>(await key('POST', `/api/v1/prompts/${p._id}/versions/${v1._id}/restore`))
      expect(restored).toMatchObject({
        template: 'First {{name}}',
        variables: v1.variables,
        versionCount: 2,
        currentVersionId: v2._id,
      })
      const versions = data<{ versions: PromptVersion[] }>(
        await key('GET', `/api/v1/prompts/${p._id}/versions`),
      )
      expect(versions.versions).toEqual([v2, v1])
      // Rendering still uses the current version, not the restored draft.
      expect(
        data<InvokeResult>(await invoke(p._id, '', { variables: { name: 'A', extra: 'B' } })).renderedContent,
      ).toBe('Second A B')
      // A version of another prompt does not belong to this one.
      const other = await create(key, { name: 'Other prompt' })
      const foreign = await publish(other._id)
      expect(
        failure(await key('POST', `/api/v1/prompts/${p._id}/versions/${foreign._id}/restore`), 404),
      ).toBe('VERSION_NOT_FOUND')
      expect(
        failure(await readOnly('POST', `/api/v1/prompts/${p._id}/versions/${v1._id}/restore`), 403),
      ).toBe('INSUFFICIENT_SCOPE')
    })

    it('DELETE publish clears public visibility and the catalog entry, keeping history (API key or user)', async () => {
      const p = await create(key, { name: 'Unpublishing' })
      const v1 = await publish(p._id)
      await edit(key, p._id, { isPublic: true })
      expect(data<PublicPrompt>(await anonymous('GET', `/api/v1/public/prompts/${p._id}`)).versionId).toBe(
        v1._id,
      )

      const cleared = data<Prompt>(await key('DELETE', `/api/v1/prompts/${p._id}/publish`))
      expect(cleared).toMatchObject({ isPublic: false, versionCount: 1, currentVersionId: v1._id })
      expect(failure(await anonymous('GET', `/api/v1/public/prompts/${p._id}`), 404)).toBe('NOT_FOUND')
      const catalog = data<{ prompts: PublicPrompt[] }>(
        await anonymous('GET', '/api/v1/public/prompts?search=Unpublishing'),
      )
      expect(catalog.prompts.map((e) => e._id)).not.toContain(p._id)
      expect(
        failure(
          await anonymous('POST', `/api/v1/public/prompts/${p._id}/invoke`, { variables: { name: 'x' } }),
          404,
        ),
      ).toBe('NOT_FOUND')
      expect(
        data<{ versions: PromptVersion[] }>(await key('GET', `/api/v1/prompts/${p._id}/versions`)).versions,
      ).toEqual([v1])
      // The workspace can still render it.
      expect(data<InvokeResult>(await invoke(p._id)).version).toBe(1)
      // With a user token too; clearing an already private prompt is harmless.
      expect(data<Prompt>(await user('DELETE', `/api/v1/prompts/${p._id}/publish`)).isPublic).toBe(false)
      expect(failure(await readOnly('DELETE', `/api/v1/prompts/${p._id}/publish`), 403)).toBe(
        'INSUFFICIENT_SCOPE',
      )
    })

    it('promote pins a PUBLISHED version to preview or production; invoke with env uses the pin', async () => {
      const p = await create(key, { name: 'Environments', template: 'v1 {{name}}' })
      const v1 = await publish(p._id)
      await edit(key, p._id, { template: 'v2 {{name}}' })
      const v2 = await publish(p._id)
      expect(data<Environments>(await readOnly('GET', `/api/v1/prompts/${p._id}/environments`))).toEqual({
        preview: null,
        production: null,
      })
      expect(failure(await invoke(p._id, '?env=production'), 404)).toBe('ENVIRONMENT_NOT_SET')

      // An API key with prompts:write promotes; so does a user.
      const pin = data<Pin>(
        await key('POST', `/api/v1/prompts/${p._id}/environments/production/promote`, { versionId: v1._id }),
      )
      expect(pin).toMatchObject({ versionId: v1._id, version: 1 })
      expect(Date.parse(pin.promotedAt)).not.toBeNaN()
      const previewPin = data<Pin>(
        await user('POST', `/api/v1/prompts/${p._id}/environments/preview/promote`, { versionId: v2._id }),
      )
      expect(previewPin).toMatchObject({ versionId: v2._id, version: 2, promotedBy: admin.userId })
      expect(data<Environments>(await key('GET', `/api/v1/prompts/${p._id}/environments`))).toEqual({
        production: pin,
        preview: previewPin,
      })

      const prod = await invoke(p._id, '?env=production')
      expect(data<InvokeResult>(prod)).toMatchObject({
        renderedContent: 'v1 Ada',
        version: 1,
        versionId: v1._id,
      })
      expect(prod.headers.get('x-service-version')).toBe('1')
      expect(data<InvokeResult>(await invoke(p._id, '?env=preview')).renderedContent).toBe('v2 Ada')
      expect(data<InvokeResult>(await invoke(p._id)).renderedContent).toBe('v2 Ada')

      // Promoting again moves the pin; render's cache follows the change event (well before its TTL).
      data(
        await key('POST', `/api/v1/prompts/${p._id}/environments/production/promote`, { versionId: v2._id }),
      )
      await vi.waitFor(
        async () => expect(data<InvokeResult>(await invoke(p._id, '?env=production')).version).toBe(2),
        { timeout: 2_000, interval: 20 },
      )

      const other = await create(key, { name: 'Not this one' })
      const foreign = await publish(other._id)
      expect(
        failure(
          await key('POST', `/api/v1/prompts/${p._id}/environments/preview/promote`, {
            versionId: foreign._id,
          }),
          404,
        ),
      ).toBe('VERSION_NOT_FOUND')
      expect(
        failure(
          await key('POST', `/api/v1/prompts/${p._id}/environments/staging/promote`, { versionId: v1._id }),
          400,
        ),
      ).toBe('VALIDATION_ERROR')
      expect(
        failure(await key('POST', `/api/v1/prompts/${p._id}/environments/preview/promote`, {}), 400),
      ).toBe('VALIDATION_ERROR')
      expect(
        failure(
          await readOnly('POST', `/api/v1/prompts/${p._id}/environments/preview/promote`, {
            versionId: v1._id,
          }),
          403,
        ),
      ).toBe('INSUFFICIENT_SCOPE')
    })
  })

  describe('invoke resolution (spec section 4)', () => {
    it('follows rules 1 to 4', async () => {
      const p = await create(key, {
        name: 'Invoke rules',
        template: '{{greeting}}, {{name}}!',
        variables: [{ name: 'greeting', required: false, defaultValue: 'Hello' }],
      })
      // Rule 2: nothing published yet.
      expect(failure(await invoke(p._id), 400)).toBe('NO_PUBLISHED_VERSION')
      const v1 = await publish(p._id)
      await edit(key, p._id, { template: 'Version two says {{greeting}} to {{name}}' })
      const v2 = await publish(p._id)
      await edit(key, p._id, { template: 'DRAFT {{name}}' })

      // Rule 1: the current version, never the draft.
      const current = await invoke(p._id)
      expect(data<InvokeResult>(current)).toMatchObject({
        renderedContent: 'Version two says Hello to Ada',
        version: 2,
        versionId: v2._id,
        promptId: p._id,
        variables: { name: 'Ada' },
      })
      expect(current.headers.get('x-service-version')).toBe('2')

      // Rule 3: version N (query or body) and env pins.
      expect(data<InvokeResult>(await invoke(p._id, '?version=1')).renderedContent).toBe('Hello, Ada!')
      expect(
        data<InvokeResult>(await invoke(p._id, '', { version: 1, variables: { name: 'Bo', greeting: 'Hi' } }))
          .renderedContent,
      ).toBe('Hi, Bo!')
      expect(failure(await invoke(p._id, '?version=3'), 404)).toBe('VERSION_NOT_FOUND')
      expect(failure(await invoke(p._id, '?version=1', { version: 2, variables: { name: 'x' } }), 400)).toBe(
        'VALIDATION_ERROR',
      )
      expect(failure(await invoke(p._id, '?env=preview'), 404)).toBe('ENVIRONMENT_NOT_SET')
      data(await key('POST', `/api/v1/prompts/${p._id}/environments/preview/promote`, { versionId: v1._id }))
      expect(data<InvokeResult>(await invoke(p._id, '?env=preview')).version).toBe(1)
      expect(failure(await invoke(p._id, '?env=preview&version=2'), 400)).toBe('VALIDATION_ERROR')
      expect(failure(await invoke(p._id, '?env=staging'), 400)).toBe('VALIDATION_ERROR')

      // Rule 4: a missing required variable fails; an empty string counts as supplied.
      const missing = await invoke(p._id, '', { variables: { greeting: 'Yo' } })
      expect(failure(missing, 400)).toBe('MISSING_REQUIRED_VARIABLES')
      expect((missing.body as { error: { details: unknown } }).error.details).toEqual(['name'])
      expect(data<InvokeResult>(await invoke(p._id, '', { variables: { name: '' } })).renderedContent).toBe(
        'Version two says Hello to ',
      )
      // Inject previews the draft and reports, not refuses, what is missing.
      const injected = data<{ renderedContent: string; unresolvedVariables: string[] }>(
        await key('POST', `/api/v1/prompts/${p._id}/inject`, { variables: {} }),
      )
      expect(injected).toMatchObject({ renderedContent: 'DRAFT {{name}}', unresolvedVariables: ['name'] })
    })
  })

  describe('forking', () => {
    it('follows fork rules 1 to 5', async () => {
      const source = await create(key, {
        name: 'Fork source',
        description: 'worth copying',
        tags: ['a', 'b'],
        template: 'Source {{name}} {{topic}}',
        variables: [{ name: 'topic', required: false, defaultValue: 'cats', description: 'what about' }],
      })
      const v1 = await publish(source._id, { changeLog: 'ready' })
      await edit(key, source._id, { template: 'Later draft {{name}}' })
      const before = data<Prompt>(await key('GET', `/api/v1/prompts/${source._id}`))
      const forkPath = `/api/v1/prompts/${source._id}/versions/${v1._id}/fork`

      // Rule 1: a user token; an API key alone is refused.
      expect(failure(await key('POST', forkPath, { name: 'Copy' }), 403)).toBe('USER_TOKEN_REQUIRED')

      // Rule 2 and 5: no target means the current workspace; a separate private copy with version 1.
      const fork = data<ForkResult>(await user('POST', forkPath, { name: '  My copy  ' }), 201)
      expect(fork.prompt).toMatchObject({
        name: 'My copy',
        slug: 'my-copy',
        organizationId: admin.organizationId,
        description: 'worth copying',
        tags: [],
        template: v1.template,
        variables: v1.variables,
        isPublic: false,
        versionCount: 1,
        currentVersionId: fork.version._id,
        forkedFromVersionId: v1._id,
      })
      expect(fork.prompt._id).not.toBe(source._id)
      expect(fork.version).toMatchObject({
        promptId: fork.prompt._id,
        version: 1,
        status: 'PUBLISHED',
        template: v1.template,
        variables: v1.variables,
        createdBy: { _id: admin.userId },
      })
      expect(
        data<{ versions: PromptVersion[] }>(await key('GET', `/api/v1/prompts/${fork.prompt._id}/versions`))
          .versions,
      ).toEqual([fork.version])
      expect(
        data<InvokeResult>(await invoke(fork.prompt._id, '', { variables: { name: 'Ada' } })).renderedContent,
      ).toBe('Source Ada cats')
      // The source is unchanged, and the two evolve apart.
      expect(data<Prompt>(await key('GET', `/api/v1/prompts/${source._id}`))).toEqual(before)
      await edit(key, fork.prompt._id, { template: 'Fork only' })
      expect(data<Prompt>(await key('GET', `/api/v1/prompts/${source._id}`)).template).toBe(
        'Later draft {{name}}',
      )
      // The fork's version 1 is a publish like any other: announced with version.published.
      await vi.waitFor(() => expect(published(fork.version._id)).toHaveLength(1), {
        timeout: 10_000,
        interval: 50,
      })

      // Rule 3: into another workspace where the caller is an ACTIVE member...
      const second = data<{ _id: string }>(
        await user('POST', '/api/v1/organizations', { name: 'Second' }),
        201,
      )
      const moved = data<ForkResult>(
        await user('POST', forkPath, { name: 'Elsewhere', targetOrganizationId: second._id }),
        201,
      )
      expect(moved.prompt.organizationId).toBe(second._id)
      expect(
        data<Prompt>(await user('GET', `/api/v1/prompts/${moved.prompt._id}?organizationId=${second._id}`))
          .forkedFromVersionId,
      ).toBe(v1._id)
      // ...never into one where they are not.
      const stranger = await register(stack.gateway, 'Outsider')
      expect(
        failure(
          await user('POST', forkPath, { name: 'Nope', targetOrganizationId: stranger.organizationId }),
          403,
        ),
      ).toBe('MEMBERSHIP_REQUIRED')

      // Rule 4: only a PUBLISHED version of this prompt: a draft has no version id to fork.
      expect(
        failure(
          await user('POST', `/api/v1/prompts/${source._id}/versions/${newId()}/fork`, { name: 'x' }),
          404,
        ),
      ).toBe('VERSION_NOT_FOUND')
      // Name: required, non-empty after trimming.
      expect(failure(await user('POST', forkPath, { name: '   ' }), 400)).toBe('VALIDATION_ERROR')
      expect(failure(await user('POST', forkPath, {}), 400)).toBe('VALIDATION_ERROR')
      // Another workspace's prompt cannot be forked through its id.
      const theirs = caller(stack.gateway, stranger.token)
      expect(failure(await theirs('POST', forkPath, { name: 'Steal' }), 404)).toBe('NOT_FOUND')
    })

    it('forks the last published snapshot of a public prompt (public fork)', async () => {
      const p = await create(key, {
        name: 'Shared prompt',
        description: 'for all',
        template: 'Shared v1 {{name}}',
      })
      await publish(p._id)
      await edit(key, p._id, { template: 'Shared v2 {{name}}' })
      const v2 = await publish(p._id)
      await edit(key, p._id, { template: 'Secret draft', isPublic: true })

      const outsider = await register(stack.gateway, 'Forker')
      const them = caller(stack.gateway, outsider.token)
      const forkPath = `/api/v1/public/prompts/${p._id}/fork`
      const fork = data<Prompt>(
        await them('POST', forkPath, { organizationId: outsider.organizationId, name: 'Mine now' }),
        201,
      )
      expect(fork).toMatchObject({
        name: 'Mine now',
        slug: 'mine-now',
        organizationId: outsider.organizationId,
        template: 'Shared v2 {{name}}',
        description: 'for all',
        tags: [],
        isPublic: false,
        versionCount: 1,
        forkedFromVersionId: v2._id,
      })
      expect(
        data<InvokeResult>(
          await them('POST', `/api/v1/prompts/${fork._id}/invoke`, { variables: { name: 'Z' } }),
        ).renderedContent,
      ).toBe('Shared v2 Z')

      // Rule 3: the target must be a workspace of the caller's.
      expect(
        failure(await them('POST', forkPath, { organizationId: admin.organizationId, name: 'x' }), 403),
      ).toBe('MEMBERSHIP_REQUIRED')
      expect(failure(await them('POST', forkPath, { name: 'x' }), 400)).toBe('VALIDATION_ERROR')
      expect(
        failure(await them('POST', forkPath, { organizationId: outsider.organizationId, name: ' ' }), 400),
      ).toBe('VALIDATION_ERROR')
      // Rule 1: a user token.
      const theirKey = caller(
        stack.gateway,
        await apiKey(stack.gateway, outsider, ['prompts:read', 'prompts:write']),
      )
      expect(
        failure(
          await theirKey('POST', forkPath, { organizationId: outsider.organizationId, name: 'x' }),
          403,
        ),
      ).toBe('USER_TOKEN_REQUIRED')
      expect(
        failure(
          await anonymous('POST', forkPath, { organizationId: outsider.organizationId, name: 'x' }),
          401,
        ),
      ).toBe('AUTH_REQUIRED')
      // A private prompt is not in the catalog and cannot be forked from it.
      const hidden = await create(key, { name: 'Hidden' })
      await publish(hidden._id)
      expect(
        failure(
          await them('POST', `/api/v1/public/prompts/${hidden._id}/fork`, {
            organizationId: outsider.organizationId,
            name: 'x',
          }),
          404,
        ),
      ).toBe('NOT_FOUND')
    })
  })

  describe('public catalog', () => {
    it('lists and shows public prompts without credentials, with search and pages, never a draft', async () => {
      const tag = newId()
      const p = await create(key, {
        name: `Catalog ${tag}`,
        description: 'public one',
        tags: ['c'],
        template: 'Published {{name}}',
      })
      const v1 = await publish(p._id)
      await edit(key, p._id, { isPublic: true })
      const second = await create(key, { name: `Catalog ${tag} second`, template: 'Second {{name}}' })
      await publish(second._id)
      await edit(key, second._id, { isPublic: true })
      const privateOne = await create(key, { name: `Catalog ${tag} private` })
      await publish(privateOne._id)

      const list = data<{ prompts: PublicPrompt[]; pagination: PromptList['pagination'] }>(
        await anonymous('GET', `/api/v1/public/prompts?search=${tag}&limit=1`),
      )
      expect(list.pagination).toEqual({ page: 1, limit: 1, total: 2, totalPages: 2, hasNextPage: true })
      const all = data<{ prompts: PublicPrompt[] }>(
        await anonymous('GET', `/api/v1/public/prompts?search=${tag}`),
      )
      expect(all.prompts.map((e) => e._id).sort()).toEqual([p._id, second._id].sort())
      const entry = data<PublicPrompt>(await anonymous('GET', `/api/v1/public/prompts/${p._id}`))
      expect(entry).toEqual({
        _id: p._id,
        name: p.name,
        slug: p.slug,
        description: 'public one',
        tags: ['c'],
        type: 'text',
        template: 'Published {{name}}',
        variables: v1.variables,
        versionId: v1._id,
        version: 1,
        publishedAt: v1.publishedAt,
        createdAt: p.createdAt,
      })
      expect(failure(await anonymous('GET', `/api/v1/public/prompts/${privateOne._id}`), 404)).toBe(
        'NOT_FOUND',
      )
      expect(failure(await anonymous('GET', `/api/v1/public/prompts?limit=101`), 400)).toBe(
        'VALIDATION_ERROR',
      )

      // Editing the draft of a public prompt changes nothing the catalog shows.
      await edit(key, p._id, { template: 'DRAFT ONLY {{name}} {{secret}}' })
      const afterEdit = data<PublicPrompt>(await anonymous('GET', `/api/v1/public/prompts/${p._id}`))
      expect(afterEdit.template).toBe('Published {{name}}')
      expect(afterEdit.variables).toEqual(v1.variables)
      const listed = data<{ prompts: PublicPrompt[] }>(
        await anonymous('GET', `/api/v1/public/prompts?search=${tag}`),
      )
      for (const e of listed.prompts) expect(JSON.stringify(e)).not.toContain('DRAFT ONLY')
      expect(
        data<InvokeResult>(
          await anonymous('POST', `/api/v1/public/prompts/${p._id}/invoke`, { variables: { name: 'A' } }),
        ).renderedContent,
      ).toBe('Published A')
      // Publishing the edit is what changes the catalog.
      const v2 = await publish(p._id)
      expect(data<PublicPrompt>(await anonymous('GET', `/api/v1/public/prompts/${p._id}`))).toMatchObject({
        versionId: v2._id,
        template: 'DRAFT ONLY {{name}} {{secret}}',
      })

      // Deleting a public prompt clears its public entry.
      data(await key('DELETE', `/api/v1/prompts/${second._id}`))
      expect(failure(await anonymous('GET', `/api/v1/public/prompts/${second._id}`), 404)).toBe('NOT_FOUND')
      expect(
        data<{ prompts: PublicPrompt[] }>(
          await anonymous('GET', `/api/v1/public/prompts?search=${tag}`),
        ).prompts.map((e) => e._id),
      ).toEqual([p._id])
    })
  })

  describe('versions', () => {
    it('lists all versions newest first, or (published=true) newest publication first; reads one', async () => {
      const p = await create(key, { name: 'Version list' })
      const vs: PromptVersion[] = []
      for (let i = 0; i < 3; i++) {
        await edit(key, p._id, { template: `T${i} {{name}}` })
        vs.push(await publish(p._id))
      }
      const all = data<{ versions: PromptVersion[] }>(
        await readOnly('GET', `/api/v1/prompts/${p._id}/versions`),
      )
      expect(all.versions.map((v) => v.version)).toEqual([3, 2, 1])
      for (const v of all.versions) {
        expect(v).toMatchObject({ status: 'PUBLISHED', createdBy: { _id: admin.userId } })
        expect(v).toHaveProperty('publishedAt')
        expect(v).toHaveProperty('template')
        expect(v).toHaveProperty('variables')
      }
      const onlyPublished = data<{ versions: PromptVersion[] }>(
        await readOnly('GET', `/api/v1/prompts/${p._id}/versions?published=true`),
      )
      const times = onlyPublished.versions.map((v) => Date.parse(v.publishedAt))
      expect(times).toEqual([...times].sort((a, b) => b - a))
      expect(onlyPublished.versions).toHaveLength(3)
      // Only the exact word "true" filters.
      expect(
        data<{ versions: PromptVersion[] }>(
          await readOnly('GET', `/api/v1/prompts/${p._id}/versions?published=yes`),
        ).versions,
      ).toHaveLength(3)

      expect(
        data<PromptVersion>(await readOnly('GET', `/api/v1/prompts/${p._id}/versions/${vs[1]?._id}`)),
      ).toEqual(vs[1])
      const other = await create(key, { name: 'Other versions' })
      const foreign = await publish(other._id)
      expect(failure(await readOnly('GET', `/api/v1/prompts/${p._id}/versions/${foreign._id}`), 404)).toBe(
        'VERSION_NOT_FOUND',
      )
      const stranger = await register(stack.gateway, 'Peeker')
      expect(
        failure(
          await caller(stack.gateway, stranger.token)(
            'GET',
            `/api/v1/prompts/${p._id}/versions/${vs[0]?._id}`,
          ),
          404,
        ),
      ).toBe('NOT_FOUND')
    })

    it('diffs two versions, or a version and the draft: template hunks and variable changes', async () => {
      const p = await create(key, {
        name: 'Diffing',
        template: 'line one\nHello {{name}}\nline three',
        variables: [{ name: 'old', required: false }],
      })
      const v1 = await publish(p._id)
      await edit(key, p._id, {
        template: 'line one\nHi {{name}} from {{place}}\nline three',
        variables: [{ name: 'name', required: false }],
      })
      const v2 = await publish(p._id)
      const diff = data<VersionDiff>(
        await readOnly('GET', `/api/v1/prompts/${p._id}/versions/diff?from=${v1._id}&to=${v2._id}`),
      )
      expect(diff.from).toBe(v1._id)
      expect(diff.to).toBe(v2._id)
      expect(diff.template).toEqual({
        hunks: [
          {
            oldStart: 1,
            oldLines: 3,
            newStart: 1,
            newLines: 3,
            lines: [' line one', '-Hello {{name}}', '+Hi {{name}} from {{place}}', ' line three'],
          },
        ],
        added: 1,
        removed: 1,
      })
      expect(diff.variables).toEqual({
        added: [{ name: 'place', required: true }],
        removed: [{ name: 'old', required: false }],
        changed: [
          {
            name: 'name',
            before: { name: 'name', required: true },
            after: { name: 'name', required: false },
          },
        ],
      })

      await edit(key, p._id, { template: 'line one\nHi {{name}} from {{place}}\nline three\nline four' })
      const toDraft = data<VersionDiff>(
        await readOnly('GET', `/api/v1/prompts/${p._id}/versions/diff?from=${v2._id}&to=draft`),
      )
      // The old last line had no newline, nor has the new one: the appended line is the only change.
      expect(toDraft).toMatchObject({ from: v2._id, to: 'draft', template: { added: 1, removed: 0 } })
      expect(toDraft.template.hunks[0]?.lines.slice(-2)).toEqual([' line three', '+line four'])
      const same = data<VersionDiff>(
        await readOnly('GET', `/api/v1/prompts/${p._id}/versions/diff?from=draft&to=draft`),
      )
      expect(same.template).toEqual({ hunks: [], added: 0, removed: 0 })

      expect(
        failure(
          await readOnly('GET', `/api/v1/prompts/${p._id}/versions/diff?from=${newId()}&to=draft`),
          404,
        ),
      ).toBe('VERSION_NOT_FOUND')
      expect(
        failure(await readOnly('GET', `/api/v1/prompts/${p._id}/versions/diff?from=v1&to=draft`), 400),
      ).toBe('VALIDATION_ERROR')
      expect(failure(await readOnly('GET', `/api/v1/prompts/${p._id}/versions/diff?from=draft`), 400)).toBe(
        'VALIDATION_ERROR',
      )
    })

    it('gives twenty publishes at once the numbers 1 to 20: no gap, no duplicate, every snapshot intact', async () => {
      const p = await create(key, { name: 'Twenty at once', template: 'Same draft {{name}}' })
      const results = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          user('POST', `/api/v1/prompts/${p._id}/publish`, { changeLog: `c${i}` }),
        ),
      )
      const versions = results.map((r) => data<PromptVersion>(r, 201))
      expect(versions.map((v) => v.version).sort((a, b) => a - b)).toEqual(
        Array.from({ length: 20 }, (_, i) => i + 1),
      )
      expect(new Set(versions.map((v) => v._id)).size).toBe(20)
      // Each request got its own snapshot with its own changeLog.
      expect(versions.map((v) => v.changeLog).sort()).toEqual(
        Array.from({ length: 20 }, (_, i) => `c${i}`).sort(),
      )
      const stored = data<{ versions: PromptVersion[] }>(
        await key('GET', `/api/v1/prompts/${p._id}/versions`),
      ).versions
      expect(stored.map((v) => v.version)).toEqual(Array.from({ length: 20 }, (_, i) => 20 - i))
      for (const v of versions) {
        expect(stored.find((s) => s._id === v._id)).toEqual(v)
        expect(v.template).toBe('Same draft {{name}}')
      }
      const after = data<Prompt>(await key('GET', `/api/v1/prompts/${p._id}`))
      expect(after.versionCount).toBe(20)
      expect(after.currentVersionId).toBe(stored[0]?._id)
      // One event per version, each with its version id as message id.
      await vi.waitFor(
        () => {
          for (const v of versions) expect(published(v._id)).toHaveLength(1)
        },
        { timeout: 15_000, interval: 50 },
      )
    })

    it('keeps the versioning promises of section 9', async () => {
      expect(failure(await key('GET', '/api/v2/prompts'), 404)).toBe('NOT_FOUND')
      const p = await create(key, { name: 'Promises', template: 'A {{name}}' })
      const v1 = await publish(p._id, { changeLog: 'a' })
      await edit(key, p._id, { template: 'B {{name}}', variables: [{ name: 'name', required: false }] })
      const v2 = await publish(p._id)
      await edit(key, p._id, { template: 'C {{name}}' })
      const v3 = await publish(p._id)
      // Integers in publish order; earlier snapshots untouched by later publishes and edits.
      expect([v1.version, v2.version, v3.version]).toEqual([1, 2, 3])
      expect(data<PromptVersion>(await key('GET', `/api/v1/prompts/${p._id}/versions/${v1._id}`))).toEqual(v1)
      expect(data<PromptVersion>(await key('GET', `/api/v1/prompts/${p._id}/versions/${v2._id}`))).toEqual(v2)
      // Restoring changes neither the history nor currentVersionId.
      const history = data<{ versions: PromptVersion[] }>(
        await key('GET', `/api/v1/prompts/${p._id}/versions`),
      )
      data(await key('POST', `/api/v1/prompts/${p._id}/versions/${v1._id}/restore`))
      expect(
        data<{ versions: PromptVersion[] }>(await key('GET', `/api/v1/prompts/${p._id}/versions`)),
      ).toEqual(history)
      expect(data<Prompt>(await key('GET', `/api/v1/prompts/${p._id}`))).toMatchObject({
        currentVersionId: v3._id,
        versionCount: 3,
        template: 'A {{name}}',
      })
      // Publishing the restored draft adds version 4; nothing is overwritten.
      const v4 = await publish(p._id)
      expect(v4).toMatchObject({ version: 4, template: 'A {{name}}' })
      expect(data<PromptVersion>(await key('GET', `/api/v1/prompts/${p._id}/versions/${v1._id}`))).toEqual(v1)
    })
  })

  describe('limits (spec section 8, DESIGN section 7)', () => {
    it('changeLog at most 280 characters', async () => {
      const p = await create(key, { name: 'Changelog limit' })
      expect((await publish(p._id, { changeLog: 'x'.repeat(280) })).changeLog).toHaveLength(280)
      expect(
        failure(await user('POST', `/api/v1/prompts/${p._id}/publish`, { changeLog: 'x'.repeat(281) }), 400),
      ).toBe('VALIDATION_ERROR')
      expect(
        data<{ versions: unknown[] }>(await key('GET', `/api/v1/prompts/${p._id}/versions`)).versions,
      ).toHaveLength(1)
    })

    it('template at most 100,000 characters; JSON bodies at most 1 MiB; names non-empty', async () => {
      const big = await create(key, { name: 'Big', template: 'x'.repeat(100_000) })
      expect(big.template).toHaveLength(100_000)
      expect(
        failure(
          await key('POST', '/api/v1/prompts', { name: 'Too big', template: 'x'.repeat(100_001) }),
          400,
        ),
      ).toBe('VALIDATION_ERROR')
      expect(
        failure(await key('PATCH', `/api/v1/prompts/${big._id}`, { template: 'x'.repeat(100_001) }), 400),
      ).toBe('VALIDATION_ERROR')
      expect(
        failure(
          await key('POST', '/api/v1/prompts', {
            name: 'Huge',
            template: 'x',
            description: 'y'.repeat(1024 * 1024),
          }),
          413,
        ),
      ).toBe('PAYLOAD_TOO_LARGE')
      expect(failure(await key('POST', '/api/v1/prompts', { name: '   ', template: 'x' }), 400)).toBe(
        'VALIDATION_ERROR',
      )
    })

    it('an API key with its own rate limit is refused past it with 429 and Retry-After', async () => {
      const limited = caller(
        stack.gateway,
        await apiKey(stack.gateway, admin, ['prompts:read'], { points: 2, durationSeconds: 60 }),
      )
      data(await limited('GET', '/api/v1/prompts?limit=1'))
      data(await limited('GET', '/api/v1/prompts?limit=1'))
      const refused = await limited('GET', '/api/v1/prompts?limit=1')
      expect(failure(refused, 429)).toBe('RATE_LIMITED')
      expect(Number(refused.headers.get('retry-after'))).toBeGreaterThan(0)
    })
  })

  it('answered every request above as the OpenAPI document describes', async () => {
    expect(audit.seen.length).toBeGreaterThan(20)
    expect(await audit.problems()).toEqual([])
  })
})
