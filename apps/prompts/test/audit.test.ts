import { type AuditEntry, type AuditList, type Prompt, type PromptVersion, SUBJECTS } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { PromptsService } from '../src/services/prompts.ts'
import { type Harness, harness } from './helpers.ts'

// One service for the file; each test uses a workspace of its own.
let t: Harness
beforeAll(async () => {
  t = await harness({ OUTBOX_POLL_MS: '50' })
})
afterAll(async () => {
  await t.close()
})

function workspace() {
  const org = newId()
  const user = newId()
  const key = newId()
  return {
    org,
    user,
    key,
    asUser: (role: 'OWNER' | 'ADMIN' | 'MEMBER' = 'OWNER') =>
      t.as({ organizationId: org, userId: user, role, targetOrganizationId: org }),
    asKey: () =>
      t.as({
        kind: 'apiKey',
        organizationId: org,
        userId: undefined,
        apiKeyId: key,
        role: undefined,
        scopes: ['prompts:read', 'prompts:write'],
      }),
  }
}

async function auditLog(w: ReturnType<typeof workspace>, query = ''): Promise<AuditList> {
  const res = await t.app.inject({
    method: 'GET',
    url: `/api/v1/organizations/${w.org}/audit-log${query}`,
    headers: w.asUser(),
  })
  expect(res.statusCode).toBe(200)
  return res.json<AuditList>()
}

describe('audit log', () => {
  it('records each committed change once, with its actor, and nothing for a refused one', async () => {
    const w = workspace()
    const inject = (
      method: 'POST' | 'PATCH' | 'DELETE',
      url: string,
      headers = w.asUser(),
      payload?: object,
    ) => t.app.inject({ method, url, headers, ...(payload ? { payload } : {}) })
    const created = await inject('POST', '/api/v1/prompts', w.asKey(), {
      name: 'Audited',
      template: 'Hi {{x}}',
    })
    const id = created.json<Prompt>()._id
    // Refused by validation: no entry.
    expect((await inject('POST', '/api/v1/prompts', w.asKey(), { name: '' })).statusCode).toBe(400)
    expect((await inject('PATCH', `/api/v1/prompts/${id}`, w.asUser(), { bogus: 1 })).statusCode).toBe(400)
    await inject('PATCH', `/api/v1/prompts/${id}`, w.asKey(), { template: 'Hello {{x}}' })
    const v1 = (
      await inject('POST', `/api/v1/prompts/${id}/publish`, w.asUser(), { changeLog: 'one' })
    ).json<PromptVersion>()
    await inject('POST', `/api/v1/prompts/${id}/environments/production/promote`, w.asKey(), { version: 1 })
    await inject('PATCH', `/api/v1/prompts/${id}`, w.asUser(), { isPublic: true })
    await inject('DELETE', `/api/v1/prompts/${id}/publish`, w.asUser())
    await inject('POST', `/api/v1/prompts/${id}/versions/${v1._id}/restore`, w.asUser(), {})
    const fork = await inject('POST', `/api/v1/prompts/${id}/versions/${v1._id}/fork`, w.asUser(), {
      name: 'Fork',
    })
    expect(fork.statusCode).toBe(201)
    await inject('DELETE', `/api/v1/prompts/${id}`, w.asUser())

    const expected = [
      ['prompt.created', 'apiKey'],
      ['prompt.updated', 'apiKey'],
      ['prompt.published', 'user'],
      ['environment.promoted', 'apiKey'],
      ['prompt.visibility.changed', 'user'],
      ['prompt.visibility.changed', 'user'],
      ['prompt.restored', 'user'],
      ['prompt.forked', 'user'],
      ['prompt.deleted', 'user'],
    ]
    let entries: AuditEntry[] = []
    await vi.waitFor(
      async () => {
        entries = (await auditLog(w, '?limit=100')).entries
        expect(entries).toHaveLength(expected.length)
      },
      { timeout: 5_000, interval: 50 },
    )
    const oldestFirst = [...entries].reverse()
    expect(oldestFirst.map((e) => [e.action, e.actor.type])).toEqual(expected)
    for (const e of entries) {
      expect(e.organizationId).toBe(w.org)
      expect(e.actor.id).toBe(e.actor.type === 'user' ? w.user : w.key)
      expect(e.requestId).toBeTruthy()
    }
    expect(oldestFirst[0]?.summary).toBe('Audited (audited)')
  })

  it('filters, paginates, keeps workspaces apart, is for OWNER/ADMIN only, and exports CSV safely', async () => {
    const w = workspace()
    const other = workspace()
    const ids: string[] = []
    for (const name of ['=cmd|" /C calc"!A0', 'Second', 'Third']) {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/prompts',
        headers: w.asUser(),
        payload: { name, template: 'x' },
      })
      ids.push(res.json<Prompt>()._id)
    }
    await t.app.inject({
      method: 'POST',
      url: '/api/v1/prompts',
      headers: other.asUser(),
      payload: { name: 'Theirs', template: 'x' },
    })
    await vi.waitFor(async () => expect((await auditLog(w)).pagination.total).toBe(3), {
      timeout: 5_000,
      interval: 50,
    })

    const page = await auditLog(w, '?limit=2&page=2')
    expect(page.entries).toHaveLength(1)
    expect(page.pagination).toMatchObject({ total: 3, page: 2, limit: 2 })
    expect((await auditLog(w, `?resourceId=${ids[1]}`)).entries.map((e) => e.summary)).toEqual([
      'Second (second)',
    ])
    expect((await auditLog(w, `?actor=${w.user}&action=prompt.created`)).pagination.total).toBe(3)
    expect((await auditLog(w, `?actor=${other.user}`)).pagination.total).toBe(0)
    expect((await auditLog(w, '?from=2999-01-01T00:00:00.000Z')).pagination.total).toBe(0)
    expect((await auditLog(w, '?to=2000-01-01T00:00:00.000Z')).pagination.total).toBe(0)
    expect((await auditLog(other)).entries.map((e) => e.summary)).toEqual(['Theirs (theirs)'])
    const bad = await t.app.inject({
      method: 'GET',
      url: `/api/v1/organizations/${w.org}/audit-log?from=yesterday`,
      headers: w.asUser(),
    })
    expect(bad.statusCode).toBe(400)

    const member = await t.app.inject({
      method: 'GET',
      url: `/api/v1/organizations/${w.org}/audit-log`,
      headers: w.asUser('MEMBER'),
    })
    expect(member.statusCode).toBe(403)
    expect(member.json().error.code).toBe('FORBIDDEN')
    const foreign = await t.app.inject({
      method: 'GET',
      url: `/api/v1/organizations/${other.org}/audit-log`,
      headers: w.asUser(),
    })
    expect(foreign.statusCode).toBe(404)

    const csv = await t.app.inject({
      method: 'GET',
      url: `/api/v1/organizations/${w.org}/audit-log/export?format=csv`,
      headers: w.asUser(),
    })
    expect(csv.statusCode).toBe(200)
    expect(csv.headers['content-type']).toMatch(/^text\/csv/)
    const lines = csv.body.trim().split('\r\n')
    expect(lines).toHaveLength(4)
    expect(lines[0]).toMatch(/^id,at,organizationId,actorType/)
    expect(csv.body).toContain(`"'=cmd|"" /C calc""!A0 (cmd-c-calc-a0)"`)
    expect(csv.body).not.toMatch(/,=cmd/)

    const jsonl = await t.app.inject({
      method: 'GET',
      url: `/api/v1/organizations/${w.org}/audit-log/export?format=jsonl`,
      headers: w.asUser(),
    })
    const rows = jsonl.body
      .trim()
      .split('\n')
      .map((l) => JSON.parse(l) as AuditEntry)
    expect(rows.map((r) => r.resource.id).sort()).toEqual([...ids].sort())
  })

  it('stores the entries identity and webhooks relay, once each, and ignores a malformed one', async () => {
    const w = workspace()
    const relayed = (action: AuditEntry['action'], name: string): AuditEntry => ({
      id: newId(),
      at: new Date().toISOString(),
      organizationId: w.org,
      actor: { type: 'user', id: w.user, name },
      action,
      resource: { type: 'apiKey', id: newId() },
      requestId: 'r-1',
      ip: '203.0.113.7',
      summary: `${action} by ${name}`,
    })
    const created = relayed('apiKey.created', 'Olga')
    const hook = relayed('webhook.deleted', 'Olga')
    await t.bus.publishDurable(SUBJECTS.auditEntry, created, created.id)
    // A relay that crashed after publishing publishes again under a new message id: stored once.
    await t.bus.publishDurable(SUBJECTS.auditEntry, created, `${created.id}-again`)
    await t.bus.publishDurable(SUBJECTS.auditEntry, { ...hook, action: 'something.else' }, newId())
    await t.bus.publishDurable(SUBJECTS.auditEntry, { ...hook, organizationId: 'not-an-id' }, newId())
    await t.bus.publishDurable(SUBJECTS.auditEntry, hook, hook.id)
    await vi.waitFor(async () => expect((await auditLog(w)).pagination.total).toBe(2), {
      timeout: 5_000,
      interval: 50,
    })
    const { entries } = await auditLog(w, '?action=apiKey.created')
    expect(entries).toEqual([created])
    expect((await auditLog(w, '?action=webhook.deleted')).entries).toEqual([hook])
  })

  it('exports by cursor: entries written during an export are neither listed twice nor make others skipped', async () => {
    const w = workspace()
    const service = new PromptsService(t.store, t.bus, () => {})
    const entry = (at: string): AuditEntry => ({
      id: newId(),
      at,
      organizationId: w.org,
      actor: { type: 'user', id: w.user, name: 'Olga' },
      action: 'prompt.updated',
      resource: { type: 'prompt', id: newId() },
      requestId: 'r-1',
      ip: '203.0.113.7',
      summary: 'updated',
    })
    // Seven entries, three of them in one millisecond (the walk's tie is broken by id).
    const before: AuditEntry[] = []
    for (const at of ['01', '02', '03', '03', '03', '04', '05']) {
      const e = entry(`2026-12-04T10:00:00.0${at}Z`)
      before.push(e)
      await t.store.ingestAudit(e)
    }
    const exported: string[] = []
    let pages = 0
    for await (const entries of service.exportAudit({ organizationId: w.org }, { pageSize: 3 })) {
      exported.push(...entries.map((e) => e.id))
      // Written while the export runs: newer than all of it, which shifts an offset's pages.
      if (pages++ < 2) for (let i = 0; i < 2; i++) await t.store.ingestAudit(entry(new Date().toISOString()))
    }
    expect(new Set(exported).size).toBe(exported.length)
    expect(exported).toEqual(
      [...before]
        .sort((a, b) => (a.at === b.at ? (a.id < b.id ? -1 : 1) : a.at < b.at ? -1 : 1))
        .reverse()
        .map((e) => e.id),
    )
    // `max` bounds the walk.
    const first: string[] = []
    for await (const entries of service.exportAudit({ organizationId: w.org }, { pageSize: 3, max: 4 }))
      first.push(...entries.map((e) => e.id))
    expect(first).toHaveLength(4)
  })
})
