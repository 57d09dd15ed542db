import type {
  CallerContext,
  ImportBatch,
  Pin,
  Prompt,
  PromptChangedEvent,
  PromptVersion,
} from '@pm/contracts'
import { SUBJECTS } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterEach, describe, expect, it, vi } from 'vitest'
import { buildPublished } from '../src/services/prompts.ts'
import type { PromptRecord } from '../src/store/types.ts'
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

async function upload(
  t: Harness,
  csv: string,
  headers: Record<string, string> = {},
  caller: Partial<CallerContext> = {},
) {
  const body = await multipart(csv)
  return t.app.inject({
    method: 'POST',
    url: '/api/v1/prompts/import',
    headers: { ...t.as(caller), ...body.headers, ...headers },
    payload: body.payload,
  })
}

async function batchOf(t: Harness, batchId: string): Promise<ImportBatch> {
  const res = await t.app.inject({ method: 'GET', url: `/api/v1/prompts/import/${batchId}`, headers: t.as() })
  expect(res.statusCode).toBe(200)
  return res.json<ImportBatch>()
}

async function countPrompts(t: Harness): Promise<number> {
  return (await t.store.listPrompts({ organizationId: t.org }, { page: 1, limit: 1 })).total
}

/** Rows "Row i" / "Hello {{who}} i", i = 1..n except blank-named ones: each once, whole. */
async function expectImported(t: Harness, n: number): Promise<void> {
  const { prompts, total } = await t.store.listPrompts({ organizationId: t.org }, { page: 1, limit: 100_000 })
  expect(total).toBe(n)
  expect(new Set(prompts.map((p) => p.name)).size).toBe(n)
  for (const p of prompts) {
    const i = p.name.replace('Row ', '')
    expect(p).toMatchObject({ template: `Hello {{who}} ${i}`, slug: `row-${i}`, createdBy: t.user })
  }
}

/** A prompt as the importer writes row `name` (for a batch written by a "dead" process). */
function importedPrompt(t: Harness, name: string, template: string, slug: string): PromptRecord {
  const at = new Date().toISOString()
  return {
    _id: newId(),
    organizationId: t.org,
    name,
    slug,
    type: 'text',
    description: '',
    tags: [],
    template,
    variables: [{ name: 'who', required: true }],
    isPublic: false,
    versionCount: 0,
    currentVersionId: null,
    environments: { preview: null, production: null },
    createdBy: t.user,
    createdAt: at,
    updatedAt: at,
  }
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
    const t = await setup()
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
      resumedAt: null,
    })
    // The file was kept while the batch ran, and only then.
    expect(await t.store.getImportFile(batchId)).toBeNull()
    const other = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/import/${batchId}`,
      headers: t.as({ organizationId: newId() }),
    })
    expect(other.statusCode).toBe(404)
  })

  it('hands an import over on shutdown, and the next start finishes it from where it stopped', async () => {
    const t = await setup({ IMPORT_ROW_DELAY_MS: '2' })
    const lines = ['name,template']
    for (let i = 1; i <= 300; i++) lines.push(i === 7 ? ',no name' : `Row ${i},Hello {{who}} ${i}`)
    const { batchId } = (await upload(t, lines.join('\n'))).json<{ batchId: string }>()
    await vi.waitFor(async () => expect((await batchOf(t, batchId)).created).toBeGreaterThan(20), {
      timeout: 10_000,
      interval: 5,
    })
    await t.app.close()
    const stopped = await t.store.getBatch(t.org, batchId)
    // Exact at the moment it stopped: every counted row is a prompt, every prompt is counted.
    expect(stopped).toMatchObject({ status: 'processing', leaseOwner: null, failed: 1 })
    expect(stopped?.created).toBeLessThan(299)
    expect(await countPrompts(t)).toBe(stopped?.created)

    const t2 = await harness({ IMPORT_POLL_MS: '100' }, t)
    try {
      await vi.waitFor(async () => expect((await batchOf(t2, batchId)).status).toBe('completed'), {
        timeout: 10_000,
      })
      const done = await batchOf(t2, batchId)
      expect(done).toMatchObject({ total: 300, created: 299, failed: 1, errors: [{ row: 8 }] })
      expect(done.resumedAt).not.toBeNull()
      await expectImported(t2, 299)
      expect(await t2.store.getImportFile(batchId)).toBeNull()
    } finally {
      await t2.close()
    }
  })

  it('does not let a NUL in search match everything (issue 14, finding 6)', async () => {
    const t = await setup()
    for (const name of ['alpha', 'beta']) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/prompts',
        headers: t.as(),
        payload: { name, template: 'x' },
      })
      expect(res.statusCode).toBe(201)
    }
    for (const [base, headers] of [
      ['/api/v1/prompts', t.as()],
      ['/api/v1/public/prompts', t.as({ kind: 'anonymous', organizationId: undefined })],
    ] as const) {
      for (const search of ['%00', 'al%00', '%09', '%1F', '%7F']) {
        const res = await t.app.inject({ method: 'GET', url: `${base}?search=${search}`, headers })
        expect([res.statusCode, res.json().error?.code], `${base} search=${search}`).toEqual([
          400,
          'VALIDATION_ERROR',
        ])
      }
    }
    const literal = await t.app.inject({ method: 'GET', url: '/api/v1/prompts?search=%25', headers: t.as() })
    expect(literal.json().prompts).toEqual([])
  })

  it('answers huge page numbers with 400 and a page past the end with an empty page (issue 14, finding 5)', async () => {
    const t = await setup()
    const anonymous = t.as({ kind: 'anonymous', organizationId: undefined })
    for (const [base, headers] of [
      ['/api/v1/prompts', t.as()],
      ['/api/v1/public/prompts', anonymous],
    ] as const) {
      for (const page of ['1e18', '99999999999999999999', 'Infinity', '-1', '0', '1.5', '100001']) {
        const res = await t.app.inject({ method: 'GET', url: `${base}?page=${page}`, headers })
        expect([res.statusCode, res.json().error?.code], `${base} page=${page}`).toEqual([
          400,
          'VALIDATION_ERROR',
        ])
      }
      const past = await t.app.inject({ method: 'GET', url: `${base}?page=100000&limit=100`, headers })
      expect(past.statusCode, base).toBe(200)
      expect(past.json().prompts).toEqual([])
    }
  })

  it('answers a malformed multipart body with 400, never a 5xx (issue 14, finding 5)', async () => {
    const t = await setup()
    const good = await multipart('name,template\na,b')
    const boundary = /boundary=(.+)$/.exec(good.headers['content-type'] ?? '')?.[1] ?? ''
    const cases: [string, string, Buffer][] = [
      ['no boundary', 'multipart/form-data', good.payload],
      ['wrong boundary', 'multipart/form-data; boundary=not-the-one', good.payload],
      ['truncated', good.headers['content-type'] ?? '', good.payload.subarray(0, good.payload.length - 30)],
      [
        'garbage',
        `multipart/form-data; boundary=${boundary}`,
        Buffer.from(`--${boundary}\r\nno headers\r\n`),
      ],
    ]
    for (const [label, type, payload] of cases) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/prompts/import',
        headers: { ...t.as(), 'content-type': type },
        payload,
      })
      expect([res.statusCode, res.json().error?.code], label).toEqual([400, 'VALIDATION_ERROR'])
    }
  })

  it('refuses a second file rather than ignoring it (issue 14, finding 9)', async () => {
    const t = await setup()
    const form = new FormData()
    form.append('file', new Blob(['name,template\na,b'], { type: 'text/csv' }), 'one.csv')
    form.append('file', new Blob(['name,template\nc,d'], { type: 'text/csv' }), 'two.csv')
    const request = new Request('http://localhost/', { method: 'POST', body: form })
    const res = await t.app.inject({
      method: 'POST',
      url: '/api/v1/prompts/import',
      headers: { ...t.as(), 'content-type': request.headers.get('content-type') ?? '' },
      payload: Buffer.from(await request.arrayBuffer()),
    })
    expect([res.statusCode, res.json().error?.code]).toEqual([400, 'VALIDATION_ERROR'])
    const listed = await t.app.inject({ method: 'GET', url: '/api/v1/prompts', headers: t.as() })
    expect(listed.json().prompts).toEqual([])
  })

  it('takes over a batch whose writer died once its lease runs out, writing no row twice', async () => {
    const t = await setup({ IMPORT_POLL_MS: '100' })
    const lines = ['name,template']
    for (let i = 1; i <= 50; i++) lines.push(`Row ${i},Hello {{who}} ${i}`)
    const file = Buffer.from(lines.join('\n'))
    // As a writer that died after its first two rows would have left it.
    const leaseUntil = new Date(Date.now() + 1500).toISOString()
    const batchId = newId()
    await t.store.createBatch(
      {
        _id: batchId,
        organizationId: t.org,
        createdBy: t.user,
        status: 'processing',
        total: 50,
        created: 0,
        failed: 0,
        errors: [],
        createdAt: new Date().toISOString(),
        updatedAt: new Date().toISOString(),
        finishedAt: null,
        resumedAt: null,
        position: 0,
        contentHash: null,
        idempotencyKey: null,
        leaseOwner: 'dead',
        leaseUntil,
      },
      file,
    )
    await t.store.importRows(
      { batchId, owner: 'dead', from: 0, to: 2, at: new Date().toISOString() },
      [1, 2].map((i) => importedPrompt(t, `Row ${i}`, `Hello {{who}} ${i}`, `row-${i}`)),
      [],
    )
    await vi.waitFor(async () => expect((await batchOf(t, batchId)).status).toBe('completed'), {
      timeout: 10_000,
    })
    const done = await batchOf(t, batchId)
    expect(done).toMatchObject({ total: 50, created: 50, failed: 0, errors: [] })
    // Not taken before the dead writer's lease ran out.
    expect(Date.parse(done.resumedAt ?? '')).toBeGreaterThanOrEqual(Date.parse(leaseUntil))
    await expectImported(t, 50)
  })

  it('lets exactly one of two processes on one store take an orphaned batch', async () => {
    const t = await setup({ IMPORT_POLL_MS: '100' })
    const t2 = await harness({ IMPORT_POLL_MS: '100' }, t)
    try {
      const lines = ['name,template']
      for (let i = 1; i <= 500; i++) lines.push(`Row ${i},Hello {{who}} ${i}`)
      const past = new Date(Date.now() - 1000).toISOString()
      const batchId = newId()
      await t.store.createBatch(
        {
          _id: batchId,
          organizationId: t.org,
          createdBy: t.user,
          status: 'processing',
          total: 500,
          created: 0,
          failed: 0,
          errors: [],
          createdAt: past,
          updatedAt: past,
          finishedAt: null,
          resumedAt: null,
          position: 0,
          contentHash: null,
          idempotencyKey: null,
          leaseOwner: 'dead',
          leaseUntil: past,
        },
        Buffer.from(lines.join('\n')),
      )
      await vi.waitFor(async () => expect((await batchOf(t2, batchId)).status).toBe('completed'), {
        timeout: 10_000,
      })
      expect(await batchOf(t, batchId)).toMatchObject({ total: 500, created: 500, failed: 0, errors: [] })
      await expectImported(t, 500)
    } finally {
      await t2.close()
    }
  })

  it('gives same-name prompts the lowest free slug, with one store query per allocation', async () => {
    const t = await setup()
    const queries = vi.spyOn(t.store, 'slugsStartingWith')
    const oneByOne = vi.spyOn(t.store, 'isSlugTaken')
    const slugs: string[] = []
    for (let i = 0; i < 12; i++) {
      queries.mockClear()
      slugs.push((await createPrompt(t, { name: 'Dup' })).slug)
      // Whatever the number of taken slugs: one query.
      expect(queries).toHaveBeenCalledTimes(1)
    }
    expect(slugs).toEqual(['dup', ...Array.from({ length: 11 }, (_, i) => `dup-${i + 2}`)])
    const third = await t.store.getPromptBySlug(t.org, 'dup-3')
    const removed = await t.app.inject({
      method: 'DELETE',
      url: `/api/v1/prompts/${third?._id}`,
      headers: t.as(),
    })
    expect(removed.statusCode).toBe(200)
    expect((await createPrompt(t, { name: 'Dup' })).slug).toBe('dup-3')
    expect((await createPrompt(t, { name: 'Dup' })).slug).toBe('dup-13')

    // A second import of one name reads the taken slugs once, not once per row and candidate.
    queries.mockClear()
    const lines = ['name,template', ...Array.from({ length: 300 }, (_, i) => `Dup,Hello ${i}`)]
    const { batchId } = (await upload(t, lines.join('\n'))).json<{ batchId: string }>()
    await vi.waitFor(async () => expect((await batchOf(t, batchId)).status).toBe('completed'), {
      timeout: 10_000,
    })
    expect(await batchOf(t, batchId)).toMatchObject({ created: 300, failed: 0 })
    expect(queries).toHaveBeenCalledTimes(1)
    expect(oneByOne).not.toHaveBeenCalled()
    const { prompts } = await t.store.listPrompts({ organizationId: t.org }, { page: 1, limit: 1000 })
    expect(new Set(prompts.map((p) => p.slug))).toEqual(
      new Set(['dup', ...Array.from({ length: 312 }, (_, i) => `dup-${i + 2}`)]),
    )
  })

  it('writes a run row by row when someone else takes one of its slugs meanwhile', async () => {
    const t = await setup()
    const write = t.store.importRows.bind(t.store)
    let raced = false
    t.store.importRows = async (step, prompts, errors) => {
      const second = prompts[1]
      if (!raced && second) {
        // A prompt created through the API between the importer's slug check and its write.
        raced = true
        await t.store.createPrompt({ ...second, _id: newId(), name: 'Someone else' })
      }
      return write(step, prompts, errors)
    }
    const lines = ['name,template']
    for (let i = 1; i <= 10; i++) lines.push(`Row ${i},Hello {{who}} ${i}`)
    const { batchId } = (await upload(t, lines.join('\n'))).json<{ batchId: string }>()
    await vi.waitFor(async () => expect((await batchOf(t, batchId)).status).toBe('completed'))
    expect(raced).toBe(true)
    expect(await batchOf(t, batchId)).toMatchObject({ created: 10, failed: 0, errors: [] })
    const { prompts } = await t.store.listPrompts({ organizationId: t.org }, { page: 1, limit: 100 })
    expect(prompts).toHaveLength(11)
    expect(prompts.find((p) => p.name === 'Row 2')?.slug).toBe('row-2-2')
    expect(
      prompts
        .filter((p) => p.name.startsWith('Row '))
        .map((p) => p.slug)
        .sort(),
    ).toHaveLength(10)
  })

  it('answers a re-sent file, or a repeated Idempotency-Key, with the original batch', async () => {
    const t = await setup()
    const file = 'name,template\nOne,1\nTwo,2\n'
    const first = await upload(t, file)
    expect(first.statusCode).toBe(202)
    const { batchId } = first.json<{ batchId: string }>()
    await vi.waitFor(async () => expect((await batchOf(t, batchId)).status).toBe('completed'))

    const again = await upload(t, file)
    expect(again.statusCode).toBe(202)
    expect(again.json()).toMatchObject({ batchId, message: expect.stringContaining('nothing new') })
    expect(await countPrompts(t)).toBe(2)

    const keyed = await upload(t, 'name,template\nThree,3\n', { 'idempotency-key': '"req-1"' })
    const keyedId = keyed.json<{ batchId: string }>().batchId
    expect(keyedId).not.toBe(batchId)
    // Quoted or not, the same key; repeated with the same file, the same batch.
    const repeat = await upload(t, 'name,template\nThree,3\n', { 'idempotency-key': 'req-1' })
    expect([repeat.statusCode, repeat.json().batchId]).toEqual([202, keyedId])
    const other = await upload(t, 'name,template\nFour,4\n', { 'idempotency-key': 'req-1' })
    expect([other.statusCode, other.json().error.code]).toEqual([409, 'CONFLICT'])
    // A new key does not make a known file new.
    const newKey = await upload(t, file, { 'idempotency-key': 'req-2' })
    expect(newKey.json().batchId).toBe(batchId)
    // Another user's key, and another workspace's file, are their own.
    const otherUser = await upload(
      t,
      'name,template\nFive,5\n',
      { 'idempotency-key': 'req-1' },
      {
        userId: newId(),
      },
    )
    expect(otherUser.statusCode).toBe(202)
    expect(otherUser.json().batchId).not.toBe(keyedId)
    const otherOrg = await upload(t, file, {}, { organizationId: newId() })
    expect(otherOrg.json().batchId).not.toBe(batchId)

    for (const bad of ['', 'has space', 'x'.repeat(256), 'caf\u00e9']) {
      const res = await upload(t, 'name,template\nSix,6\n', { 'idempotency-key': bad })
      expect([res.statusCode, res.json().error.code]).toEqual([400, 'VALIDATION_ERROR'])
    }
    // One, Two, Three, and the other user's Five: nothing from the repeats.
    await vi.waitFor(async () =>
      expect((await batchOf(t, otherUser.json().batchId)).status).toBe('completed'),
    )
    await vi.waitFor(async () => expect((await batchOf(t, keyedId)).status).toBe('completed'))
    expect(await countPrompts(t)).toBe(4)
  })

  it('imports a file again once its batch is older than IMPORT_DEDUPE_MS', async () => {
    const t = await setup({ IMPORT_DEDUPE_MS: '0' })
    const file = 'name,template\nOnce,1\n'
    const first = (await upload(t, file)).json<{ batchId: string }>().batchId
    await vi.waitFor(async () => expect((await batchOf(t, first)).status).toBe('completed'))
    const second = (await upload(t, file)).json<{ batchId: string }>().batchId
    expect(second).not.toBe(first)
    await vi.waitFor(async () => expect((await batchOf(t, second)).status).toBe('completed'))
    expect(await countPrompts(t)).toBe(2)
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
