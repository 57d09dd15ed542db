import type { EnvironmentName, Pin } from '@pm/contracts'
import { isDuplicateKey } from '@pm/kit'
import type { Collection, Db, Filter, MongoClient, Sort, UpdateFilter } from 'mongodb'
import {
  DuplicateSlugError,
  type ImportBatchRecord,
  type ImportBatchUpdate,
  type OutboxRecord,
  type Page,
  type PromptFilter,
  type PromptPatch,
  type PromptRecord,
  type PromptStore,
  type VersionBuilder,
  type VersionRecord,
} from './types.ts'

const escapeRegex = (v: string) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Thrown inside a transaction when another publish moved the counter first. */
class CounterMoved extends Error {}

/**
 * MongoDB implementation: documents keep the 24-hex ids as string `_id`s; multi-document
 * writes (publish, fork) run in a transaction, which needs a replica set (docker-compose
 * runs a single-node one). Indexes are created by `init()` at start-up.
 */
export class MongoPromptStore implements PromptStore {
  private readonly client: MongoClient
  private readonly db: Db
  private readonly prompts: Collection<PromptRecord>
  private readonly versions: Collection<VersionRecord>
  private readonly outbox: Collection<OutboxRecord>
  private readonly batches: Collection<ImportBatchRecord>
  private readonly ownsClient: boolean

  constructor(client: MongoClient, dbName: string, ownsClient = true) {
    this.client = client
    this.ownsClient = ownsClient
    this.db = client.db(dbName)
    this.prompts = this.db.collection('prompts')
    this.versions = this.db.collection('versions')
    this.outbox = this.db.collection('outbox')
    this.batches = this.db.collection('import_batches')
  }

  async init(): Promise<void> {
    await Promise.all([
      this.prompts.createIndex({ organizationId: 1, slug: 1 }, { unique: true }),
      this.prompts.createIndex({ organizationId: 1, createdAt: -1 }),
      this.prompts.createIndex({ isPublic: 1, createdAt: -1 }),
      this.versions.createIndex({ promptId: 1, version: 1 }, { unique: true }),
      this.versions.createIndex({ promptId: 1, publishedAt: -1 }),
      this.outbox.createIndex({ sentAt: 1, createdAt: 1 }),
      this.batches.createIndex({ organizationId: 1, createdAt: -1 }),
    ])
  }

  async createPrompt(prompt: PromptRecord): Promise<void> {
    try {
      await this.prompts.insertOne({ ...prompt })
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateSlugError()
      throw err
    }
  }

  async getPrompt(organizationId: string, id: string): Promise<PromptRecord | null> {
    return this.prompts.findOne({ _id: id, organizationId })
  }

  async getPromptById(id: string): Promise<PromptRecord | null> {
    return this.prompts.findOne({ _id: id })
  }

  async isSlugTaken(organizationId: string, slug: string): Promise<boolean> {
    return (await this.prompts.countDocuments({ organizationId, slug }, { limit: 1 })) > 0
  }

  private async page(
    filter: Filter<PromptRecord>,
    page: Page,
  ): Promise<{ prompts: PromptRecord[]; total: number }> {
    const [prompts, total] = await Promise.all([
      this.prompts
        .find(filter)
        .sort({ createdAt: -1, _id: -1 })
        .skip((page.page - 1) * page.limit)
        .limit(page.limit)
        .toArray(),
      this.prompts.countDocuments(filter),
    ])
    return { prompts, total }
  }

  async listPrompts(f: PromptFilter, page: Page): Promise<{ prompts: PromptRecord[]; total: number }> {
    const filter: Filter<PromptRecord> = { organizationId: f.organizationId }
    if (f.search) {
      const re = new RegExp(escapeRegex(f.search), 'i')
      filter.$or = [{ name: re }, { description: re }, { slug: re }]
    }
    if (f.tags && f.tags.length > 0) filter.tags = { $in: f.tags }
    if (f.visibility === 'public') filter.isPublic = true
    if (f.visibility === 'private') filter.isPublic = false
    return this.page(filter, page)
  }

  async summary(organizationId: string): Promise<{ total: number; public: number; published: number }> {
    const [total, pub, published] = await Promise.all([
      this.prompts.countDocuments({ organizationId }),
      this.prompts.countDocuments({ organizationId, isPublic: true }),
      this.prompts.countDocuments({ organizationId, currentVersionId: { $ne: null } }),
    ])
    return { total, public: pub, published }
  }

  async listPublic(
    search: string | undefined,
    page: Page,
  ): Promise<{ prompts: PromptRecord[]; total: number }> {
    const filter: Filter<PromptRecord> = { isPublic: true, currentVersionId: { $ne: null } }
    if (search) {
      const re = new RegExp(escapeRegex(search), 'i')
      filter.$or = [{ name: re }, { description: re }]
    }
    return this.page(filter, page)
  }

  async updatePrompt(organizationId: string, id: string, patch: PromptPatch): Promise<PromptRecord | null> {
    const $set = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined))
    try {
      return await this.prompts.findOneAndUpdate(
        { _id: id, organizationId },
        { $set },
        { returnDocument: 'after' },
      )
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateSlugError()
      throw err
    }
  }

  async deletePrompt(organizationId: string, id: string): Promise<boolean> {
    const session = this.client.startSession()
    try {
      let deleted = false
      await session.withTransaction(async () => {
        const result = await this.prompts.deleteOne({ _id: id, organizationId }, { session })
        deleted = result.deletedCount === 1
        if (deleted) await this.versions.deleteMany({ promptId: id }, { session })
      })
      return deleted
    } finally {
      await session.endSession()
    }
  }

  async setPin(
    organizationId: string,
    id: string,
    env: EnvironmentName,
    pin: Pin,
    updatedAt: string,
  ): Promise<PromptRecord | null> {
    // A dotted path sets one environment only: a concurrent promote of the other one is kept.
    const $set: Record<string, unknown> = { [`environments.${env}`]: pin, updatedAt }
    return this.prompts.findOneAndUpdate({ _id: id, organizationId }, { $set }, { returnDocument: 'after' })
  }

  async publish(
    organizationId: string,
    promptId: string,
    build: VersionBuilder,
  ): Promise<VersionRecord | null> {
    // The transaction reads the counter, writes the version (unique on promptId+version)
    // and moves the counter only if nobody else did; a lost race starts over.
    for (let attempt = 0; attempt < 50; attempt++) {
      const session = this.client.startSession()
      try {
        let created: VersionRecord | null = null
        await session.withTransaction(async () => {
          const prompt = await this.prompts.findOne({ _id: promptId, organizationId }, { session })
          if (!prompt) {
            created = null
            return
          }
          const { version, outbox } = build(prompt, prompt.versionCount + 1)
          await this.versions.insertOne({ ...version }, { session })
          const moved = await this.prompts.updateOne(
            { _id: promptId, versionCount: prompt.versionCount },
            {
              $set: {
                versionCount: version.version,
                currentVersionId: version._id,
                updatedAt: version.publishedAt,
              },
            },
            { session },
          )
          if (moved.modifiedCount !== 1) throw new CounterMoved()
          await this.outbox.insertOne({ ...outbox }, { session })
          created = version
        })
        return created
      } catch (err) {
        if (!(err instanceof CounterMoved) && !isDuplicateKey(err)) throw err
      } finally {
        await session.endSession()
      }
    }
    throw new Error('publish: too much contention')
  }

  async createWithVersion(prompt: PromptRecord, version: VersionRecord, outbox: OutboxRecord): Promise<void> {
    const session = this.client.startSession()
    try {
      await session.withTransaction(async () => {
        await this.prompts.insertOne({ ...prompt }, { session })
        await this.versions.insertOne({ ...version }, { session })
        await this.outbox.insertOne({ ...outbox }, { session })
      })
    } catch (err) {
      if (isDuplicateKey(err)) throw new DuplicateSlugError()
      throw err
    } finally {
      await session.endSession()
    }
  }

  async listVersions(promptId: string, order: 'version' | 'publishedAt'): Promise<VersionRecord[]> {
    const sort: Sort = order === 'version' ? { version: -1 } : { publishedAt: -1, version: -1 }
    return this.versions.find({ promptId }).sort(sort).toArray()
  }

  async getVersion(promptId: string, versionId: string): Promise<VersionRecord | null> {
    return this.versions.findOne({ _id: versionId, promptId })
  }

  async getVersionByNumber(promptId: string, version: number): Promise<VersionRecord | null> {
    return this.versions.findOne({ promptId, version })
  }

  async getVersionsByIds(ids: string[]): Promise<VersionRecord[]> {
    if (ids.length === 0) return []
    return this.versions.find({ _id: { $in: ids } }).toArray()
  }

  async pendingOutbox(limit: number): Promise<OutboxRecord[]> {
    return this.outbox.find({ sentAt: null }).sort({ createdAt: 1, _id: 1 }).limit(limit).toArray()
  }

  async markOutboxSent(id: string, at: string): Promise<void> {
    await this.outbox.updateOne({ _id: id }, { $set: { sentAt: at } })
  }

  async pruneOutbox(before: string): Promise<number> {
    const result = await this.outbox.deleteMany({ sentAt: { $ne: null, $lt: before } })
    return result.deletedCount
  }

  async createBatch(batch: ImportBatchRecord): Promise<void> {
    await this.batches.insertOne({ ...batch })
  }

  async getBatch(organizationId: string, id: string): Promise<ImportBatchRecord | null> {
    return this.batches.findOne({ _id: id, organizationId })
  }

  async updateBatch(id: string, u: ImportBatchUpdate): Promise<void> {
    const $set: Partial<ImportBatchRecord> = { updatedAt: u.updatedAt }
    if (u.status !== undefined) $set.status = u.status
    if (u.created !== undefined) $set.created = u.created
    if (u.failed !== undefined) $set.failed = u.failed
    if (u.finishedAt !== undefined) $set.finishedAt = u.finishedAt
    const update: UpdateFilter<ImportBatchRecord> = { $set }
    if (u.appendErrors && u.appendErrors.length > 0) update.$push = { errors: { $each: u.appendErrors } }
    await this.batches.updateOne({ _id: id }, update)
  }

  async check(): Promise<void> {
    await this.db.command({ ping: 1 })
  }

  async close(): Promise<void> {
    if (this.ownsClient) await this.client.close()
  }
}
