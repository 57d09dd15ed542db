import { type Member, SUBJECTS } from '@pm/contracts'
import { hashApiKey, newId, signContext } from '@pm/kit'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { IdentityService } from '../src/services/identity.ts'
import { loadIdentityConfig } from '../src/config.ts'
import {
  keyContext,
  SECRET,
  serviceContext,
  startIdentity,
  type TestIdentity,
  userContext,
  TEST_PASSWORD_COST,
} from './helpers.ts'

const PASSWORD = 'a long and secret passphrase'

describe('identity: organizations, members, API keys', () => {
  let t: TestIdentity
  let identity: IdentityService
  let owner: string
  let org: string
  let bob: string
  let carol: string

  const req = (method: 'GET' | 'POST' | 'PATCH' | 'DELETE', url: string, context: string, payload?: object) =>
    t.app.inject({ method, url, payload, headers: { 'x-pm-context': context } })

  const asOwner = () => userContext(owner, org, 'OWNER')
  const asAdmin = (id: string) => userContext(id, org, 'ADMIN')

  beforeEach(async () => {
    t = await startIdentity()
    identity = new IdentityService(t.store, t.bus, undefined, { passwordCost: TEST_PASSWORD_COST })
    owner = (await identity.createUser({ email: 'owner@example.com', password: PASSWORD, name: 'Olga' }))._id
    bob = (await identity.createUser({ email: 'bob@example.com', password: PASSWORD, name: 'Bob' }))._id
    carol = (await identity.createUser({ email: 'carol@example.com', password: PASSWORD, name: 'Carol' }))._id
    org = (await identity.createOrganization('Acme', owner))._id
  })
  afterEach(async () => {
    await t.close()
  })

  it('creates, reads, lists and renames organizations', async () => {
    const created = await req('POST', '/api/v1/organizations', userContext(bob), { name: '  Bob Works ' })
    expect(created.statusCode).toBe(201)
    expect(created.json()).toMatchObject({ name: 'Bob Works', slug: 'bob-works' })
    const bobOrg = created.json()._id as string
    expect(await t.store.getMembership(bobOrg, bob)).toMatchObject({ role: 'OWNER', status: 'ACTIVE' })

    const listed = await req('GET', '/api/v1/organizations', userContext(bob))
    expect(listed.json().organizations.map((o: { _id: string }) => o._id)).toEqual([bobOrg])

    const got = await req('GET', `/api/v1/organizations/${org}`, asOwner())
    expect(got.statusCode).toBe(200)
    expect(got.json()).toMatchObject({ _id: org, name: 'Acme', slug: 'acme' })

    const renamed = await req('PATCH', `/api/v1/organizations/${org}`, asOwner(), { name: 'Acme Corp' })
    expect(renamed.statusCode).toBe(200)
    expect(renamed.json()).toMatchObject({ name: 'Acme Corp', slug: 'acme' }) // the slug stays
    expect(Date.parse(renamed.json().updatedAt)).toBeGreaterThanOrEqual(Date.parse(got.json().updatedAt))

    const unknownField = await req('PATCH', `/api/v1/organizations/${org}`, asOwner(), {
      name: 'x',
      slug: 'y',
    })
    expect(unknownField.statusCode).toBe(400)
    const blank = await req('PATCH', `/api/v1/organizations/${org}`, asOwner(), { name: '   ' })
    expect(blank.statusCode).toBe(400)
    // A MEMBER's context carries no organization:write.
    const member = await req('PATCH', `/api/v1/organizations/${org}`, userContext(bob, org, 'MEMBER'), {
      name: 'Nope',
    })
    expect(member.statusCode).toBe(403)
    expect(member.json().error.code).toBe('INSUFFICIENT_SCOPE')
    // Another workspace than the context's is a 404.
    const other = await req('GET', `/api/v1/organizations/${newId()}`, asOwner())
    expect(other.statusCode).toBe(404)
  })

  it('shows an API key exactly its own organization', async () => {
    await identity.createOrganization('Second', owner)
    const res = await req('GET', '/api/v1/organizations', keyContext(newId(), org, ['organization:read']))
    expect(res.statusCode).toBe(200)
    expect(res.json().organizations.map((o: { _id: string }) => o._id)).toEqual([org])
  })

  it('adds existing users as ACTIVE members, changes and removes them', async () => {
    const added = await req('POST', `/api/v1/organizations/${org}/members`, asOwner(), {
      email: 'BOB@example.com',
    })
    expect(added.statusCode).toBe(201)
    expect(added.json<Member>()).toMatchObject({
      organizationId: org,
      userId: bob,
      email: 'bob@example.com',
      name: 'Bob',
      role: 'MEMBER',
      status: 'ACTIVE',
    })
    expect(t.broadcasts).toContainEqual({
      subject: SUBJECTS.membershipChanged,
      data: { organizationId: org, userId: bob },
    })
    const again = await req('POST', `/api/v1/organizations/${org}/members`, asOwner(), {
      email: 'bob@example.com',
    })
    expect(again.statusCode).toBe(409)
    const nobody = await req('POST', `/api/v1/organizations/${org}/members`, asOwner(), {
      email: 'x@example.com',
    })
    expect(nobody.statusCode).toBe(404)

    const list = await req('GET', `/api/v1/organizations/${org}/members`, userContext(bob, org, 'MEMBER'))
    expect(list.statusCode).toBe(200)
    expect(list.json<{ members: Member[] }>().members.map((m) => [m.email, m.role])).toEqual([
      ['owner@example.com', 'OWNER'],
      ['bob@example.com', 'MEMBER'],
    ])

    const promoted = await req('PATCH', `/api/v1/organizations/${org}/members/${bob}`, asOwner(), {
      role: 'ADMIN',
    })
    expect(promoted.statusCode).toBe(200)
    expect(promoted.json<Member>().role).toBe('ADMIN')
    const suspended = await req('PATCH', `/api/v1/organizations/${org}/members/${bob}`, asOwner(), {
      status: 'SUSPENDED',
    })
    expect(suspended.json<Member>()).toMatchObject({ role: 'ADMIN', status: 'SUSPENDED' })
    // A suspended member's organizations no longer include this one.
    expect((await t.store.listOrganizationsForUser(bob)).map((o) => o._id)).not.toContain(org)

    const empty = await req('PATCH', `/api/v1/organizations/${org}/members/${bob}`, asOwner(), {})
    expect(empty.statusCode).toBe(400)
    const invited = await req('PATCH', `/api/v1/organizations/${org}/members/${bob}`, asOwner(), {
      status: 'INVITED',
    })
    expect(invited.statusCode).toBe(400)

    const removed = await req('DELETE', `/api/v1/organizations/${org}/members/${bob}`, asOwner())
    expect(removed.statusCode).toBe(200)
    expect(removed.json<Member>().userId).toBe(bob)
    expect(await t.store.getMembership(org, bob)).toBeNull()
    const gone = await req('DELETE', `/api/v1/organizations/${org}/members/${bob}`, asOwner())
    expect(gone.statusCode).toBe(404)
  })

  it('lets only an OWNER make or unmake an OWNER', async () => {
    await req('POST', `/api/v1/organizations/${org}/members`, asOwner(), {
      email: 'bob@example.com',
      role: 'ADMIN',
    })
    const admin = asAdmin(bob)
    const addOwner = await req('POST', `/api/v1/organizations/${org}/members`, admin, {
      email: 'carol@example.com',
      role: 'OWNER',
    })
    expect(addOwner.statusCode).toBe(403)
    expect(addOwner.json().error.code).toBe('FORBIDDEN')
    const addAdmin = await req('POST', `/api/v1/organizations/${org}/members`, admin, {
      email: 'carol@example.com',
      role: 'ADMIN',
    })
    expect(addAdmin.statusCode).toBe(201)
    expect(
      (await req('PATCH', `/api/v1/organizations/${org}/members/${carol}`, admin, { role: 'MEMBER' }))
        .statusCode,
    ).toBe(200)
    expect(
      (await req('PATCH', `/api/v1/organizations/${org}/members/${owner}`, admin, { role: 'ADMIN' }))
        .statusCode,
    ).toBe(403)
    expect((await req('DELETE', `/api/v1/organizations/${org}/members/${owner}`, admin)).statusCode).toBe(403)
    expect(
      (await req('PATCH', `/api/v1/organizations/${org}/members/${carol}`, admin, { role: 'OWNER' }))
        .statusCode,
    ).toBe(403)

    // An API key with organization:write manages members but never OWNERs.
    const key = keyContext(newId(), org, ['organization:write'])
    expect(
      (await req('PATCH', `/api/v1/organizations/${org}/members/${carol}`, key, { role: 'ADMIN' }))
        .statusCode,
    ).toBe(200)
    expect(
      (await req('PATCH', `/api/v1/organizations/${org}/members/${owner}`, key, { status: 'SUSPENDED' }))
        .statusCode,
    ).toBe(403)
    const readOnlyKey = keyContext(newId(), org, ['organization:read'])
    const refused = await req('DELETE', `/api/v1/organizations/${org}/members/${carol}`, readOnlyKey)
    expect(refused.statusCode).toBe(403)
    expect(refused.json().error.code).toBe('INSUFFICIENT_SCOPE')
  })

  it('never leaves an organization without an ACTIVE OWNER', async () => {
    for (const change of [{ role: 'ADMIN' }, { status: 'SUSPENDED' }]) {
      const res = await req('PATCH', `/api/v1/organizations/${org}/members/${owner}`, asOwner(), change)
      expect(res.statusCode).toBe(409)
      expect(res.json().error.code).toBe('CONFLICT')
    }
    expect((await req('DELETE', `/api/v1/organizations/${org}/members/${owner}`, asOwner())).statusCode).toBe(
      409,
    )

    await req('POST', `/api/v1/organizations/${org}/members`, asOwner(), {
      email: 'bob@example.com',
      role: 'OWNER',
    })
    // With a second OWNER, the first may step down.
    const stepDown = await req('PATCH', `/api/v1/organizations/${org}/members/${owner}`, asOwner(), {
      role: 'ADMIN',
    })
    expect(stepDown.statusCode).toBe(200)
    const bobAlone = await req(
      'DELETE',
      `/api/v1/organizations/${org}/members/${bob}`,
      userContext(bob, org, 'OWNER'),
    )
    expect(bobAlone.statusCode).toBe(409)
  })

  it('two OWNERs stepping down at once leave one OWNER', async () => {
    await req('POST', `/api/v1/organizations/${org}/members`, asOwner(), {
      email: 'bob@example.com',
      role: 'OWNER',
    })
    const results = await Promise.all([
      req('PATCH', `/api/v1/organizations/${org}/members/${owner}`, asOwner(), { role: 'MEMBER' }),
      req('PATCH', `/api/v1/organizations/${org}/members/${bob}`, userContext(bob, org, 'OWNER'), {
        role: 'MEMBER',
      }),
    ])
    expect(results.map((r) => r.statusCode).sort()).toEqual([200, 409])
    const owners = (await t.store.listMemberships(org)).filter(
      (m) => m.role === 'OWNER' && m.status === 'ACTIVE',
    )
    expect(owners).toHaveLength(1)
  })

  it('an ADMIN cannot remove or demote a member an OWNER made OWNER after the ADMIN was checked', async () => {
    await req('POST', `/api/v1/organizations/${org}/members`, asOwner(), {
      email: 'bob@example.com',
      role: 'ADMIN',
    })
    await req('POST', `/api/v1/organizations/${org}/members`, asOwner(), { email: 'carol@example.com' })
    // The race, made certain: the service's first look sees carol a MEMBER, and an OWNER
    // promotes her before the ADMIN's change reaches the store.
    const store = t.store
    const racing = new Proxy(store, {
      get(target, prop, receiver) {
        if (prop === 'getMembership') {
          return async (o: string, u: string) => {
            const seen = await target.getMembership(o, u)
            if (u === carol) await target.changeMembership(org, carol, { role: 'OWNER' })
            return seen
          }
        }
        const value = Reflect.get(target, prop, receiver)
        return typeof value === 'function' ? value.bind(target) : value
      },
    })
    const service = new IdentityService(racing, t.bus, undefined, { passwordCost: TEST_PASSWORD_COST })
    const admin = { kind: 'user' as const, userId: bob, role: 'ADMIN' as const }
    await expect(service.removeMember(org, admin, carol)).rejects.toMatchObject({ code: 'FORBIDDEN' })
    expect(await store.getMembership(org, carol)).toMatchObject({ role: 'OWNER', status: 'ACTIVE' })
    await store.changeMembership(org, carol, { role: 'MEMBER' })
    await expect(service.updateMember(org, admin, carol, { role: 'MEMBER' })).rejects.toMatchObject({
      code: 'FORBIDDEN',
    })
    expect(await store.getMembership(org, carol)).toMatchObject({ role: 'OWNER' })
  })

  it('shows a key once, lists keys without secrets, revokes with a broadcast', async () => {
    const created = await req('POST', `/api/v1/organizations/${org}/api-keys`, asOwner(), {
      name: 'ci',
      scopes: ['prompts:read', 'organization:read'],
      expiresAt: new Date(Date.now() + 86_400_000).toISOString(),
      rateLimit: { points: 5, durationSeconds: 10 },
    })
    expect(created.statusCode).toBe(201)
    const { key, apiKey } = created.json()
    expect(key).toMatch(/^pk_[0-9A-Za-z]{38}$/)
    expect(apiKey).toMatchObject({
      name: 'ci',
      scopes: ['prompts:read', 'organization:read'],
      prefix: key.slice(0, 10),
    })
    expect(apiKey).not.toHaveProperty('hash')
    expect((await t.store.findApiKeyByHash(hashApiKey(key)))?._id).toBe(apiKey._id)

    const listed = await req('GET', `/api/v1/organizations/${org}/api-keys`, asOwner())
    expect(listed.statusCode).toBe(200)
    expect(listed.body).not.toContain(key)
    expect(listed.body).not.toContain(hashApiKey(key))
    expect(listed.json().apiKeys).toHaveLength(1)

    const past = await req('POST', `/api/v1/organizations/${org}/api-keys`, asOwner(), {
      name: 'old',
      scopes: ['prompts:read'],
      expiresAt: '2001-01-01T00:00:00.000Z',
    })
    expect(past.statusCode).toBe(400)
    // A leap second passes the date-time format but no Date reads it (it answered 500).
    const leap = await req('POST', `/api/v1/organizations/${org}/api-keys`, asOwner(), {
      name: 'leap',
      scopes: ['prompts:read'],
      expiresAt: '2030-01-01T23:59:60Z',
    })
    expect(leap.statusCode).toBe(400)
    expect(leap.json().error.code).toBe('VALIDATION_ERROR')
    const blank = await req('POST', `/api/v1/organizations/${org}/api-keys`, asOwner(), {
      name: '   ',
      scopes: ['prompts:read'],
    })
    expect(blank.statusCode).toBe(400)
    const duplicate = await req('POST', `/api/v1/organizations/${org}/api-keys`, asOwner(), {
      name: 'x',
      scopes: ['prompts:read', 'prompts:read'],
    })
    expect(duplicate.statusCode).toBe(400)
    const noScopes = await req('POST', `/api/v1/organizations/${org}/api-keys`, asOwner(), {
      name: 'x',
      scopes: [],
    })
    expect(noScopes.statusCode).toBe(400)
    const badScope = await req('POST', `/api/v1/organizations/${org}/api-keys`, asOwner(), {
      name: 'x',
      scopes: ['admin:all'],
    })
    expect(badScope.statusCode).toBe(400)

    // MEMBERs and API keys do not manage keys.
    const member = await req('GET', `/api/v1/organizations/${org}/api-keys`, userContext(bob, org, 'MEMBER'))
    expect(member.statusCode).toBe(403)
    const viaKey = await req(
      'GET',
      `/api/v1/organizations/${org}/api-keys`,
      keyContext(apiKey._id, org, ['organization:write']),
    )
    expect(viaKey.statusCode).toBe(403)
    expect(viaKey.json().error.code).toBe('USER_TOKEN_REQUIRED')

    // Renamed: only its name changes; a blank or long name, another property, another
    // organization's key or a MEMBER is refused.
    const keyUrl = `/api/v1/organizations/${org}/api-keys/${apiKey._id}`
    const renamed = await req('PATCH', keyUrl, asOwner(), { name: 'ci deploys' })
    expect(renamed.statusCode).toBe(200)
    expect(renamed.json()).toEqual({ ...apiKey, name: 'ci deploys' })
    expect(renamed.body).not.toContain(key)
    expect((await t.store.findApiKeyByHash(hashApiKey(key)))?.name).toBe('ci deploys')
    for (const body of [
      { name: '' },
      { name: '   ' },
      { name: 'x'.repeat(101) },
      {},
      { name: 'x', scopes: [] },
    ]) {
      const res = await req('PATCH', keyUrl, asOwner(), body)
      expect([res.statusCode, res.json().error.code], JSON.stringify(body)).toEqual([400, 'VALIDATION_ERROR'])
    }
    expect(
      (await req('PATCH', `/api/v1/organizations/${org}/api-keys/${newId()}`, asOwner(), { name: 'x' }))
        .statusCode,
    ).toBe(404)
    expect((await req('PATCH', keyUrl, userContext(bob, org, 'MEMBER'), { name: 'x' })).statusCode).toBe(403)

    const revoked = await req('DELETE', `/api/v1/organizations/${org}/api-keys/${apiKey._id}`, asOwner())
    expect(revoked.statusCode).toBe(200)
    expect(revoked.json().revokedAt).toBeTypeOf('string')
    expect(revoked.body).not.toContain(key)
    expect(t.broadcasts).toContainEqual({
      subject: SUBJECTS.apiKeyRevoked,
      data: { keyId: apiKey._id, hash: hashApiKey(key), organizationId: org },
    })
    const otherOrg = await req('DELETE', `/api/v1/organizations/${newId()}/api-keys/${apiKey._id}`, asOwner())
    expect(otherOrg.statusCode).toBe(404)

    expect(t.logs.join('\n')).not.toContain(key)
  })

  it('mints at most API_KEY_MAX_PER_ORG usable keys in an organization (200 by default): 409 past it', async () => {
    expect(loadIdentityConfig({ INTERNAL_AUTH_SECRET: SECRET }).API_KEY_MAX_PER_ORG).toBe(200)
    const bounded = new IdentityService(t.store, t.bus, undefined, {
      passwordCost: TEST_PASSWORD_COST,
      maxApiKeysPerOrganization: 2,
    })
    const input = { name: 'k', scopes: ['prompts:read' as const] }
    const first = await bounded.createApiKey(org, owner, input)
    await bounded.createApiKey(org, owner, input)
    await expect(bounded.createApiKey(org, owner, input)).rejects.toMatchObject({
      code: 'CONFLICT',
      message: expect.stringMatching(/at most 2 API keys .*revoke one first/),
    })
    expect((await t.store.listApiKeys(org)).length).toBe(2)
    await bounded.revokeApiKey(org, first.apiKey._id)
    await bounded.createApiKey(org, owner, input)
    expect((await t.store.listApiKeys(org)).length).toBe(3)
  })

  it('serves internal routes to the gateway only', async () => {
    const { key, apiKey } = await identity.createApiKey(org, owner, { name: 'k', scopes: ['prompts:read'] })
    const body = { hash: hashApiKey(key) }
    const resolved = await req('POST', '/internal/api-keys/resolve', serviceContext(), body)
    expect(resolved.statusCode).toBe(200)
    expect(resolved.json()).toMatchObject({ _id: apiKey._id, organizationId: org, scopes: ['prompts:read'] })
    expect(resolved.json()).not.toHaveProperty('hash')
    expect((await req('POST', '/internal/api-keys/resolve', asOwner(), body)).statusCode).toBe(404)
    const unknown = await req('POST', '/internal/api-keys/resolve', serviceContext(), {
      hash: 'a'.repeat(64),
    })
    expect(unknown.statusCode).toBe(404)
    const m = await req('GET', `/internal/memberships/${org}/${owner}`, serviceContext())
    expect(m.json()).toMatchObject({ role: 'OWNER', status: 'ACTIVE' })
    const forged = signContext({ kind: 'service', scopes: [], requestId: 'x' }, `${SECRET}-not`)
    expect((await req('GET', `/internal/memberships/${org}/${owner}`, forged)).statusCode).toBe(401)
  })
})
