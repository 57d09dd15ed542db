import { connectMongo, newId } from '@pm/kit'
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
