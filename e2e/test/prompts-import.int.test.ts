import type { ImportBatch, Prompt } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { apiKey, type Caller, caller, data, failure, login, type Session, upload } from '../src/prompts.ts'
import { auditResponses, type ResponseAudit } from '../src/openapi.ts'
import { type Stack, startStack } from '../src/stack.ts'

interface PromptList {
  prompts: Prompt[]
  pagination: { total: number; totalPages: number }
}

/**
 * CSV import through the gateway (multipart, user token, 10 MiB and 50,000 rows by default):
 * a large file with its progress visible while it runs, and every way a file or a row can be
 * wrong, each with a clear error and nothing half-written.
 */
describe('CSV import through the gateway', () => {
  let stack: Stack
  let audit: ResponseAudit
  let admin: Session
  let user: Caller

  /** A fresh workspace of the admin's, so that counts are exact. */
  async function workspace(): Promise<string> {
    return data<{ _id: string }>(
      await user('POST', '/api/v1/organizations', { name: `Import ${newId()}` }),
      201,
    )._id
  }
  async function count(org: string): Promise<number> {
    return data<PromptList>(await user('GET', `/api/v1/prompts?organizationId=${org}&limit=1`)).pagination
      .total
  }
  async function status(org: string, batchId: string): Promise<ImportBatch> {
    return data<ImportBatch>(await user('GET', `/api/v1/prompts/import/${batchId}?organizationId=${org}`))
  }
  async function finished(org: string, batchId: string): Promise<ImportBatch> {
    let last: ImportBatch | undefined
    await vi.waitFor(
      async () => {
        last = await status(org, batchId)
        expect(last.status).not.toBe('processing')
      },
      { timeout: 60_000, interval: 50 },
    )
    if (!last) throw new Error('no status')
    return last
  }

  beforeAll(async () => {
    stack = await startStack()
    audit = auditResponses(stack.gateway)
    admin = await login(stack.gateway)
    user = caller(stack.gateway, admin.token)
  }, 120_000)

  afterAll(async () => {
    audit?.stop()
    await stack?.stop()
  })

  it('imports a 10,000-row file, answering 202 at once, with progress visible while it runs', async () => {
    const org = await workspace()
    const rows = ['name,template,description,tags']
    for (let i = 1; i <= 10_000; i++) {
      rows.push(`Imported ${i},"Hello {{name}}, this is #${i}",Row ${i},"bulk; n${i % 7}"`)
    }
    const res = await upload(stack.gateway, admin.token, rows.join('\r\n'), {
      query: `?organizationId=${org}`,
    })
    const accepted = data<{ batchId: string; message: string }>(res, 202)
    expect(accepted.batchId).toMatch(/^[0-9a-f]{24}$/)
    expect(accepted.message).toContain('10000 rows')

    // Poll until done, keeping every status seen on the way.
    const seen: ImportBatch[] = []
    await vi.waitFor(
      async () => {
        const s = await status(org, accepted.batchId)
        seen.push(s)
        expect(s.status).toBe('completed')
      },
      { timeout: 120_000, interval: 10 },
    )
    const inProgress = seen.filter((s) => s.status === 'processing' && s.created > 0 && s.created < 10_000)
    expect(inProgress.length).toBeGreaterThan(0)
    // Progress only moves forward.
    const created = seen.map((s) => s.created)
    expect(created).toEqual([...created].sort((a, b) => a - b))
    const done = seen.at(-1)
    expect(done).toMatchObject({ total: 10_000, created: 10_000, failed: 0, errors: [] })
    expect(done?.finishedAt).not.toBeNull()

    // Every row is a whole prompt: name, template, description and tags all from its row.
    expect(await count(org)).toBe(10_000)
    const indexes = new Set<number>()
    for (let page = 1; page <= 100; page++) {
      const list = data<PromptList>(
        await user('GET', `/api/v1/prompts?organizationId=${org}&limit=100&page=${page}`),
      )
      for (const p of list.prompts) {
        const i = Number(p.name.replace('Imported ', ''))
        indexes.add(i)
        expect(p).toMatchObject({
          template: `Hello {{name}}, this is #${i}`,
          description: `Row ${i}`,
          tags: ['bulk', `n${i % 7}`],
          variables: [{ name: 'name', required: true }],
          versionCount: 0,
          createdBy: admin.userId,
        })
      }
    }
    expect(indexes.size).toBe(10_000)
  })

  it('reports a row with a blank name by its row number and imports the others', async () => {
    const org = await workspace()
    const csv = [
      'name,template',
      'First,One {{a}}',
      '   ,Nameless',
      '"Third","Multi',
      'line"',
      'Fourth,',
      'Fifth,Five',
    ].join('\n')
    const accepted = data<{ batchId: string; message: string }>(
      await upload(stack.gateway, admin.token, csv, { query: `?organizationId=${org}` }),
      202,
    )
    expect(accepted.message).toContain('2 with errors')
    const done = await finished(org, accepted.batchId)
    expect(done).toMatchObject({
      status: 'completed',
      total: 5,
      created: 3,
      failed: 2,
      errors: [
        { row: 3, message: 'name is required' },
        { row: 5, message: 'template is required' },
      ],
    })
    const names = data<PromptList>(await user('GET', `/api/v1/prompts?organizationId=${org}&limit=100`))
      .prompts.map((p) => p.name)
      .sort()
    expect(names).toEqual(['Fifth', 'First', 'Third'])
  })

  it('refuses a malformed file, a missing column, an empty file and a wrong field, writing nothing', async () => {
    const org = await workspace()
    const q = { query: `?organizationId=${org}` }
    const good = Array.from({ length: 50 }, (_, i) => `Good ${i},Template ${i}`)

    // Malformed at the very end: the good rows before it are not imported either.
    const malformed = await upload(
      stack.gateway,
      admin.token,
      ['name,template', ...good, 'Broken,"never closed'].join('\n'),
      q,
    )
    expect(failure(malformed, 400)).toBe('VALIDATION_ERROR')
    expect((malformed.body as { error: { message: string } }).error.message).toMatch(
      /malformed CSV at row 52/,
    )

    const missing = await upload(stack.gateway, admin.token, ['name,description', 'A,b'].join('\n'), q)
    expect(failure(missing, 400)).toBe('VALIDATION_ERROR')
    expect((missing.body as { error: { message: string } }).error.message).toBe(
      'missing required column: template',
    )

    expect(failure(await upload(stack.gateway, admin.token, '', q), 400)).toBe('VALIDATION_ERROR')
    expect(failure(await upload(stack.gateway, admin.token, 'name,template\n', q), 400)).toBe(
      'VALIDATION_ERROR',
    )
    expect(
      failure(
        await upload(stack.gateway, admin.token, 'name,template\nA,B', { ...q, field: 'document' }),
        400,
      ),
    ).toBe('VALIDATION_ERROR')

    expect(await count(org)).toBe(0)
  })

  it('refuses a file over 10 MiB (413) and one over 50,000 rows, writing nothing', async () => {
    const org = await workspace()
    const q = { query: `?organizationId=${org}` }
    const filler = 'x'.repeat(1000)
    const big: string[] = ['name,template']
    for (let i = 0; big.length * 1010 < 10.5 * 1024 * 1024; i++) big.push(`Big ${i},${filler}`)
    const oversized = await upload(stack.gateway, admin.token, big.join('\n'), q)
    expect(failure(oversized, 413)).toBe('PAYLOAD_TOO_LARGE')
    expect((oversized.body as { error: { message: string } }).error.message).toContain('10485760 bytes')

    const many = ['name,template']
    for (let i = 0; i <= 50_000; i++) many.push(`R${i},T`)
    const tooMany = await upload(stack.gateway, admin.token, many.join('\n'), q)
    expect(failure(tooMany, 400)).toBe('VALIDATION_ERROR')
    expect((tooMany.body as { error: { message: string } }).error.message).toContain('at most 50000')

    expect(await count(org)).toBe(0)
    // The service is still fine after refusing mid-upload: the next import works.
    const ok = data<{ batchId: string }>(
      await upload(stack.gateway, admin.token, 'name,template\nAfter,T', q),
      202,
    )
    expect((await finished(org, ok.batchId)).created).toBe(1)
  })

  it('needs a user token and multipart, and keeps batches to their workspace', async () => {
    const key = await apiKey(stack.gateway, admin, ['prompts:read', 'prompts:write'])
    expect(failure(await upload(stack.gateway, key, 'name,template\nA,B'), 403)).toBe('USER_TOKEN_REQUIRED')
    const asJson = await user('POST', '/api/v1/prompts/import', { name: 'A', template: 'B' })
    expect(failure(asJson, 415)).toBe('UNSUPPORTED_MEDIA_TYPE')

    const org = await workspace()
    const accepted = data<{ batchId: string }>(
      await upload(stack.gateway, admin.token, 'name,template\nMine,T', { query: `?organizationId=${org}` }),
      202,
    )
    await finished(org, accepted.batchId)
    // The admin's default workspace does not see the other workspace's batch.
    expect(failure(await user('GET', `/api/v1/prompts/import/${accepted.batchId}`), 404)).toBe('NOT_FOUND')
    // Nor does an API key of that default workspace.
    expect(
      failure(await caller(stack.gateway, key)('GET', `/api/v1/prompts/import/${accepted.batchId}`), 404),
    ).toBe('NOT_FOUND')
    expect(failure(await user('GET', `/api/v1/prompts/import/${newId()}?organizationId=${org}`), 404)).toBe(
      'NOT_FOUND',
    )
  })

  it('creates nothing for a re-sent file or a repeated Idempotency-Key, answering the original batch', async () => {
    const org = await workspace()
    const q = `?organizationId=${org}`
    const file = ['name,template', 'Once,One {{a}}', 'Twice,Two {{b}}'].join('\n')
    const first = data<{ batchId: string }>(await upload(stack.gateway, admin.token, file, { query: q }), 202)
    expect(await finished(org, first.batchId)).toMatchObject({ created: 2, resumedAt: null })

    // The same bytes again: the same batch, at once, nothing written.
    const again = data<{ batchId: string; message: string }>(
      await upload(stack.gateway, admin.token, file, { query: q }),
      202,
    )
    expect(again).toMatchObject({ batchId: first.batchId, message: expect.stringContaining('nothing new') })
    expect(await count(org)).toBe(2)

    // A client retrying with its Idempotency-Key gets the batch of its first request.
    const other = ['name,template', 'Keyed,K {{c}}'].join('\n')
    const key = { 'idempotency-key': `"${newId()}"` }
    const keyed = data<{ batchId: string }>(
      await upload(stack.gateway, admin.token, other, { query: q, headers: key }),
      202,
    )
    const retried = data<{ batchId: string }>(
      await upload(stack.gateway, admin.token, other, { query: q, headers: key }),
      202,
    )
    expect(retried.batchId).toBe(keyed.batchId)
    expect(
      failure(await upload(stack.gateway, admin.token, `${other}\nMore,M`, { query: q, headers: key }), 409),
    ).toBe('CONFLICT')
    expect(
      failure(
        await upload(stack.gateway, admin.token, other, { query: q, headers: { 'idempotency-key': 'a b' } }),
        400,
      ),
    ).toBe('VALIDATION_ERROR')
    await finished(org, keyed.batchId)
    expect(await count(org)).toBe(3)
  })

  it('answered every request above as the OpenAPI document describes', async () => {
    expect(audit.seen.length).toBeGreaterThan(20)
    expect(await audit.problems()).toEqual([])
  })
})
