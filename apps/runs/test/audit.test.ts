import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import { type AuditEntry, type CallerContext, CONTEXT_HEADER, type Connection, SUBJECTS } from '@pm/contracts'
import { type AuditContext, newId, SecretBox, signContext } from '@pm/kit'
import { afterAll, describe, expect, it, vi } from 'vitest'
import { buildApp, loadRunsConfig } from '../src/app.ts'
import { Connections } from '../src/services/connections.ts'
import { Egress } from '../src/services/egress.ts'
import { SqliteRunStore } from '../src/store/sqlite.ts'

/** The audit entries of connection changes (DESIGN section 15): the service with its SQLite store. */

const dir = mkdtempSync(join(tmpdir(), 'pm-runs-audit-'))
const store = new SqliteRunStore(join(dir, 'runs.db'))
const egress = new Egress('127.0.0.1', 1_000)
afterAll(async () => {
  await egress.close()
  await store.close()
  rmSync(dir, { recursive: true, force: true })
})

const KEY = 'sk-live-AUDITSECRET-QZWXQZWX'
const NEW_KEY = 'sk-live-ROTATEDSECRET-JKVYJKVY'
const HEADER_VALUE = 'Bearer HEADERSECRET-42'

const ada: AuditContext = {
  actor: { type: 'user', id: newId(), name: 'Ada' },
  requestId: 'req-audit-1',
  ip: '203.0.113.7',
}
const deployKey: AuditContext = {
  actor: { type: 'apiKey', id: newId(), name: 'deploy key' },
  requestId: 'req-audit-2',
  ip: '198.51.100.9',
}

/** The connections service on this file's store, a fresh sealing key, at most 5 a workspace. */
const connectionsOf = (opts: { onAudit?: () => void; maxPerOrganization?: number } = {}) =>
  new Connections({ store, secrets: new SecretBox(randomBytes(32)), egress, maxPerOrganization: 5, ...opts })

/** What the outbox holds for this organization, oldest first. */
async function entriesOf(org: string): Promise<AuditEntry[]> {
  return (await store.pendingAudit(1_000)).filter((e) => e.organizationId === org)
}

describe('connection names', () => {
  it('are stored trimmed, on create and on update', async () => {
    const org = newId()
    const connections = connectionsOf()
    const c = await connections.create(org, { name: '  local  ', provider: 'openai', apiKey: KEY })
    expect(c.name).toBe('local')
    expect((await connections.update(org, c._id, { name: '\tnot a tab inside ' })).name).toBe(
      'not a tab inside',
    )
  })
})

describe('connection changes in the audit log', () => {
  it('writes one entry per change, with the actor, resource, request and address', async () => {
    const org = newId()
    const onAudit = vi.fn()
    const connections = connectionsOf({ onAudit })
    const c = await connections.create(
      org,
      {
        name: 'local gateway',
        provider: 'openai-compatible',
        baseUrl: 'http://127.0.0.1:9/tenant-token-xyz/v1',
        apiKey: KEY,
        headers: { authorization: HEADER_VALUE },
      },
      ada,
    )
    await connections.update(
      org,
      c._id,
      { name: 'renamed', apiKey: NEW_KEY, models: ['m1'], headers: { 'x-team': HEADER_VALUE } },
      deployKey,
    )
    await connections.remove(org, c._id, ada)

    const entries = await entriesOf(org)
    expect(entries.map((e) => [e.action, e.actor, e.resource, e.requestId, e.ip])).toEqual([
      ['connection.created', ada.actor, { type: 'connection', id: c._id }, ada.requestId, ada.ip],
      [
        'connection.updated',
        deployKey.actor,
        { type: 'connection', id: c._id },
        deployKey.requestId,
        deployKey.ip,
      ],
      ['connection.deleted', ada.actor, { type: 'connection', id: c._id }, ada.requestId, ada.ip],
    ])
    expect(entries.map((e) => e.summary)).toEqual([
      'created the openai-compatible connection "local gateway" to 127.0.0.1:9',
      'updated the openai-compatible connection "renamed" to 127.0.0.1:9: renamed from "local gateway"; API key replaced; models m1; extra headers replaced (x-team)',
      'deleted the openai-compatible connection "renamed" to 127.0.0.1:9',
    ])
    expect(onAudit).toHaveBeenCalledTimes(3)
  })

  it('never holds a secret: no key, no key hint, no header value, no URL path', async () => {
    const org = newId()
    const connections = connectionsOf()
    const c = await connections.create(
      org,
      {
        name: 'prod',
        provider: 'openai-compatible',
        baseUrl: 'http://127.0.0.1:9/tenant-token-xyz/v1',
        apiKey: KEY,
        headers: { authorization: HEADER_VALUE },
      },
      ada,
    )
    await connections.update(org, c._id, { apiKey: NEW_KEY, headers: { authorization: HEADER_VALUE } }, ada)
    await connections.remove(org, c._id, ada)
    const text = JSON.stringify(await entriesOf(org))
    expect(text).toContain('connection.deleted')
    for (const secret of [
      KEY,
      NEW_KEY,
      'AUDITSECRET',
      'ROTATEDSECRET',
      'HEADERSECRET',
      c.keyHint,
      'tenant-token',
    ]) {
      expect(text).not.toContain(secret)
    }
  })

  it('writes none for a refused change, nor without an actor', async () => {
    const org = newId()
    const connections = connectionsOf({ maxPerOrganization: 1 })
    // Validation: an openai-compatible connection without a base URL, a base URL refused.
    await expect(
      connections.create(org, { name: 'x', provider: 'openai-compatible', apiKey: KEY }, ada),
    ).rejects.toMatchObject({ code: 'VALIDATION_ERROR' })
    await expect(
      connections.create(
        org,
        { name: 'x', provider: 'openai', baseUrl: 'https://user:pw@api.example.com', apiKey: KEY },
        ada,
      ),
    ).rejects.toMatchObject({ code: 'VALIDATION_ERROR' })
    // Not found.
    await expect(connections.update(org, newId(), { name: 'y' }, ada)).rejects.toMatchObject({
      code: 'NOT_FOUND',
    })
    await expect(connections.remove(org, newId(), ada)).rejects.toMatchObject({ code: 'NOT_FOUND' })
    // Another organization's connection is not found either.
    const other = await connections.create(newId(), { name: 'theirs', provider: 'openai', apiKey: KEY })
    await expect(connections.remove(org, other._id, ada)).rejects.toMatchObject({ code: 'NOT_FOUND' })
    // Past the bound.
    const only = await connections.create(org, { name: 'only', provider: 'openai', apiKey: KEY })
    await expect(
      connections.create(org, { name: 'two', provider: 'openai', apiKey: KEY }, ada),
    ).rejects.toMatchObject({ code: 'CONFLICT' })
    // A change made without an actor (no caller context) is not recorded.
    await connections.update(org, only._id, { name: 'still only' })
    expect(await entriesOf(org)).toEqual([])
  })
})

describe('the runs service relays its entries', () => {
  it('publishes them on the audit subject, named as the gateway named the caller', async () => {
    const appDir = mkdtempSync(join(tmpdir(), 'pm-runs-audit-app-'))
    const secret = randomBytes(32).toString('hex')
    const bus = new MemoryBus(10)
    const published: AuditEntry[] = []
    await bus.consume(SUBJECTS.auditEntry, 'test-audit', async (data) => {
      published.push(data as AuditEntry)
    })
    const app = await buildApp({
      config: loadRunsConfig({
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        INTERNAL_AUTH_SECRET: secret,
        DATA_DIR: appDir,
        PROVIDER_ALLOWED_HOSTS: '127.0.0.1',
        AUDIT_RELAY_POLL_MS: '50',
      }),
      bus,
    })
    try {
      await app.ready()
      const org = newId()
      const caller: CallerContext = {
        kind: 'user',
        userId: newId(),
        organizationId: org,
        role: 'ADMIN',
        scopes: ['organization:read', 'organization:write'],
        requestId: 'req-app-1',
        actorName: 'Ada',
      }
      const res = await app.inject({
        method: 'POST',
        url: `/api/v1/organizations/${org}/connections`,
        headers: { [CONTEXT_HEADER]: signContext(caller, secret), 'x-pm-client-ip': '203.0.113.7' },
        payload: { name: 'openai', provider: 'openai', apiKey: KEY },
      })
      expect(res.statusCode).toBe(201)
      const id = res.json<Connection>()._id
      await vi.waitFor(() => expect(published).toHaveLength(1), { timeout: 5_000, interval: 20 })
      expect(published[0]).toMatchObject({
        organizationId: org,
        action: 'connection.created',
        actor: { type: 'user', id: caller.userId, name: 'Ada' },
        resource: { type: 'connection', id },
        ip: '203.0.113.7',
        summary: 'created the openai connection "openai"',
      })
      expect(JSON.stringify(published)).not.toContain('AUDITSECRET')
    } finally {
      await app.close()
      await bus.close()
      rmSync(appDir, { recursive: true, force: true })
    }
  })
})
