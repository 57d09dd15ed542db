import { isDuplicateKey } from '@pm/kit'
import type { Collection, Db, MongoClient } from 'mongodb'
import {
  type ApiKeyRecord,
  DuplicateError,
  type IdentityStore,
  type MembershipRecord,
  type OrganizationRecord,
  type SigningKeyRecord,
  type UserRecord,
} from './types.ts'

type MembershipDoc = MembershipRecord & { _id: string }

/**
 * MongoDB implementation. Documents keep the application's 24-hex ids as string `_id`s.
 * Indexes are created by `init()` at start-up.
 */
export class MongoIdentityStore implements IdentityStore {
  private readonly users: Collection<UserRecord>
  private readonly orgs: Collection<OrganizationRecord>
  private readonly memberships: Collection<MembershipDoc>
  private readonly keys: Collection<ApiKeyRecord>
  private readonly signingKeys: Collection<SigningKeyRecord & { _id: string }>
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
  }

  async init(): Promise<void> {
    await Promise.all([
      this.users.createIndex({ email: 1 }, { unique: true }),
      this.orgs.createIndex({ slug: 1 }, { unique: true }),
      this.memberships.createIndex({ userId: 1, status: 1 }),
      this.keys.createIndex({ hash: 1 }, { unique: true }),
      this.keys.createIndex({ organizationId: 1, createdAt: 1 }),
      this.signingKeys.createIndex({ createdAt: -1 }),
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

  async createOrganization(org: OrganizationRecord, owner: MembershipRecord): Promise<void> {
    const session = this.client.startSession()
    try {
      await session.withTransaction(async () => {
        await this.orgs.insertOne({ ...org }, { session })
        await this.memberships.insertOne(
          { _id: `${owner.organizationId}:${owner.userId}`, ...owner },
          { session },
        )
      })
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateError('organization')
      throw err
    } finally {
      await session.endSession()
    }
  }

  async getOrganization(id: string): Promise<OrganizationRecord | null> {
    return this.orgs.findOne({ _id: id })
  }

  async listOrganizationsForUser(userId: string): Promise<OrganizationRecord[]> {
    const ms = await this.memberships.find({ userId, status: 'ACTIVE' }).toArray()
    if (ms.length === 0) return []
    return this.orgs
      .find({ _id: { $in: ms.map((m) => m.organizationId) } })
      .sort({ createdAt: 1, _id: 1 })
      .toArray()
  }

  async getMembership(organizationId: string, userId: string): Promise<MembershipRecord | null> {
    const doc = await this.memberships.findOne({ _id: `${organizationId}:${userId}` })
    if (!doc) return null
    const { _id, ...m } = doc
    return m
  }

  async isSlugTaken(slug: string): Promise<boolean> {
    return (await this.orgs.countDocuments({ slug }, { limit: 1 })) > 0
  }

  async createApiKey(key: ApiKeyRecord): Promise<void> {
    await this.keys.insertOne({ ...key })
  }

  async findApiKeyByHash(hash: string): Promise<ApiKeyRecord | null> {
    return this.keys.findOne({ hash })
  }

  async listApiKeys(organizationId: string): Promise<ApiKeyRecord[]> {
    return this.keys.find({ organizationId }).sort({ createdAt: 1, _id: 1 }).toArray()
  }

  async revokeApiKey(organizationId: string, keyId: string, at: string): Promise<ApiKeyRecord | null> {
    await this.keys.updateOne({ _id: keyId, organizationId, revokedAt: null }, { $set: { revokedAt: at } })
    return this.keys.findOne({ _id: keyId, organizationId })
  }

  async touchApiKey(keyId: string, at: string): Promise<void> {
    await this.keys.updateOne({ _id: keyId }, { $set: { lastUsedAt: at } })
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
