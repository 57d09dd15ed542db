import type { AuditEntry } from '@pm/contracts'
import {
  dropReplacedIndex,
  isDuplicateKey,
  MongoAuditOutbox,
  mongoTransaction,
  TRANSACTION_OPTIONS,
} from '@pm/kit/mongo'
import type { Collection, Db, MongoClient } from 'mongodb'
import {
  type ApiKeyLimit,
  type ApiKeyRecord,
  DuplicateError,
  type IdentityStore,
  type MembershipChange,
  type MembershipAudit,
  type MembershipChangeResult,
  type MembershipRecord,
  type OrganizationChange,
  type OrganizationRecord,
  type RefreshTokenRecord,
  type SigningKeyRecord,
  type UserRecord,
} from './types.ts'

type MembershipDoc = MembershipRecord & { _id: string }
/** `expireAt` (a Date) lets a TTL index delete expired refresh tokens. */
type RefreshTokenDoc = RefreshTokenRecord & { expireAt: Date }

const ORG_PROJECTION = { membershipVersion: 0, apiKeyVersion: 0 } as const

const membershipId = (organizationId: string, userId: string) => `${organizationId}:${userId}`

function stripMembership(doc: MembershipDoc): MembershipRecord {
  const { _id, ...m } = doc
  return m
}

function stripRefreshToken(doc: RefreshTokenDoc): RefreshTokenRecord {
  const { expireAt, ...t } = doc
  return t
}

/**
 * MongoDB implementation. Documents keep the application's 24-hex ids as string `_id`s.
 * Indexes are created by `init()` at start-up.
 */
export class MongoIdentityStore implements IdentityStore {
  private readonly users: Collection<UserRecord>
  /** membershipVersion and apiKeyVersion are internal (changeMembership, createApiKey), never read back. */
  private readonly orgs: Collection<
    OrganizationRecord & { membershipVersion?: number; apiKeyVersion?: number }
  >
  private readonly memberships: Collection<MembershipDoc>
  private readonly keys: Collection<ApiKeyRecord>
  private readonly signingKeys: Collection<SigningKeyRecord & { _id: string }>
  private readonly refreshTokens: Collection<RefreshTokenDoc>
  /** Audit entries written in their change's transaction, until the relay has published them. */
  private readonly auditOutbox: MongoAuditOutbox
  private readonly client: MongoClient
  private readonly db: Db
  private readonly ownsClient: boolean

  constructor(client: MongoClient, dbName: string, ownsClient = true) {
    this.client = client
    this.ownsClient = ownsClient
    this.db = client.db(dbName)
    this.users = this.db.collection('users')
    this.orgs = this.db.collection('organizations')
    this.memberships = this.db.collection('memberships')
    this.keys = this.db.collection('api_keys')
    this.signingKeys = this.db.collection('signing_keys')
    this.refreshTokens = this.db.collection('refresh_tokens')
    this.auditOutbox = new MongoAuditOutbox(this.db)
  }

  pendingAudit(limit: number): Promise<AuditEntry[]> {
    return this.auditOutbox.pendingAudit(limit)
  }
  markAuditSent(ids: string[], at: string): Promise<void> {
    return this.auditOutbox.markAuditSent(ids, at)
  }
  pruneAuditOutbox(before: string): Promise<number> {
    return this.auditOutbox.pruneAuditOutbox(before)
  }

  async recordAudit(entries: AuditEntry[]): Promise<void> {
    if (entries.length === 0) return
    await mongoTransaction(this.client, (session) => this.auditOutbox.insert(entries, session))
  }

  async init(): Promise<void> {
    await this.auditOutbox.init()
    await Promise.all([
      this.users.createIndex({ email: 1 }, { unique: true }),
      this.orgs.createIndex({ slug: 1 }, { unique: true }),
      this.memberships.createIndex({ userId: 1, status: 1 }),
      // Sorts with their tie-break in the index: no in-memory sort (listMemberships, listApiKeys).
      this.memberships.createIndex({ organizationId: 1, createdAt: 1, userId: 1 }),
      this.refreshTokens.createIndex({ hash: 1 }, { unique: true }),
      this.refreshTokens.createIndex({ familyId: 1 }),
      this.refreshTokens.createIndex({ expireAt: 1 }, { expireAfterSeconds: 0 }),
      this.keys.createIndex({ hash: 1 }, { unique: true }),
      this.keys.createIndex({ organizationId: 1, createdAt: 1, _id: 1 }),
      this.signingKeys.createIndex({ createdAt: -1, _id: -1 }),
    ])
    // Their narrower predecessors.
    await Promise.all([
      dropReplacedIndex(this.memberships, 'organizationId_1_createdAt_1'),
      dropReplacedIndex(this.keys, 'organizationId_1_createdAt_1'),
      dropReplacedIndex(this.signingKeys, 'createdAt_-1'),
    ])
  }

  async createUser(user: UserRecord): Promise<void> {
    try {
      await this.users.insertOne({ ...user })
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateError('user')
      throw err
    }
  }

  async findUserByEmail(email: string): Promise<UserRecord | null> {
    return this.users.findOne({ email })
  }

  async findUserById(id: string): Promise<UserRecord | null> {
    return this.users.findOne({ _id: id })
  }

  async createOrganization(
    org: OrganizationRecord,
    owner: MembershipRecord,
    audit: AuditEntry[] = [],
  ): Promise<void> {
    const session = this.client.startSession({ defaultTransactionOptions: TRANSACTION_OPTIONS })
    try {
      await session.withTransaction(async () => {
        await this.orgs.insertOne({ ...org }, { session })
        await this.memberships.insertOne(
          { _id: membershipId(owner.organizationId, owner.userId), ...owner },
          { session },
        )
        await this.auditOutbox.insert(audit, session)
      })
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateError('organization')
      throw err
    } finally {
      await session.endSession()
    }
  }

  async getOrganization(id: string): Promise<OrganizationRecord | null> {
    return this.orgs.findOne({ _id: id }, { projection: ORG_PROJECTION })
  }

  async findOrganizationBySlug(slug: string): Promise<OrganizationRecord | null> {
    return this.orgs.findOne({ slug }, { projection: ORG_PROJECTION })
  }

  async listOrganizationsForUser(userId: string): Promise<OrganizationRecord[]> {
    const ms = await this.memberships.find({ userId, status: 'ACTIVE' }).toArray()
    if (ms.length === 0) return []
    return this.orgs
      .find({ _id: { $in: ms.map((m) => m.organizationId) } }, { projection: ORG_PROJECTION })
      .sort({ createdAt: 1, _id: 1 })
      .toArray()
  }

  async getMembership(organizationId: string, userId: string): Promise<MembershipRecord | null> {
    const doc = await this.memberships.findOne({ _id: membershipId(organizationId, userId) })
    return doc ? stripMembership(doc) : null
  }

  async isSlugTaken(slug: string): Promise<boolean> {
    return (await this.orgs.countDocuments({ slug }, { limit: 1 })) > 0
  }

  async updateOrganization(
    id: string,
    change: OrganizationChange,
    at: string,
    audit: AuditEntry[] = [],
  ): Promise<OrganizationRecord | null> {
    const $set: Partial<OrganizationRecord> = { updatedAt: at }
    if (change.name !== undefined) $set.name = change.name
    // None protected is stored as no field (as organizations written before the setting are).
    const none = change.protectedEnvironments !== undefined && change.protectedEnvironments.length === 0
    if (change.protectedEnvironments !== undefined && !none)
      $set.protectedEnvironments = change.protectedEnvironments
    const update = none ? { $set, $unset: { protectedEnvironments: '' as const } } : { $set }
    if (audit.length === 0) {
      return this.orgs.findOneAndUpdate({ _id: id }, update, {
        returnDocument: 'after',
        projection: ORG_PROJECTION,
      })
    }
    return mongoTransaction(this.client, async (session) => {
      const org = await this.orgs.findOneAndUpdate({ _id: id }, update, {
        returnDocument: 'after',
        projection: ORG_PROJECTION,
        session,
      })
      if (org) await this.auditOutbox.insert(audit, session)
      return org
    })
  }

  async findUsersByIds(ids: string[]): Promise<UserRecord[]> {
    if (ids.length === 0) return []
    return this.users.find({ _id: { $in: ids } }).toArray()
  }

  async listMemberships(organizationId: string): Promise<MembershipRecord[]> {
    const docs = await this.memberships.find({ organizationId }).sort({ createdAt: 1, userId: 1 }).toArray()
    return docs.map(stripMembership)
  }

  async addMembership(m: MembershipRecord, audit: AuditEntry[] = []): Promise<void> {
    const doc = { _id: membershipId(m.organizationId, m.userId), ...m }
    try {
      if (audit.length === 0) await this.memberships.insertOne(doc)
      else
        await mongoTransaction(this.client, async (session) => {
          await this.memberships.insertOne({ ...doc }, { session })
          await this.auditOutbox.insert(audit, session)
        })
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateError('membership')
      throw err
    }
  }

  async changeMembership(
    organizationId: string,
    userId: string,
    change: MembershipChange,
    audit?: MembershipAudit,
    allowed?: (current: MembershipRecord) => boolean,
  ): Promise<MembershipChangeResult> {
    const session = this.client.startSession({ defaultTransactionOptions: TRANSACTION_OPTIONS })
    try {
      let result: MembershipChangeResult = { outcome: 'not-found' }
      await session.withTransaction(async () => {
        // Every change writes the organization document, so two concurrent changes conflict
        // (one is retried) instead of both passing the last-owner check (write skew).
        await this.orgs.updateOne({ _id: organizationId }, { $inc: { membershipVersion: 1 } }, { session })
        const doc = await this.memberships.findOne({ _id: membershipId(organizationId, userId) }, { session })
        if (!doc) {
          result = { outcome: 'not-found' }
          return
        }
        const current = stripMembership(doc)
        if (allowed && !allowed(current)) {
          result = { outcome: 'forbidden' }
          return
        }
        const next = change === 'remove' ? null : { ...current, ...change }
        const wasOwner = current.role === 'OWNER' && current.status === 'ACTIVE'
        const staysOwner = next !== null && next.role === 'OWNER' && next.status === 'ACTIVE'
        if (wasOwner && !staysOwner) {
          const others = await this.memberships.countDocuments(
            { organizationId, userId: { $ne: userId }, role: 'OWNER', status: 'ACTIVE' },
            { session },
          )
          if (others === 0) {
            result = { outcome: 'last-owner' }
            return
          }
        }
        if (next === null) {
          await this.memberships.deleteOne({ _id: doc._id }, { session })
          if (audit) await this.auditOutbox.insert(audit(current, null), session)
          result = { outcome: 'removed', membership: current }
          return
        }
        await this.memberships.updateOne(
          { _id: doc._id },
          { $set: { role: next.role, status: next.status } },
          { session },
        )
        if (audit) await this.auditOutbox.insert(audit(current, next), session)
        result = { outcome: 'changed', membership: next }
      })
      return result
    } finally {
      await session.endSession()
    }
  }

  async createApiKey(key: ApiKeyRecord, audit: AuditEntry[] = [], limit?: ApiKeyLimit): Promise<boolean> {
    if (audit.length === 0 && !limit) {
      await this.keys.insertOne({ ...key })
      return true
    }
    return mongoTransaction(this.client, async (session) => {
      if (limit) {
        // A count alone does not serialize (two creates each count in their own snapshot): both
        // first write the organization's document, so the second meets a write conflict and
        // withTransaction runs it again, its count then including the first's insert.
        await this.orgs.updateOne({ _id: key.organizationId }, { $inc: { apiKeyVersion: 1 } }, { session })
        const held = await this.keys.countDocuments(
          {
            organizationId: key.organizationId,
            revokedAt: null,
            $or: [{ expiresAt: null }, { expiresAt: { $gt: limit.now } }],
          },
          { session },
        )
        if (held >= limit.max) return false
      }
      await this.keys.insertOne({ ...key }, { session })
      if (audit.length > 0) await this.auditOutbox.insert(audit, session)
      return true
    })
  }

  async findApiKeyByHash(hash: string): Promise<ApiKeyRecord | null> {
    return this.keys.findOne({ hash })
  }

  async listApiKeys(organizationId: string): Promise<ApiKeyRecord[]> {
    return this.keys.find({ organizationId }).sort({ createdAt: 1, _id: 1 }).toArray()
  }

  async revokeApiKey(
    organizationId: string,
    keyId: string,
    at: string,
    audit?: (key: ApiKeyRecord) => AuditEntry[],
  ): Promise<ApiKeyRecord | null> {
    if (!audit) {
      await this.keys.updateOne({ _id: keyId, organizationId, revokedAt: null }, { $set: { revokedAt: at } })
      return this.keys.findOne({ _id: keyId, organizationId })
    }
    return mongoTransaction(this.client, async (session) => {
      const { modifiedCount } = await this.keys.updateOne(
        { _id: keyId, organizationId, revokedAt: null },
        { $set: { revokedAt: at } },
        { session },
      )
      const key = await this.keys.findOne({ _id: keyId, organizationId }, { session })
      // Only the call that revoked the key records it.
      if (key && modifiedCount === 1) await this.auditOutbox.insert(audit(key), session)
      return key
    })
  }

  async renameApiKey(
    organizationId: string,
    keyId: string,
    name: string,
    audit?: (before: ApiKeyRecord) => AuditEntry[],
  ): Promise<ApiKeyRecord | null> {
    if (!audit) {
      return this.keys.findOneAndUpdate({ _id: keyId, organizationId }, { $set: { name } })
    }
    return mongoTransaction(this.client, async (session) => {
      // The document before the update (the driver's default), so the entry can name the old name.
      const before = await this.keys.findOneAndUpdate(
        { _id: keyId, organizationId },
        { $set: { name } },
        { session },
      )
      if (before && before.name !== name) await this.auditOutbox.insert(audit(before), session)
      return before
    })
  }

  async touchApiKey(keyId: string, at: string): Promise<void> {
    await this.keys.updateOne({ _id: keyId }, { $set: { lastUsedAt: at } })
  }

  async createRefreshToken(token: RefreshTokenRecord, audit: AuditEntry[] = []): Promise<void> {
    const doc = { ...token, expireAt: new Date(token.expiresAt) }
    if (audit.length === 0) {
      await this.refreshTokens.insertOne(doc)
      return
    }
    await mongoTransaction(this.client, async (session) => {
      await this.refreshTokens.insertOne({ ...doc }, { session })
      await this.auditOutbox.insert(audit, session)
    })
  }

  async useRefreshToken(
    hash: string,
    at: string,
  ): Promise<{ token: RefreshTokenRecord; used: boolean } | null> {
    const before = await this.refreshTokens.findOneAndUpdate(
      { hash, usedAt: null, revokedAt: null },
      { $set: { usedAt: at } },
      { returnDocument: 'before' },
    )
    if (before) return { token: stripRefreshToken(before), used: true }
    const doc = await this.refreshTokens.findOne({ hash })
    return doc ? { token: stripRefreshToken(doc), used: false } : null
  }

  async findRefreshToken(hash: string): Promise<RefreshTokenRecord | null> {
    const doc = await this.refreshTokens.findOne({ hash })
    return doc ? stripRefreshToken(doc) : null
  }

  async revokeRefreshFamily(familyId: string, at: string): Promise<void> {
    await this.refreshTokens.updateMany({ familyId, revokedAt: null }, { $set: { revokedAt: at } })
  }

  async latestSigningKey(): Promise<SigningKeyRecord | null> {
    const doc = await this.signingKeys.find().sort({ createdAt: -1, _id: -1 }).limit(1).next()
    if (!doc) return null
    const { _id, ...key } = doc
    return key
  }

  async listSigningKeys(): Promise<SigningKeyRecord[]> {
    const docs = await this.signingKeys.find().sort({ createdAt: -1 }).toArray()
    return docs.map(({ _id, ...key }) => key)
  }

  async ensureSigningKey(key: SigningKeyRecord): Promise<SigningKeyRecord> {
    // A fixed _id for the first key makes concurrent first starts settle on one key.
    await this.signingKeys.updateOne({ _id: 'initial' }, { $setOnInsert: { ...key } }, { upsert: true })
    const latest = await this.latestSigningKey()
    if (!latest) throw new Error('signing key missing after upsert')
    return latest
  }

  async check(): Promise<void> {
    await this.db.command({ ping: 1 })
  }

  async close(): Promise<void> {
    if (this.ownsClient) await this.client.close()
  }
}
