import type { AuditEntry, EnvironmentName, ImportRowError } from '@pm/contracts'
import {
  dropReplacedIndex,
  fromMongoJson,
  isDuplicateKey,
  TRANSACTION_OPTIONS,
  toMongoJson,
} from '@pm/kit/mongo'
import {
  Binary,
  type ClientSession,
  type Collection,
  type Db,
  type Filter,
  type MongoClient,
  MongoServerError,
  type Sort,
  type TransactionOptions,
  type UpdateFilter,
  type WithId,
} from 'mongodb'
import {
  type ChangeEvents,
  DuplicateImportError,
  DuplicateSlugError,
  type ImportBatchRecord,
  type AuditCursor,
  type AuditFilter,
  type EnvHistoryRecord,
  type PinWrite,
  type ImportStep,
  type SplitCount,
  LeaseLostError,
  type OutboxRecord,
  type Page,
  type PromptFilter,
  type PromptPatch,
  type PromptRecord,
  type PromptStore,
  type VersionBuilder,
  type VersionRecord,
  uniqueWrites,
} from './types.ts'

const escapeRegex = (v: string) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

const unique = uniqueWrites(isDuplicateKey)

/**
 * Documents written before chat prompts existed have no `type`: they read as text prompts
 * (no migration of the collection is needed; writes store the field from then on).
 */
function withType<T extends { type?: PromptRecord['type']; messages?: unknown; config?: unknown }>(
  doc: T,
): T & { type: PromptRecord['type'] } {
  const out = { ...doc, type: doc.type === 'chat' ? 'chat' : 'text' } as T & { type: PromptRecord['type'] }
  // Optional fields are absent, never null (a write that carried undefined stored null).
  if (out.messages === null) delete out.messages
  if (out.config === null) delete out.config
  else if (out.config !== undefined) out.config = fromMongoJson(out.config)
  return out
}

/** A prompt or version as written: its config (user JSON) through toMongoJson. */
function stored<T extends { config?: PromptRecord['config'] }>(doc: T): T {
  return doc.config ? { ...doc, config: toMongoJson(doc.config) } : { ...doc }
}

/** An outbox row as written: its payload (which may carry a config) through toMongoJson. */
function storedRow(o: OutboxRecord): OutboxRecord {
  return { ...o, payload: toMongoJson(o.payload) }
}
const promptOrNull = (doc: PromptRecord | null): PromptRecord | null => (doc ? withType(doc) : null)
const versionOrNull = (doc: VersionRecord | null): VersionRecord | null => (doc ? withType(doc) : null)

/** Thrown inside a transaction when another publish moved the counter first. */
class CounterMoved extends Error {}

/**
 * The import's transactions, as the driver's documentation writes them: on the primary, reading
 * a snapshot, committed when a majority has the writes (so a failover cannot roll back a row
 * whose count was already reported).
 */
const IMPORT_TXN: TransactionOptions = TRANSACTION_OPTIONS

/** An import's file, kept while its batch runs (at most CSV_MAX_BYTES, under BSON's 16 MiB). */
interface ImportFileDoc {
  _id: string
  content: Binary
}

/** Batches written before resumable imports lack the newer fields. */
function toBatch(doc: WithId<ImportBatchRecord>): ImportBatchRecord {
  return {
    ...doc,
    resumedAt: doc.resumedAt ?? null,
    position: doc.position ?? 0,
    contentHash: doc.contentHash ?? null,
    idempotencyKey: doc.idempotencyKey ?? null,
    leaseOwner: doc.leaseOwner ?? null,
    leaseUntil: doc.leaseUntil ?? null,
  }
}

/**
 * MongoDB implementation: documents keep the 24-hex ids as string `_id`s; multi-document
 * writes (publish, fork) run in a transaction, which needs a replica set (docker-compose
 * runs a single-node one). Indexes are created by `init()` at start-up.
 */
/** An audit entry as stored: its id is the document's `_id`. */
type AuditDoc = Omit<AuditEntry, 'id'> & { _id: string }

function auditDoc(e: AuditEntry): Omit<AuditDoc, '_id'> {
  const { id: _id, ...rest } = e
  return rest
}

/** Invocations of one split variant; `_id` is `splitId:variant`. */
interface SplitCountDoc {
  _id: string
  splitId: string
  variant: number
  count: number
}

/** An audit log query's filter (exact matches, an inclusive time range). */
function auditQuery(filter: AuditFilter): Filter<AuditDoc> {
  const query: Filter<AuditDoc> = { organizationId: filter.organizationId }
  if (filter.actor !== undefined) query['actor.id'] = filter.actor
  if (filter.action !== undefined) query.action = filter.action as AuditEntry['action']
  if (filter.resourceId !== undefined) query['resource.id'] = filter.resourceId
  if (filter.from !== undefined || filter.to !== undefined) {
    query.at = {
      ...(filter.from !== undefined ? { $gte: filter.from } : {}),
      ...(filter.to !== undefined ? { $lte: filter.to } : {}),
    }
  }
  return query
}

function auditOf({ _id, ...rest }: AuditDoc): AuditEntry {
  return { id: _id, ...rest }
}

export class MongoPromptStore implements PromptStore {
  private readonly client: MongoClient
  private readonly db: Db
  private readonly prompts: Collection<PromptRecord>
  private readonly versions: Collection<VersionRecord>
  private readonly outbox: Collection<OutboxRecord>
  private readonly batches: Collection<ImportBatchRecord>
  private readonly files: Collection<ImportFileDoc>
  private readonly envHistory: Collection<EnvHistoryRecord>
  private readonly audit: Collection<AuditDoc>
  private readonly splitCountsColl: Collection<SplitCountDoc>
  private readonly ownsClient: boolean

  constructor(client: MongoClient, dbName: string, ownsClient = true) {
    this.client = client
    this.ownsClient = ownsClient
    this.db = client.db(dbName)
    this.prompts = this.db.collection('prompts')
    this.versions = this.db.collection('versions')
    this.outbox = this.db.collection('outbox')
    this.batches = this.db.collection('import_batches')
    this.files = this.db.collection('import_files')
    this.envHistory = this.db.collection('env_history')
    this.audit = this.db.collection('audit_log')
    this.splitCountsColl = this.db.collection('split_counts')
  }

  async init(): Promise<void> {
    // Every sort has its whole key, tie-break included, in an index after the equality fields,
    // so that MongoDB never sorts in memory (listPrompts, listPublic, listVersions, pendingOutbox).
    await Promise.all([
      this.prompts.createIndex({ organizationId: 1, slug: 1 }, { unique: true }),
      this.prompts.createIndex({ organizationId: 1, createdAt: -1, _id: -1 }),
      this.prompts.createIndex({ isPublic: 1, createdAt: -1, _id: -1 }),
      this.versions.createIndex({ promptId: 1, version: 1 }, { unique: true }),
      this.versions.createIndex({ promptId: 1, publishedAt: -1, version: -1 }),
      this.outbox.createIndex({ sentAt: 1, createdAt: 1, _id: 1 }),
      this.batches.createIndex({ organizationId: 1, createdAt: -1 }),
      // The same file (or the same user's Idempotency-Key) is one batch per workspace.
      this.batches.createIndex(
        { organizationId: 1, contentHash: 1 },
        { unique: true, partialFilterExpression: { contentHash: { $type: 'string' } } },
      ),
      this.batches.createIndex(
        { organizationId: 1, createdBy: 1, idempotencyKey: 1 },
        { unique: true, partialFilterExpression: { idempotencyKey: { $type: 'string' } } },
      ),
      this.batches.createIndex({ status: 1, leaseUntil: 1 }),
      this.ensureCollection('import_files'),
      this.envHistory.createIndex({ promptId: 1, environment: 1, promotedAt: -1, _id: -1 }),
      this.ensureCollection('env_history'),
      this.audit.createIndex({ organizationId: 1, at: -1, _id: -1 }),
      this.audit.createIndex({ at: 1 }),
      this.splitCountsColl.createIndex({ splitId: 1 }),
    ])
    // Their narrower predecessors.
    await Promise.all([
      dropReplacedIndex(this.prompts, 'organizationId_1_createdAt_-1'),
      dropReplacedIndex(this.prompts, 'isPublic_1_createdAt_-1'),
      dropReplacedIndex(this.versions, 'promptId_1_publishedAt_-1'),
      dropReplacedIndex(this.outbox, 'sentAt_1_createdAt_1'),
    ])
  }

  /**
   * Creates a collection that only transactions write to, so that no transaction has to create
   * it (allowed since MongoDB 4.4, but not in a cross-shard transaction).
   */
  private async ensureCollection(name: string): Promise<void> {
    const found = await this.db.listCollections({ name }, { nameOnly: true }).toArray()
    if (found.length > 0) return
    try {
      await this.db.createCollection(name)
    } catch (err) {
      // Another replica created it at the same moment (NamespaceExists).
      if (!(err instanceof MongoServerError && err.code === 48)) throw err
    }
  }

  async createPrompt(prompt: PromptRecord, outbox: OutboxRecord[] = []): Promise<void> {
    if (outbox.length === 0) {
      await unique(DuplicateSlugError, () => this.prompts.insertOne(stored(prompt)))
      return
    }
    await unique(DuplicateSlugError, () =>
      this.inTransaction(async (session) => {
        await this.prompts.insertOne(stored(prompt), { session })
        await this.outbox.insertMany(outbox.map(storedRow), { session })
      }),
    )
  }

  async recordAudit(row: OutboxRecord, at: string): Promise<void> {
    const entry = row.payload as AuditEntry
    // Idempotent by entry id: a relay that stopped after this and before marking the row sent
    // copies it again, which changes nothing.
    await this.ingestAudit(entry)
    await this.outbox.updateOne({ _id: row._id }, { $set: { sentAt: at } })
  }

  async ingestAudit(entry: AuditEntry): Promise<void> {
    await this.audit.updateOne({ _id: entry.id }, { $setOnInsert: auditDoc(entry) }, { upsert: true })
  }

  async listAudit(filter: AuditFilter, page: Page): Promise<{ entries: AuditEntry[]; total: number }> {
    const query = auditQuery(filter)
    const [docs, total] = await Promise.all([
      this.audit
        .find(query)
        .sort({ at: -1, _id: -1 })
        .skip((page.page - 1) * page.limit)
        .limit(page.limit)
        .toArray(),
      this.audit.countDocuments(query),
    ])
    return { entries: docs.map(auditOf), total }
  }

  async auditPage(filter: AuditFilter, after: AuditCursor | null, limit: number): Promise<AuditEntry[]> {
    const query = auditQuery(filter)
    // After the last entry read, in the sort's order; the index {organizationId, at, _id} serves it.
    if (after) query.$or = [{ at: { $lt: after.at } }, { at: after.at, _id: { $lt: after.id } }]
    const docs = await this.audit.find(query).sort({ at: -1, _id: -1 }).limit(limit).toArray()
    return docs.map(auditOf)
  }

  async pruneAudit(before: string): Promise<number> {
    return (await this.audit.deleteMany({ at: { $lt: before } })).deletedCount
  }

  async getPrompt(organizationId: string, id: string): Promise<PromptRecord | null> {
    return promptOrNull(await this.prompts.findOne({ _id: id, organizationId }))
  }

  async getPromptById(id: string): Promise<PromptRecord | null> {
    return promptOrNull(await this.prompts.findOne({ _id: id }))
  }

  async getPromptBySlug(organizationId: string, slug: string): Promise<PromptRecord | null> {
    return promptOrNull(await this.prompts.findOne({ organizationId, slug }))
  }

  async slugsStartingWith(organizationId: string, prefix: string): Promise<string[]> {
    // An anchored, case-sensitive regex of literal text: a range on the {organizationId, slug}
    // unique index (MongoDB's "prefix expression"); only the slugs are read.
    const found = await this.prompts
      .find({ organizationId, slug: { $regex: new RegExp(`^${escapeRegex(prefix)}`) } })
      .project<{ slug: string }>({ _id: 0, slug: 1 })
      .toArray()
    return found.map((p) => p.slug)
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
    return { prompts: prompts.map(withType), total }
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

  async updatePrompt(
    organizationId: string,
    id: string,
    patch: PromptPatch,
    events?: ChangeEvents,
    expectedUpdatedAt?: string,
  ): Promise<PromptRecord | null> {
    const { config, ...rest } = patch
    const $set: Record<string, unknown> = Object.fromEntries(
      Object.entries(rest).filter(([, v]) => v !== undefined),
    )
    if (config) $set.config = toMongoJson(config)
    const update: UpdateFilter<PromptRecord> = { $set }
    if (config === null) update.$unset = { config: '' }
    // With expectedUpdatedAt, only the draft the caller read (compare-and-set on updatedAt).
    const filter: Filter<PromptRecord> =
      expectedUpdatedAt === undefined
        ? { _id: id, organizationId }
        : { _id: id, organizationId, updatedAt: expectedUpdatedAt }
    return unique(DuplicateSlugError, async () => {
      if (!events) {
        return promptOrNull(
          await this.prompts.findOneAndUpdate(filter, update, {
            returnDocument: 'after',
          }),
        )
      }
      return await this.inTransaction(async (session) => {
        const before = await this.prompts.findOneAndUpdate(filter, update, {
          returnDocument: 'before',
          session,
        })
        if (!before) return null
        const after = withType(
          (await this.prompts.findOne({ _id: id, organizationId }, { session })) ?? before,
        )
        const outbox = events(withType(before), after)
        if (outbox.length > 0) await this.outbox.insertMany(outbox.map(storedRow), { session })
        return after
      })
    })
  }

  /** Runs `work` in a transaction and answers what it answered. */
  private async inTransaction<T>(work: (session: ClientSession) => Promise<T>): Promise<T> {
    const session = this.client.startSession({ defaultTransactionOptions: TRANSACTION_OPTIONS })
    try {
      let result: T | undefined
      let ran = false
      await session.withTransaction(async () => {
        result = await work(session)
        ran = true
      })
      if (!ran) throw new Error('transaction did not run')
      return result as T
    } finally {
      await session.endSession()
    }
  }

  async deletePrompt(
    organizationId: string,
    id: string,
    event?: (deleted: PromptRecord) => OutboxRecord,
  ): Promise<PromptRecord | null> {
    return this.inTransaction(async (session) => {
      const deleted = await this.prompts.findOneAndDelete({ _id: id, organizationId }, { session })
      if (!deleted) return null
      await this.versions.deleteMany({ promptId: id }, { session })
      await this.envHistory.deleteMany({ promptId: id }, { session })
      const prompt = withType(deleted)
      const rows = event ? [event(prompt)].flat() : []
      // insertMany refuses an empty list (MongoInvalidArgumentError: "Batch cannot be empty").
      if (rows.length > 0) await this.outbox.insertMany(rows.map(storedRow), { session })
      return prompt
    })
  }

  async setPin(
    organizationId: string,
    id: string,
    env: EnvironmentName,
    build: (stored: PromptRecord) => PinWrite,
  ): Promise<PromptRecord | null> {
    return this.inTransaction(async (session) => {
      // Read in the transaction's snapshot: a promote committed by another replica after it
      // makes the update below a write conflict, and the driver runs this callback again with a
      // fresh snapshot, so `build` always dates from the pin it replaces.
      const stored = await this.prompts.findOne({ _id: id, organizationId }, { session })
      if (!stored) return null
      const { pin, events, history } = build(withType(stored))
      // A dotted path sets one environment only: a concurrent promote of the other one is kept.
      const $set: Record<string, unknown> = { [`environments.${env}`]: pin }
      const after = await this.prompts.findOneAndUpdate(
        { _id: id, organizationId },
        // $max: never back to an earlier updatedAt (a save's compare-and-set would then match a
        // draft it read before another save, and undo that save). ISO strings order as times.
        { $set, $max: { updatedAt: pin.promotedAt } },
        { returnDocument: 'after', session },
      )
      if (!after) return null
      const prompt = withType(after)
      if (events) {
        const records = events(prompt).map(storedRow)
        if (records.length > 0) await this.outbox.insertMany(records, { session })
      }
      if (history) await this.envHistory.insertOne({ ...history }, { session })
      return prompt
    })
  }

  async listEnvHistory(
    promptId: string,
    env: EnvironmentName,
    page: Page,
  ): Promise<{ entries: EnvHistoryRecord[]; total: number }> {
    const filter = { promptId, environment: env }
    const [entries, total] = await Promise.all([
      this.envHistory
        .find(filter)
        .sort({ promotedAt: -1, _id: -1 })
        .skip((page.page - 1) * page.limit)
        .limit(page.limit)
        .toArray(),
      this.envHistory.countDocuments(filter),
    ])
    return { entries, total }
  }

  async addSplitCounts(counts: SplitCount[]): Promise<void> {
    if (counts.length === 0) return
    await this.splitCountsColl.bulkWrite(
      counts.map((c) => ({
        updateOne: {
          filter: { _id: `${c.splitId}:${c.variant}` },
          update: { $inc: { count: c.count }, $setOnInsert: { splitId: c.splitId, variant: c.variant } },
          upsert: true,
        },
      })),
      { ordered: false },
    )
  }

  async splitCounts(splitIds: string[]): Promise<Map<string, number[]>> {
    const found = new Map<string, number[]>()
    if (splitIds.length === 0) return found
    for (const doc of await this.splitCountsColl.find({ splitId: { $in: splitIds } }).toArray()) {
      const list = found.get(doc.splitId) ?? []
      list[doc.variant] = doc.count
      found.set(doc.splitId, list)
    }
    return found
  }

  async publish(
    organizationId: string,
    promptId: string,
    build: VersionBuilder,
  ): Promise<VersionRecord | null> {
    // The transaction reads the counter, writes the version (unique on promptId+version)
    // and moves the counter only if nobody else did; a lost race starts over.
    for (let attempt = 0; attempt < 50; attempt++) {
      const session = this.client.startSession({ defaultTransactionOptions: TRANSACTION_OPTIONS })
      try {
        let created: VersionRecord | null = null
        await session.withTransaction(async () => {
          const found = await this.prompts.findOne({ _id: promptId, organizationId }, { session })
          if (!found) {
            created = null
            return
          }
          const prompt = withType(found)
          const { version, outbox, extra } = build(prompt, prompt.versionCount + 1)
          await this.versions.insertOne(stored(version), { session })
          const moved = await this.prompts.updateOne(
            { _id: promptId, versionCount: prompt.versionCount },
            {
              $set: { versionCount: version.version, currentVersionId: version._id },
              // Never back to an earlier updatedAt (setEnvironment).
              $max: { updatedAt: version.publishedAt },
            },
            { session },
          )
          if (moved.modifiedCount !== 1) throw new CounterMoved()
          await this.outbox.insertOne(storedRow(outbox), { session })
          if (extra && extra.length > 0) await this.outbox.insertMany(extra.map(storedRow), { session })
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

  async createWithVersion(
    prompt: PromptRecord,
    version: VersionRecord,
    outbox: OutboxRecord | OutboxRecord[],
  ): Promise<void> {
    await unique(DuplicateSlugError, () =>
      this.inTransaction(async (session) => {
        await this.prompts.insertOne(stored(prompt), { session })
        await this.versions.insertOne(stored(version), { session })
        const rows = [outbox].flat()
        if (rows.length > 0) await this.outbox.insertMany(rows.map(storedRow), { session })
      }),
    )
  }

  async listVersions(promptId: string, order: 'version' | 'publishedAt'): Promise<VersionRecord[]> {
    const sort: Sort = order === 'version' ? { version: -1 } : { publishedAt: -1, version: -1 }
    return (await this.versions.find({ promptId }).sort(sort).toArray()).map(withType)
  }

  async getVersion(promptId: string, versionId: string): Promise<VersionRecord | null> {
    return versionOrNull(await this.versions.findOne({ _id: versionId, promptId }))
  }

  async getVersionByNumber(promptId: string, version: number): Promise<VersionRecord | null> {
    return versionOrNull(await this.versions.findOne({ promptId, version }))
  }

  async listContaining(
    organizationId: string,
    needle: string,
    excludeId: string,
  ): Promise<Array<{ prompt: PromptRecord; current: VersionRecord | null }>> {
    const re = new RegExp(escapeRegex(needle))
    // Versions whose text has it, then prompts whose draft has it or whose current version is one of them.
    const matching = await this.versions
      .find({ organizationId, template: re }, { projection: { _id: 1 } })
      .toArray()
    const prompts = (
      await this.prompts
        .find({
          organizationId,
          _id: { $ne: excludeId },
          $or: [{ template: re }, { currentVersionId: { $in: matching.map((v) => v._id) } }],
        })
        .toArray()
    ).map(withType)
    const ids = prompts.flatMap((p) => (p.currentVersionId ? [p.currentVersionId] : []))
    const versions = new Map((await this.getVersionsByIds(ids)).map((v) => [v._id, v]))
    return prompts.map((prompt) => ({
      prompt,
      current: prompt.currentVersionId ? (versions.get(prompt.currentVersionId) ?? null) : null,
    }))
  }

  async getVersionsByIds(ids: string[]): Promise<VersionRecord[]> {
    if (ids.length === 0) return []
    return (await this.versions.find({ _id: { $in: ids } }).toArray()).map(withType)
  }

  async pendingOutbox(limit: number): Promise<OutboxRecord[]> {
    const rows = await this.outbox
      .find({ sentAt: null })
      .sort({ createdAt: 1, _id: 1 })
      .limit(limit)
      .toArray()
    return rows.map((o) => ({ ...o, payload: fromMongoJson(o.payload) }))
  }

  async markOutboxSent(id: string, at: string): Promise<void> {
    await this.outbox.updateOne({ _id: id }, { $set: { sentAt: at } })
  }

  async outboxBacklog(): Promise<{ count: number; oldestCreatedAt: string | null }> {
    const [count, oldest] = await Promise.all([
      this.outbox.countDocuments({ sentAt: null }),
      this.outbox.findOne({ sentAt: null }, { sort: { createdAt: 1 }, projection: { createdAt: 1 } }),
    ])
    return { count, oldestCreatedAt: oldest?.createdAt ?? null }
  }

  async pruneOutbox(before: string): Promise<number> {
    const result = await this.outbox.deleteMany({ sentAt: { $ne: null, $lt: before } })
    return result.deletedCount
  }

  /** Runs `fn` in one import transaction (retried by the driver on transient errors). */
  private async importTxn<T>(fn: (session: ClientSession) => Promise<T>): Promise<T> {
    const session = this.client.startSession()
    try {
      return await session.withTransaction(fn, IMPORT_TXN)
    } finally {
      await session.endSession()
    }
  }

  async createBatch(batch: ImportBatchRecord, file: Buffer | null): Promise<void> {
    await unique(DuplicateImportError, () =>
      this.importTxn(async (session) => {
        await this.batches.insertOne({ ...batch }, { session })
        if (file) await this.files.insertOne({ _id: batch._id, content: new Binary(file) }, { session })
      }),
    )
  }

  async getBatch(organizationId: string, id: string): Promise<ImportBatchRecord | null> {
    const doc = await this.batches.findOne({ _id: id, organizationId })
    return doc ? toBatch(doc) : null
  }

  async findBatchByHash(organizationId: string, contentHash: string): Promise<ImportBatchRecord | null> {
    const doc = await this.batches.findOne({ organizationId, contentHash })
    return doc ? toBatch(doc) : null
  }

  async findBatchByKey(
    organizationId: string,
    userId: string,
    key: string,
  ): Promise<ImportBatchRecord | null> {
    const doc = await this.batches.findOne({ organizationId, createdBy: userId, idempotencyKey: key })
    return doc ? toBatch(doc) : null
  }

  async forgetBatchKeys(id: string): Promise<void> {
    await this.batches.updateOne({ _id: id }, { $set: { contentHash: null, idempotencyKey: null } })
  }

  async getImportFile(batchId: string): Promise<Buffer | null> {
    const doc = await this.files.findOne({ _id: batchId })
    return doc ? Buffer.from(doc.content.value()) : null
  }

  /** The filter that fences a step: the batch is still the owner's and where the owner left it. */
  private stepFilter(step: ImportStep): Filter<ImportBatchRecord> {
    return { _id: step.batchId, leaseOwner: step.owner, position: step.from, status: 'processing' }
  }

  async importRows(step: ImportStep, prompts: PromptRecord[], errors: ImportRowError[]): Promise<void> {
    await unique(DuplicateSlugError, () =>
      this.importTxn(async (session) => {
        const moved = await this.batches.updateOne(
          this.stepFilter(step),
          {
            $inc: { created: prompts.length, failed: errors.length },
            $push: { errors: { $each: errors } },
            $set: { position: step.to, updatedAt: step.at },
          },
          { session },
        )
        if (moved.matchedCount !== 1) throw new LeaseLostError()
        // One at a time: the operations of a transaction must not run in parallel.
        for (const prompt of prompts) await this.prompts.insertOne(stored(prompt), { session })
      }),
    )
  }

  async finishBatch(
    batchId: string,
    owner: string,
    status: 'completed' | 'failed',
    at: string,
  ): Promise<void> {
    await this.importTxn(async (session) => {
      const ended = await this.batches.updateOne(
        { _id: batchId, leaseOwner: owner, status: 'processing' },
        { $set: { status, finishedAt: at, updatedAt: at, leaseOwner: null, leaseUntil: null } },
        { session },
      )
      if (ended.matchedCount !== 1) throw new LeaseLostError()
      await this.files.deleteOne({ _id: batchId }, { session })
    })
  }

  async claimBatch(owner: string, at: string, until: string): Promise<ImportBatchRecord | null> {
    // One atomic findOneAndUpdate: of two replicas asking at once, only one matches the free lease.
    const doc = await this.batches.findOneAndUpdate(
      { status: 'processing', $or: [{ leaseUntil: null }, { leaseUntil: { $lt: at } }] },
      { $set: { leaseOwner: owner, leaseUntil: until, resumedAt: at, updatedAt: at } },
      { sort: { createdAt: 1 }, returnDocument: 'after' },
    )
    return doc ? toBatch(doc) : null
  }

  async renewLease(batchId: string, owner: string, until: string): Promise<boolean> {
    const result = await this.batches.updateOne(
      { _id: batchId, leaseOwner: owner, status: 'processing' },
      { $set: { leaseUntil: until } },
    )
    return result.matchedCount === 1
  }

  async releaseLease(batchId: string, owner: string): Promise<void> {
    await this.batches.updateOne(
      { _id: batchId, leaseOwner: owner },
      { $set: { leaseOwner: null, leaseUntil: null } },
    )
  }

  async check(): Promise<void> {
    await this.db.command({ ping: 1 })
  }

  async close(): Promise<void> {
    if (this.ownsClient) await this.client.close()
  }
}
