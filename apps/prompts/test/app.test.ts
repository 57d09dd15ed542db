import type { ImportBatch, Pin, Prompt, PromptChangedEvent, PromptVersion } from '@pm/contracts'
import { SUBJECTS } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { buildPublished } from '../src/domain/prompts.ts'
import { type Harness, harness, multipart } from './helpers.ts'

let h: Harness | undefined
afterEach(async () => {
  await h?.close()
  h = undefined
})

async function setup(env: Record<string, string> = {}): Promise<Harness> {
  h = await harness(env)
  return h
}

async function createPrompt(t: Harness, body: Record<string, unknown> = {}): Promise<Prompt> {
  const res = await t.app.inject({
    method: 'POST',
    url: '/api/v1/prompts',
    headers: t.as(),
    payload: { name: 'Greeting', template: 'Hello {{name}}', ...body },
  })
  expect(res.statusCode).toBe(201)
  return res.json<Prompt>()
}

async function publish(t: Harness, id: string, changeLog?: string): Promise<PromptVersion> {
  const res = await t.app.inject({
    method: 'POST',
    url: `/api/v1/prompts/${id}/publish`,
    headers: t.as(),
    payload: changeLog === undefined ? {} : { changeLog },
  })
  expect(res.statusCode).toBe(201)
  return res.json<PromptVersion>()
}

describe('prompts service (app.inject)', () => {
  it('refuses requests without the signed caller context', async () => {
    const t = await setup()
    const res = await t.app.inject({ method: 'GET', url: '/api/v1/prompts' })
    expect(res.statusCode).toBe(401)
  })

  it('publishes without a body, and refuses a changeLog over 280 characters', async () => {
    const t = await setup()
    const p = await createPrompt(t)
    const bare = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/publish`,
      headers: t.as(),
    })
    expect(bare.statusCode).toBe(201)
    expect(bare.json()).toMatchObject({ version: 1, changeLog: '' })
    const long = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/publish`,
      headers: t.as(),
      payload: { changeLog: 'x'.repeat(281) },
    })
    expect(long.statusCode).toBe(400)
    expect(long.json().error.code).toBe('VALIDATION_ERROR')
    const apiKey = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/publish`,
      headers: t.as({ kind: 'apiKey', userId: undefined, apiKeyId: newId() }),
      payload: {},
    })
    expect(apiKey.statusCode).toBe(403)
    expect(apiKey.json().error.code).toBe('USER_TOKEN_REQUIRED')
  })

  it('broadcasts a change for every move that alters what render resolves', async () => {
    const t = await setup()
    const seen: PromptChangedEvent[] = []
    t.bus.onBroadcast(SUBJECTS.promptChanged, (e) => seen.push(e as PromptChangedEvent))
    const p = await createPrompt(t)
    await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/prompts/${p._id}`,
      headers: t.as(),
      payload: { template: 'Hi {{name}}' },
    })
    expect(seen).toEqual([])
    const v1 = await publish(t, p._id)
    await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/environments/production/promote`,
      headers: t.as(),
      payload: { versionId: v1._id },
    })
    await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/prompts/${p._id}`,
      headers: t.as(),
      payload: { isPublic: true },
    })
    await t.app.inject({ method: 'DELETE', url: `/api/v1/prompts/${p._id}/publish`, headers: t.as() })
    await t.app.inject({ method: 'DELETE', url: `/api/v1/prompts/${p._id}`, headers: t.as() })
    expect(seen.map((e) => e.reason)).toEqual([
      'published',
      'promoted',
      'visibility',
      'unpublished',
      'deleted',
    ])
    expect(new Set(seen.map((e) => e.promptId))).toEqual(new Set([p._id]))
  })

  it('promotes two environments at once without losing either pin', async () => {
    const t = await setup()
    const p = await createPrompt(t)
    const v1 = await publish(t, p._id)
    const v2 = await publish(t, p._id)
    const [a, b] = await Promise.all([
      t.app.inject({
        method: 'POST',
        url: `/api/v1/prompts/${p._id}/environments/preview/promote`,
        headers: t.as(),
        payload: { versionId: v2._id },
      }),
      t.app.inject({
        method: 'POST',
        url: `/api/v1/prompts/${p._id}/environments/production/promote`,
        headers: t.as(),
        payload: { versionId: v1._id },
      }),
    ])
    expect([a.statusCode, b.statusCode]).toEqual([200, 200])
    const envs = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${p._id}/environments`,
      headers: t.as(),
    })
    const body = envs.json<{ preview: Pin; production: Pin }>()
    expect(body.preview).toMatchObject({ versionId: v2._id, version: 2, promotedBy: t.user })
    expect(body.production).toMatchObject({ versionId: v1._id, version: 1 })
    const bad = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/environments/staging/promote`,
      headers: t.as(),
      payload: { versionId: v1._id },
    })
    expect(bad.statusCode).toBe(400)
  })

  it('refuses to fork or promote a version that is not PUBLISHED (409)', async () => {
    const t = await setup()
    const p = await createPrompt(t)
    const v1 = await publish(t, p._id)
    // No route makes such a version yet (other statuses are reserved): write one directly.
    const draftLike = await t.store.publish(t.org, p._id, (prompt, next) => {
      const built = buildPublished(prompt, next, { _id: t.user }, '')
      return { ...built, version: { ...built.version, status: 'DRAFT' as unknown as 'PUBLISHED' } }
    })
    const fork = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/versions/${draftLike?._id}/fork`,
      headers: t.as({ targetOrganizationId: t.org }),
      payload: { name: 'Copy' },
    })
    expect([fork.statusCode, fork.json().error.code]).toEqual([409, 'VERSION_NOT_PUBLISHED'])
    const promote = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/environments/preview/promote`,
      headers: t.as(),
      payload: { versionId: draftLike?._id },
    })
    expect([promote.statusCode, promote.json().error.code]).toEqual([409, 'VERSION_NOT_PUBLISHED'])
    // The published one forks; a target the gateway did not check is refused.
    const ok = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/versions/${v1._id}/fork`,
      headers: t.as({ targetOrganizationId: t.org }),
      payload: { name: 'Copy' },
    })
    expect(ok.statusCode).toBe(201)
    const unchecked = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${p._id}/versions/${v1._id}/fork`,
      headers: t.as({ targetOrganizationId: t.org }),
      payload: { name: 'Copy', targetOrganizationId: newId() },
    })
    expect([unchecked.statusCode, unchecked.json().error.code]).toEqual([403, 'MEMBERSHIP_REQUIRED'])
  })

  it('holds an event back for OUTBOX_RELAY_DELAY_MS, then sends it once with the version id', async () => {
    const t = await setup({ OUTBOX_RELAY_DELAY_MS: '1000', OUTBOX_POLL_MS: '20' })
    const received: Array<{ msgId: string }> = []
    await t.bus.consume(SUBJECTS.versionPublished, 'test', async (_data, meta) => {
      received.push({ msgId: meta.msgId })
    })
    const p = await createPrompt(t)
    const v1 = await publish(t, p._id)
    expect(received).toEqual([])
    await vi.waitFor(() => expect(received).toEqual([{ msgId: v1._id }]), { timeout: 5000, interval: 20 })
  })

  it('resolves for render: current, version N, environment, and the three error codes', async () => {
    const t = await setup()
    const p = await createPrompt(t)
    const resolve = (query = '', caller = {}) =>
      t.app.inject({
        method: 'GET',
        url: `/internal/prompts/${p._id}/resolve${query}`,
        headers: t.as(caller),
      })
    expect((await resolve()).json().error.code).toBe('NO_PUBLISHED_VERSION')
    const v1 = await publish(t, p._id)
    await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/prompts/${p._id}`,
      headers: t.as(),
      payload: { template: 'Bye {{name}}' },
    })
    const v2 = await publish(t, p._id)
    expect((await resolve()).json()).toMatchObject({
      versionId: v2._id,
      version: 2,
      template: 'Bye {{name}}',
    })
    expect((await resolve('?version=1')).json()).toMatchObject({
      versionId: v1._id,
      template: 'Hello {{name}}',
    })
    const missing = await resolve('?version=9')
    expect([missing.statusCode, missing.json().error.code]).toEqual([404, 'VERSION_NOT_FOUND'])
    const unset = await resolve('?env=preview')
    expect([unset.statusCode, unset.json().error.code]).toEqual([404, 'ENVIRONMENT_NOT_SET'])
    const both = await resolve('?env=preview&version=1')
    expect([both.statusCode, both.json().error.code]).toEqual([400, 'VALIDATION_ERROR'])
    const otherOrg = await resolve('', { organizationId: newId() })
    expect(otherOrg.statusCode).toBe(404)
    const notPublic = await resolve('?public=true', { kind: 'anonymous', organizationId: undefined })
    expect(notPublic.statusCode).toBe(404)
  })

  it('imports a CSV in the background with progress, reporting bad rows', async () => {
    const t = await setup({ IMPORT_PROGRESS_EVERY: '10' })
    const lines = ['name,template,tags']
    for (let i = 1; i <= 300; i++) lines.push(i === 50 ? ',no name,' : `Row ${i},Hello {{who}} ${i},a;b`)
    const body = await multipart(lines.join('\n'))
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/prompts/import',
      headers: { ...t.as(), ...body.headers },
      payload: body.payload,
    })
    expect(res.statusCode).toBe(202)
    const { batchId } = res.json<{ batchId: string }>()
    const status = async () =>
      (
        await t.app.inject({ method: 'GET', url: `/api/v1/prompts/import/${batchId}`, headers: t.as() })
      ).json<ImportBatch>()
    await vi.waitFor(async () => expect((await status()).status).toBe('completed'), { timeout: 10_000 })
    expect(await status()).toMatchObject({
      total: 300,
      created: 299,
      failed: 1,
      errors: [{ row: 51, message: 'name is required' }],
    })
    const other = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/import/${batchId}`,
      headers: t.as({ organizationId: newId() }),
    })
    expect(other.statusCode).toBe(404)
  })

  it('records where an import stopped when the service shuts down, and reads a dead batch as failed', async () => {
    const t = await setup({ IMPORT_PROGRESS_EVERY: '1' })
    const lines = ['name,template']
    for (let i = 1; i <= 2000; i++) lines.push(`Row ${i},T`)
    const body = await multipart(lines.join('\n'))
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/prompts/import',
      headers: { ...t.as(), ...body.headers },
      payload: body.payload,
    })
    const { batchId } = res.json<{ batchId: string }>()
    await t.app.close()
    const batch = await t.store.getBatch(t.org, batchId)
    // Every row is accounted for: written, or listed as not imported.
    expect(batch?.status).not.toBe('processing')
    expect((batch?.created ?? 0) + (batch?.failed ?? 0)).toBe(2000)
    expect(batch?.errors).toHaveLength(batch?.failed ?? -1)

    // A batch left "processing" by a process that died reads as failed once it is stale.
    const t2 = await harness({ IMPORT_STALE_MS: '1000' })
    try {
      const old = new Date(Date.now() - 5000).toISOString()
      const dead = {
        _id: newId(),
        organizationId: t2.org,
        createdBy: t2.user,
        status: 'processing' as const,
        total: 10,
        created: 4,
        failed: 0,
        errors: [],
        createdAt: old,
        updatedAt: old,
        finishedAt: null,
      }
      await t2.store.createBatch(dead)
      const view = await t2.app.inject({
        method: 'GET',
        url: `/api/v1/prompts/import/${dead._id}`,
        headers: t2.as(),
      })
      expect(view.json()).toMatchObject({ status: 'failed', total: 10, created: 4 })
    } finally {
      await t2.close()
    }
  })

  it('refuses an upload that is not multipart, or has no file field', async () => {
    const t = await setup()
    const json = await t.app.inject({
      method: 'POST',
      url: '/api/v1/prompts/import',
      headers: t.as(),
      payload: { name: 'x' },
    })
    expect([json.statusCode, json.json().error.code]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE'])
    const wrong = await multipart('name,template\na,b', 'upload')
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/prompts/import',
      headers: { ...t.as(), ...wrong.headers },
      payload: wrong.payload,
    })
    expect([res.statusCode, res.json().error.code]).toEqual([400, 'VALIDATION_ERROR'])
  })
})
