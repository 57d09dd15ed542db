import { type AuditEntry, type CallerContext, SUBJECTS } from '@pm/contracts'
import { newId, signContext } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { IdentityService } from '../src/services/identity.ts'
import { anonymousContext, SECRET, startIdentity, type TestIdentity, TEST_PASSWORD_COST } from './helpers.ts'

const PASSWORD = 'a long and secret passphrase'

/**
 * The audit entries of identity's changes (DESIGN section 15): each written with its change
 * into the outbox and published on SUBJECTS.auditEntry, where this test listens as the prompts
 * service does. One service for the file; each test has organizations of its own.
 */
describe('identity: audit entries', () => {
  let t: TestIdentity
  let identity: IdentityService
  const published: AuditEntry[] = []

  beforeAll(async () => {
    t = await startIdentity({ AUDIT_RELAY_POLL_MS: '50' })
    identity = new IdentityService(t.store, t.bus, undefined, { passwordCost: TEST_PASSWORD_COST })
    await t.bus.consume(SUBJECTS.auditEntry, 'test-audit', async (data) => {
      published.push(data as AuditEntry)
    })
  })
  afterAll(async () => {
    await t.close()
  })

  const as = (context: Partial<CallerContext>) =>
    signContext({ kind: 'user', scopes: [], requestId: 'test', ...context }, SECRET)
  const req = (
    method: 'POST' | 'PATCH' | 'DELETE',
    url: string,
    context: string,
    payload?: object,
    headers: Record<string, string> = {},
  ) => t.app.inject({ method, url, payload, headers: { 'x-pm-context': context, ...headers } })

  /** The entries of an organization, oldest first, once `count` have arrived. */
  async function entriesOf(org: string, count: number): Promise<AuditEntry[]> {
    await vi.waitFor(() => expect(published.filter((e) => e.organizationId === org)).toHaveLength(count), {
      timeout: 5_000,
      interval: 20,
    })
    // No more arrive: what a refused request might have written would be published by now.
    await new Promise((r) => setTimeout(r, 150))
    const mine = published.filter((e) => e.organizationId === org)
    expect(mine).toHaveLength(count)
    return mine.sort((a, b) => a.at.localeCompare(b.at) || a.id.localeCompare(b.id))
  }

  async function workspace() {
    const tag = newId().slice(-8)
    const owner = await identity.createUser({
      email: `owner-${tag}@example.com`,
      password: PASSWORD,
      name: 'Olga',
    })
    const bob = await identity.createUser({ email: `bob-${tag}@example.com`, password: PASSWORD, name: '  ' })
    // Made by the CLI or bootstrap: no actor, no entry.
    const org = (await identity.createOrganization(`Acme ${tag}`, owner._id))._id
    const scopes = ['prompts:read', 'prompts:write', 'organization:read', 'organization:write'] as const
    const asOwner = as({
      userId: owner._id,
      organizationId: org,
      role: 'OWNER',
      scopes: [...scopes],
      actorName: 'Olga',
    })
    return { tag, owner, bob, org, asOwner }
  }

  it('records keys, members and settings once each, with the actor the gateway named, and nothing refused', async () => {
    const { tag, owner, bob, org, asOwner } = await workspace()
    const base = `/api/v1/organizations/${org}`
    const ip = { 'x-pm-client-ip': '203.0.113.7', 'x-request-id': 'req-key-1' }

    // Refused: by validation, by rule, or changing nothing. None of these writes an entry.
    expect((await req('POST', `${base}/api-keys`, asOwner, { name: '', scopes: ['nope'] })).statusCode).toBe(
      400,
    )
    expect((await req('PATCH', base, asOwner, { protectedEnvironments: ['staging'] })).statusCode).toBe(400)
    expect((await req('POST', `${base}/members`, asOwner, { email: 'nobody@example.com' })).statusCode).toBe(
      404,
    )

    const key = await req('POST', `${base}/api-keys`, asOwner, { name: 'CI', scopes: ['prompts:read'] }, ip)
    expect(key.statusCode).toBe(201)
    const keyId = key.json().apiKey._id as string
    expect((await req('DELETE', `${base}/api-keys/${keyId}`, asOwner)).statusCode).toBe(200)
    // Revoking again changes nothing: no second entry.
    expect((await req('DELETE', `${base}/api-keys/${keyId}`, asOwner)).statusCode).toBe(200)

    expect((await req('POST', `${base}/members`, asOwner, { email: bob.email })).statusCode).toBe(201)
    expect((await req('POST', `${base}/members`, asOwner, { email: bob.email })).statusCode).toBe(409)
    expect((await req('PATCH', `${base}/members/${bob._id}`, asOwner, { role: 'ADMIN' })).statusCode).toBe(
      200,
    )
    // The same role again: nothing changes, nothing is recorded.
    expect((await req('PATCH', `${base}/members/${bob._id}`, asOwner, { role: 'ADMIN' })).statusCode).toBe(
      200,
    )
    // An ADMIN may not make an OWNER (403): no entry.
    const asBob = as({ userId: bob._id, organizationId: org, role: 'ADMIN', scopes: ['organization:write'] })
    expect((await req('PATCH', `${base}/members/${owner._id}`, asBob, { role: 'MEMBER' })).statusCode).toBe(
      403,
    )

    // An API key with organization:write changes the settings: the key is the actor, by its name.
    const asKey = signContext(
      {
        kind: 'apiKey',
        apiKeyId: keyId,
        organizationId: org,
        scopes: ['organization:write'],
        actorName: 'CI',
        requestId: 'test',
      },
      SECRET,
    )
    expect((await req('PATCH', base, asKey, { name: `Acme ${tag} Ltd` })).statusCode).toBe(200)
    expect((await req('PATCH', base, asOwner, { protectedEnvironments: ['production'] })).statusCode).toBe(
      200,
    )
    expect((await req('DELETE', `${base}/members/${bob._id}`, asOwner)).statusCode).toBe(200)

    const entries = await entriesOf(org, 7)
    expect(entries.map((e) => [e.action, e.actor.type, e.actor.name])).toEqual([
      ['apiKey.created', 'user', 'Olga'],
      ['apiKey.revoked', 'user', 'Olga'],
      ['member.added', 'user', 'Olga'],
      ['member.updated', 'user', 'Olga'],
      ['organization.updated', 'apiKey', 'CI'],
      ['organization.updated', 'user', 'Olga'],
      ['member.removed', 'user', 'Olga'],
    ])
    const [created, revoked, added, updated, renamed, guarded, removed] = entries
    expect(created).toMatchObject({
      resource: { type: 'apiKey', id: keyId },
      ip: '203.0.113.7',
      requestId: 'req-key-1',
    })
    expect(created?.actor.id).toBe(owner._id)
    expect(created?.summary).toMatch(/^created API key "CI" \(pk_.+\) with prompts:read$/)
    expect(revoked?.summary).toMatch(/^revoked API key "CI"/)
    expect(added).toMatchObject({
      resource: { type: 'member', id: bob._id },
      summary: `added ${bob.email} as MEMBER`,
    })
    expect(updated?.summary).toBe(`changed ${bob.email}: role MEMBER → ADMIN`)
    expect(renamed?.actor.id).toBe(keyId)
    expect(renamed?.summary).toBe(`renamed to Acme ${tag} Ltd`)
    expect(guarded).toMatchObject({
      resource: { type: 'organization', id: org },
      summary: 'protected environments: production',
    })
    expect(removed?.summary).toBe(`removed ${bob.email} (ADMIN)`)
  })

  it('records an API key renamed, old and new name, once (the same name again changes nothing)', async () => {
    const { org, asOwner } = await workspace()
    const base = `/api/v1/organizations/${org}/api-keys`
    const key = await req('POST', base, asOwner, { name: 'CI', scopes: ['prompts:read'] })
    const { _id: keyId, prefix } = key.json().apiKey as { _id: string; prefix: string }
    expect((await req('PATCH', `${base}/${keyId}`, asOwner, { name: 'CI deploys' })).statusCode).toBe(200)
    expect((await req('PATCH', `${base}/${keyId}`, asOwner, { name: 'CI deploys' })).statusCode).toBe(200)
    expect((await req('PATCH', `${base}/${keyId}`, asOwner, { name: '' })).statusCode).toBe(400)
    const [, renamed] = await entriesOf(org, 2)
    expect(renamed).toMatchObject({
      action: 'apiKey.renamed',
      actor: { type: 'user', name: 'Olga' },
      resource: { type: 'apiKey', id: keyId },
      summary: `renamed API key "CI" (${prefix}…) to "CI deploys"`,
    })
  })

  it('names a user the gateway did not name from the user record (display name, else email)', async () => {
    const { bob } = await workspace()
    // Creating an organization names no workspace: the gateway looks up no membership.
    const res = await req('POST', '/api/v1/organizations', as({ userId: bob._id }), { name: 'Bob Works' })
    expect(res.statusCode).toBe(201)
    const [entry] = await entriesOf(res.json()._id, 1)
    // Bob's display name is blank: the email names him.
    expect(entry).toMatchObject({
      action: 'organization.created',
      actor: { type: 'user', id: bob._id, name: bob.email },
    })
  })

  it('records sign-ins and failed sign-ins in each organization of the user, and none for an unknown email', async () => {
    const { owner, org } = await workspace()
    const second = (await identity.createOrganization(`Second ${newId()}`, owner._id))._id
    const login = (email: string, password?: string) =>
      t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/login',
        payload: { email, ...(password !== undefined ? { password } : {}) },
        headers: { 'x-pm-context': anonymousContext(), 'x-pm-client-ip': '198.51.100.9' },
      })
    expect((await login(owner.email, 'a wrong passphrase!')).statusCode).toBe(401)
    expect((await login(owner.email, PASSWORD)).statusCode).toBe(200)
    const before = published.length
    expect((await login(`nobody-${newId()}@example.com`, PASSWORD)).statusCode).toBe(401)
    // A malformed request is refused before any check: nothing is recorded.
    expect((await login(owner.email)).statusCode).toBe(400)

    for (const id of [org, second]) {
      const entries = await entriesOf(id, 2)
      expect(entries.map((e) => [e.action, e.actor.id, e.actor.name, e.ip])).toEqual([
        ['user.sign_in_failed', owner._id, 'Olga', '198.51.100.9'],
        ['user.signed_in', owner._id, 'Olga', '198.51.100.9'],
      ])
      expect(entries[0]?.resource).toEqual({ type: 'user', id: owner._id })
    }
    expect(published.length).toBe(before)
  })
})
