import type { AuditEntry } from '@pm/contracts'
import { newId } from '@pm/kit'
import { connectMongo } from '@pm/kit/mongo'
import { storeBackends } from '@pm/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import { MongoIdentityStore } from '../src/store/mongo.ts'
import { SqliteIdentityStore } from '../src/store/sqlite.ts'
import { type ApiKeyRecord, DuplicateError, type IdentityStore } from '../src/store/types.ts'

const backends = await storeBackends<IdentityStore>({
  sqlite: (file) => new SqliteIdentityStore(file),
  mongo: async (url, db) => {
    const store = new MongoIdentityStore(await connectMongo(url), db)
    await store.init()
    return store
  },
})

const now = () => new Date().toISOString()

function entry(organizationId: string, action: AuditEntry['action'], at = now()): AuditEntry {
  return {
    id: newId(),
    at,
    organizationId,
    actor: { type: 'user', id: newId(), name: 'Olga' },
    action,
    resource: { type: 'organization', id: organizationId },
    requestId: 'r',
    ip: '127.0.0.1',
    summary: action,
  }
}

function user(email: string) {
  return { _id: newId(), email, name: 'U', passwordHash: 'h', createdAt: now() }
}

function key(organizationId: string, overrides: Partial<ApiKeyRecord> = {}): ApiKeyRecord {
  return {
    _id: newId(),
    organizationId,
    name: 'k',
    prefix: 'pk_abc',
    hash: newId() + newId(),
    scopes: ['prompts:read'],
    expiresAt: null,
    rateLimit: { points: 5, durationSeconds: 60 },
    createdBy: newId(),
    createdAt: now(),
    lastUsedAt: null,
    revokedAt: null,
    ...overrides,
  }
}

for (const backend of backends) {
  describe.skipIf(!backend.available)(`IdentityStore contract: ${backend.name}`, () => {
    let store: IdentityStore
    const open = async () => {
      store = await backend.open()
      return store
    }
    afterEach(async () => {
      await store?.close()
    })

    it('creates users with a unique email', async () => {
      const s = await open()
      const u = user('a@example.com')
      await s.createUser(u)
      expect(await s.findUserByEmail('a@example.com')).toEqual(u)
      expect(await s.findUserById(u._id)).toEqual(u)
      await expect(s.createUser(user('a@example.com'))).rejects.toBeInstanceOf(DuplicateError)
      expect(await s.findUserByEmail('nobody@example.com')).toBeNull()
    })

    it('creates an organization with its OWNER membership, and lists ACTIVE ones', async () => {
      const s = await open()
      const u = user('o@example.com')
      await s.createUser(u)
      const org = { _id: newId(), name: 'Acme', slug: 'acme', createdAt: now(), updatedAt: now() }
      await s.createOrganization(org, {
        organizationId: org._id,
        userId: u._id,
        role: 'OWNER',
        status: 'ACTIVE',
        createdAt: now(),
      })
      expect(await s.getOrganization(org._id)).toEqual(org)
      expect(await s.getMembership(org._id, u._id)).toMatchObject({ role: 'OWNER', status: 'ACTIVE' })
      expect((await s.listOrganizationsForUser(u._id)).map((o) => o._id)).toEqual([org._id])
      expect(await s.isSlugTaken('acme')).toBe(true)
      const dup = { ...org, _id: newId() }
      await expect(
        s.createOrganization(dup, {
          organizationId: dup._id,
          userId: u._id,
          role: 'OWNER',
          status: 'ACTIVE',
          createdAt: now(),
        }),
      ).rejects.toBeInstanceOf(DuplicateError)
      // Nothing half-written: the failed organization left no membership.
      expect(await s.getMembership(dup._id, u._id)).toBeNull()
    })

    it('stores API keys by hash, lists them, revokes once', async () => {
      const s = await open()
      const org = newId()
      const k = key(org)
      await s.createApiKey(k)
      expect(await s.findApiKeyByHash(k.hash)).toEqual(k)
      expect((await s.listApiKeys(org)).map((x) => x._id)).toEqual([k._id])
      expect(await s.revokeApiKey(newId(), k._id, now())).toBeNull()
      const first = await s.revokeApiKey(org, k._id, '2026-01-01T00:00:00.000Z')
      expect(first?.revokedAt).toBe('2026-01-01T00:00:00.000Z')
      const second = await s.revokeApiKey(org, k._id, '2027-01-01T00:00:00.000Z')
      expect(second?.revokedAt).toBe('2026-01-01T00:00:00.000Z')
      await s.touchApiKey(k._id, '2026-02-02T00:00:00.000Z')
      expect((await s.findApiKeyByHash(k.hash))?.lastUsedAt).toBe('2026-02-02T00:00:00.000Z')
    })

    it('creates a key only while the organization holds fewer usable keys than the limit', async () => {
      const s = await open()
      const org = newId()
      const limit = { max: 2, now: '2026-06-01T00:00:00.000Z' }
      const first = key(org)
      expect(await s.createApiKey(first, [], limit)).toBe(true)
      // An expired key and another organization's do not count.
      expect(await s.createApiKey(key(org, { expiresAt: '2026-05-01T00:00:00.000Z' }))).toBe(true)
      expect(await s.createApiKey(key(newId()), [], limit)).toBe(true)
      expect(await s.createApiKey(key(org), [], limit)).toBe(true)
      const refused = key(org)
      expect(await s.createApiKey(refused, [], limit)).toBe(false)
      expect(await s.findApiKeyByHash(refused.hash)).toBeNull()
      // A revoked one frees its place.
      await s.revokeApiKey(org, first._id, limit.now)
      expect(await s.createApiKey(refused, [], limit)).toBe(true)
      expect((await s.listApiKeys(org)).length).toBe(4)
    })

    it('renames an API key within its organization, with its audit entry only when the name changes', async () => {
      const s = await open()
      const org = newId()
      const k = key(org)
      await s.createApiKey(k)
      const seen: string[] = []
      const audit = (before: ApiKeyRecord) => {
        seen.push(before.name)
        return []
      }
      expect(await s.renameApiKey(newId(), k._id, 'deploy', audit)).toBeNull()
      expect((await s.renameApiKey(org, k._id, 'deploy', audit))?.name).toBe(k.name)
      expect((await s.findApiKeyByHash(k.hash))?.name).toBe('deploy')
      expect((await s.renameApiKey(org, k._id, 'deploy', audit))?.name).toBe('deploy')
      expect(seen).toEqual([k.name])
      expect(await s.findApiKeyByHash(k.hash)).toEqual({ ...k, name: 'deploy' })
    })

    it('writes audit entries with their change only, and hands them to the relay until sent', async () => {
      const s = await open()
      const org = {
        _id: newId(),
        name: 'Audited',
        slug: `audited-${newId()}`,
        createdAt: now(),
        updatedAt: now(),
      }
      const owner = {
        organizationId: org._id,
        userId: newId(),
        role: 'OWNER' as const,
        status: 'ACTIVE' as const,
        createdAt: now(),
      }
      const made = entry(org._id, 'organization.created', '2026-01-01T00:00:01.000Z')
      await s.createOrganization(org, owner, [made])
      // An organization that does not exist is not updated: its entry is not written.
      expect(
        await s.updateOrganization(newId(), { name: 'x' }, now(), [entry(org._id, 'organization.updated')]),
      ).toBeNull()
      const k = key(org._id)
      const keyMade = entry(org._id, 'apiKey.created', '2026-01-01T00:00:02.000Z')
      await s.createApiKey(k, [keyMade])
      const revoked = entry(org._id, 'apiKey.revoked', '2026-01-01T00:00:03.000Z')
      await s.revokeApiKey(org._id, k._id, now(), (r) => [{ ...revoked, summary: `revoked ${r.name}` }])
      // A second revoke changes nothing: no entry.
      await s.revokeApiKey(org._id, k._id, now(), () => [entry(org._id, 'apiKey.revoked')])
      // A refused membership change (the last OWNER) writes nothing.
      const last = await s.changeMembership(org._id, owner.userId, { role: 'ADMIN' }, () => [
        entry(org._id, 'member.updated'),
      ])
      expect(last.outcome).toBe('last-owner')
      const pending = await s.pendingAudit(10)
      expect(pending.map((e) => [e.id, e.summary])).toEqual([
        [made.id, made.summary],
        [keyMade.id, keyMade.summary],
        [revoked.id, 'revoked k'],
      ])
      expect(pending[0]).toEqual(made)
      await s.markAuditSent([made.id, keyMade.id], now())
      expect((await s.pendingAudit(10)).map((e) => e.id)).toEqual([revoked.id])
      // Sent entries are forgotten after the retention; unsent ones stay.
      expect(await s.pruneAuditOutbox('2999-01-01T00:00:00.000Z')).toBe(2)
      expect((await s.pendingAudit(10)).map((e) => e.id)).toEqual([revoked.id])
    })

    it('renames organizations and finds them by slug', async () => {
      const s = await open()
      const org = { _id: newId(), name: 'Acme', slug: 'acme-x', createdAt: now(), updatedAt: now() }
      await s.createOrganization(org, {
        organizationId: org._id,
        userId: newId(),
        role: 'OWNER',
        status: 'ACTIVE',
        createdAt: now(),
      })
      expect(await s.findOrganizationBySlug('acme-x')).toEqual(org)
      expect(await s.findOrganizationBySlug('nope')).toBeNull()
      const renamed = await s.updateOrganization(org._id, { name: 'Acme 2' }, '2030-01-01T00:00:00.000Z')
      expect(renamed).toEqual({ ...org, name: 'Acme 2', updatedAt: '2030-01-01T00:00:00.000Z' })
      expect(await s.getOrganization(org._id)).toEqual(renamed)
      expect(await s.updateOrganization(newId(), { name: 'x' }, now())).toBeNull()
      // Protected environments (DESIGN section 15): set without touching the name, cleared to none.
      const at = '2030-01-02T00:00:00.000Z'
      const guarded = await s.updateOrganization(org._id, { protectedEnvironments: ['production'] }, at)
      expect(guarded).toEqual({ ...renamed, protectedEnvironments: ['production'], updatedAt: at })
      expect(await s.getOrganization(org._id)).toEqual(guarded)
      const cleared = await s.updateOrganization(org._id, { protectedEnvironments: [] }, at)
      expect(cleared).toEqual({ ...renamed, updatedAt: at })
    })

    it('adds, lists, changes and removes memberships, keeping one ACTIVE OWNER', async () => {
      const s = await open()
      const [a, b] = [user('ma@example.com'), user('mb@example.com')]
      await s.createUser(a)
      await s.createUser(b)
      expect((await s.findUsersByIds([a._id, b._id, newId()])).map((u) => u._id).sort()).toEqual(
        [a._id, b._id].sort(),
      )
      expect(await s.findUsersByIds([])).toEqual([])
      const org = { _id: newId(), name: 'M', slug: 'm-org', createdAt: now(), updatedAt: now() }
      await s.createOrganization(org, {
        organizationId: org._id,
        userId: a._id,
        role: 'OWNER',
        status: 'ACTIVE',
        createdAt: '2020-01-01T00:00:00.000Z',
      })
      const mb = {
        organizationId: org._id,
        userId: b._id,
        role: 'MEMBER' as const,
        status: 'ACTIVE' as const,
        createdAt: '2021-01-01T00:00:00.000Z',
      }
      await s.addMembership(mb)
      await expect(s.addMembership(mb)).rejects.toBeInstanceOf(DuplicateError)
      expect((await s.listMemberships(org._id)).map((m) => m.userId)).toEqual([a._id, b._id])

      expect(await s.changeMembership(org._id, a._id, { role: 'ADMIN' })).toEqual({ outcome: 'last-owner' })
      expect(await s.changeMembership(org._id, a._id, { status: 'SUSPENDED' })).toEqual({
        outcome: 'last-owner',
      })
      expect(await s.changeMembership(org._id, a._id, 'remove')).toEqual({ outcome: 'last-owner' })
      expect(await s.changeMembership(org._id, newId(), 'remove')).toEqual({ outcome: 'not-found' })

      const suspended = await s.changeMembership(org._id, b._id, { status: 'SUSPENDED' })
      expect(suspended).toEqual({ outcome: 'changed', membership: { ...mb, status: 'SUSPENDED' } })
      expect((await s.listOrganizationsForUser(b._id)).map((o) => o._id)).toEqual([])
      // A SUSPENDED OWNER is no OWNER: a still needs to stay.
      await s.changeMembership(org._id, b._id, { role: 'OWNER' })
      expect(await s.changeMembership(org._id, a._id, { role: 'MEMBER' })).toEqual({ outcome: 'last-owner' })
      await s.changeMembership(org._id, b._id, { status: 'ACTIVE' })
      expect(await s.changeMembership(org._id, a._id, { role: 'MEMBER' })).toMatchObject({
        outcome: 'changed',
      })
      expect(await s.getMembership(org._id, a._id)).toMatchObject({ role: 'MEMBER', status: 'ACTIVE' })

      expect(await s.changeMembership(org._id, a._id, 'remove')).toMatchObject({
        outcome: 'removed',
        membership: { userId: a._id, role: 'MEMBER' },
      })
      expect(await s.getMembership(org._id, a._id)).toBeNull()
      expect((await s.listMemberships(org._id)).map((m) => m.userId)).toEqual([b._id])
      // The organization document is unchanged by membership bookkeeping.
      expect(await s.getOrganization(org._id)).toEqual(org)
    })

    it('uses a refresh token once and revokes its family', async () => {
      const s = await open()
      const familyId = newId()
      const token = (hash: string) => ({
        _id: newId(),
        familyId,
        userId: newId(),
        organizationId: null,
        hash,
        createdAt: now(),
        expiresAt: new Date(Date.now() + 60_000).toISOString(),
        usedAt: null,
        revokedAt: null,
      })
      const t1 = token('h1'.padEnd(64, '0'))
      const t2 = token('h2'.padEnd(64, '0'))
      await s.createRefreshToken(t1)
      await s.createRefreshToken(t2)
      expect(await s.findRefreshToken(t1.hash)).toEqual(t1)
      expect(await s.useRefreshToken('nope', now())).toBeNull()

      const [x, y] = await Promise.all([
        s.useRefreshToken(t1.hash, '2030-01-01T00:00:00.000Z'),
        s.useRefreshToken(t1.hash, '2030-01-02T00:00:00.000Z'),
      ])
      // Exactly one of two concurrent uses wins.
      expect([x?.used, y?.used].sort()).toEqual([false, true])
      const loser = x?.used ? y : x
      expect(loser?.token.usedAt).toMatch(/^2030-01-0[12]/)

      await s.revokeRefreshFamily(familyId, '2031-01-01T00:00:00.000Z')
      expect((await s.findRefreshToken(t2.hash))?.revokedAt).toBe('2031-01-01T00:00:00.000Z')
      const afterRevoke = await s.useRefreshToken(t2.hash, now())
      expect(afterRevoke).toMatchObject({ used: false, token: { revokedAt: '2031-01-01T00:00:00.000Z' } })
      await s.revokeRefreshFamily(familyId, '2032-01-01T00:00:00.000Z')
      expect((await s.findRefreshToken(t2.hash))?.revokedAt).toBe('2031-01-01T00:00:00.000Z')
    })

    it('keeps one signing key when two starts race', async () => {
      const s = await open()
      const mk = (kid: string) => ({
        kid,
        alg: 'ES256',
        privateJwk: { kid },
        publicJwk: { kid },
        createdAt: now(),
      })
      const [a, b] = await Promise.all([s.ensureSigningKey(mk('a')), s.ensureSigningKey(mk('b'))])
      expect(a.kid).toBe(b.kid)
      expect(await s.listSigningKeys()).toHaveLength(1)
      expect((await s.latestSigningKey())?.kid).toBe(a.kid)
    })
  })
}
