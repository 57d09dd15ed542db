import type { AuditEntry, ExperimentStatus } from '@pm/contracts'
import { fromMongoJson, MongoAuditOutbox, mongoTransaction, toMongoJson } from '@pm/kit/mongo'
import type { Collection, Db, Filter, MongoClient } from 'mongodb'
import type {
  AddItemsOutcome,
  DatasetRecord,
  DeleteDatasetOutcome,
  ExperimentRecord,
  ExperimentStore,
  ItemRecord,
  NewItem,
  Page,
  PageArgs,
  UnitRecord,
  UnitResult,
} from './types.ts'

/**
 * `lastExperimentId`: written by every experiment's creation, so that it and the dataset's delete
 * write the same document and one of the two transactions aborts (write conflict) and is retried.
 */
type DatasetDoc = DatasetRecord & { nextPosition: number; lastExperimentId?: string }
type ExperimentDoc = ExperimentRecord & { promptIds: string[] }

const ACTIVE: ExperimentStatus[] = ['queued', 'running']
const ENDED: ExperimentStatus[] = ['completed', 'failed', 'cancelled']

const toDataset = (doc: DatasetDoc): DatasetRecord => withoutDoc(doc, 'nextPosition', 'lastExperimentId')

function withoutDoc<T extends object, K extends string>(doc: T, ...keys: K[]): Omit<T, K> {
  const copy = { ...doc } as Record<string, unknown>
  for (const k of keys) delete copy[k]
  return copy as Omit<T, K>
}

/**
 * MongoDB implementation: string `_id`s. A unit's `_id` is its (experiment, item, variant) key,
 * so creating the units twice fails rather than doubling them, and `completeUnit` is an
 * `updateOne` conditioned on `status: 'pending'`: a unit repeated after a crash is written once.
 * Claims are one `findOneAndUpdate` per unit, so two replicas never hold the same unit.
 * Multi-document writes run in transactions (a replica set, as for the other services).
 */
export class MongoExperimentStore implements ExperimentStore {
  private readonly client: MongoClient
  private readonly db: Db
  private readonly datasets: Collection<DatasetDoc>
  private readonly items: Collection<ItemRecord>
  private readonly experiments: Collection<ExperimentDoc>
  private readonly units: Collection<UnitRecord>
  /** Audit entries written in their change's transaction, until the relay has published them. */
  private readonly auditOutbox: MongoAuditOutbox
  private readonly ownsClient: boolean

  constructor(client: MongoClient, dbName: string, ownsClient = true) {
    this.client = client
    this.ownsClient = ownsClient
    this.db = client.db(dbName)
    this.datasets = this.db.collection('datasets')
    this.items = this.db.collection('items')
    this.experiments = this.db.collection('experiments')
    this.units = this.db.collection('units')
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

  async init(): Promise<void> {
    await this.auditOutbox.init()
    await Promise.all([
      this.datasets.createIndex({ organizationId: 1, createdAt: -1, _id: -1 }),
      this.items.createIndex({ datasetId: 1, position: 1 }, { unique: true }),
      this.experiments.createIndex({ organizationId: 1, createdAt: -1, _id: -1 }),
      this.experiments.createIndex({ organizationId: 1, promptIds: 1, createdAt: -1, _id: -1 }),
      this.experiments.createIndex({ status: 1, announced: 1 }),
      this.experiments.createIndex({ datasetId: 1, status: 1 }),
      this.units.createIndex({ experimentId: 1, status: 1, position: 1, variant: 1 }),
    ])
  }

  async createDataset(d: DatasetRecord, audit: AuditEntry[] = []): Promise<void> {
    if (audit.length === 0) {
      await this.datasets.insertOne({ ...d, itemCount: 0, nextPosition: 1 })
      return
    }
    await mongoTransaction(this.client, async (session) => {
      await this.datasets.insertOne({ ...d, itemCount: 0, nextPosition: 1 }, { session })
      await this.auditOutbox.insert(audit, session)
    })
  }

  async getDataset(organizationId: string, id: string): Promise<DatasetRecord | null> {
    const doc = await this.datasets.findOne({ _id: id, organizationId })
    return doc ? toDataset(doc) : null
  }

  async listDatasets(organizationId: string, p: PageArgs): Promise<Page<DatasetRecord>> {
    const filter = { organizationId }
    const [docs, total] = await Promise.all([
      this.datasets
        .find(filter)
        .sort({ createdAt: -1, _id: -1 })
        .skip((p.page - 1) * p.limit)
        .limit(p.limit)
        .toArray(),
      this.datasets.countDocuments(filter),
    ])
    return { rows: docs.map(toDataset), total }
  }

  async updateDataset(
    organizationId: string,
    id: string,
    patch: { name?: string; description?: string; updatedAt: string },
    audit: AuditEntry[] = [],
  ): Promise<DatasetRecord | null> {
    const set: Partial<DatasetDoc> = { updatedAt: patch.updatedAt }
    if (patch.name !== undefined) set.name = patch.name
    if (patch.description !== undefined) set.description = patch.description
    if (audit.length === 0) {
      const doc = await this.datasets.findOneAndUpdate(
        { _id: id, organizationId },
        { $set: set },
        { returnDocument: 'after' },
      )
      return doc ? toDataset(doc) : null
    }
    return mongoTransaction(this.client, async (session) => {
      const doc = await this.datasets.findOneAndUpdate(
        { _id: id, organizationId },
        { $set: set },
        { returnDocument: 'after', session },
      )
      if (!doc) return null
      await this.auditOutbox.insert(audit, session)
      return toDataset(doc)
    })
  }

  async deleteDataset(
    organizationId: string,
    id: string,
    audit: AuditEntry[] = [],
  ): Promise<DeleteDatasetOutcome> {
    return mongoTransaction(this.client, async (session): Promise<DeleteDatasetOutcome> => {
      // A snapshot read: an experiment created after it is not seen here, but its creation wrote
      // the dataset's document, so the delete below conflicts and the whole transaction reruns.
      const active = await this.experiments.countDocuments(
        { datasetId: id, status: { $in: ACTIVE } },
        { session, limit: 1 },
      )
      if (active > 0) {
        const exists = await this.datasets.countDocuments({ _id: id, organizationId }, { session, limit: 1 })
        return exists === 0 ? 'not-found' : 'in-use'
      }
      const r = await this.datasets.deleteOne({ _id: id, organizationId }, { session })
      if (r.deletedCount !== 1) return 'not-found'
      await this.items.deleteMany({ datasetId: id }, { session })
      await this.auditOutbox.insert(audit, session)
      return 'deleted'
    })
  }

  async addItems(
    organizationId: string,
    datasetId: string,
    items: NewItem[],
    max: number,
    audit: AuditEntry[] = [],
  ): Promise<AddItemsOutcome> {
    return mongoTransaction(this.client, async (session): Promise<AddItemsOutcome> => {
      // The count and the positions move together, conditioned on the bound: a concurrent add
      // either sees this one's count or aborts the transaction (write conflict) and is retried.
      const d = await this.datasets.findOneAndUpdate(
        { _id: datasetId, organizationId, itemCount: { $lte: max - items.length } },
        {
          $inc: { itemCount: items.length, nextPosition: items.length },
          $set: { updatedAt: new Date().toISOString() },
        },
        { session, returnDocument: 'before' },
      )
      if (!d) {
        const exists = await this.datasets.countDocuments(
          { _id: datasetId, organizationId },
          { session, limit: 1 },
        )
        return exists === 0 ? 'not-found' : 'too-many'
      }
      let position = d.nextPosition
      // insertMany refuses an empty list (MongoInvalidArgumentError: "Batch cannot be empty").
      if (items.length > 0) {
        // Variables and metadata are user JSON (toMongoJson).
        await this.items.insertMany(
          items.map((it) => toMongoJson({ ...it, organizationId, datasetId, position: position++ })),
          { session, ordered: true },
        )
      }
      await this.auditOutbox.insert(audit, session)
      return { itemCount: d.itemCount + items.length }
    })
  }

  async listItems(organizationId: string, datasetId: string, p: PageArgs): Promise<Page<ItemRecord>> {
    const filter = { datasetId, organizationId }
    const [rows, total] = await Promise.all([
      this.items
        .find(filter)
        .sort({ position: 1 })
        .skip((p.page - 1) * p.limit)
        .limit(p.limit)
        .toArray(),
      this.items.countDocuments(filter),
    ])
    return { rows: rows.map(fromMongoJson), total }
  }

  async allItems(datasetId: string): Promise<ItemRecord[]> {
    return (await this.items.find({ datasetId }).sort({ position: 1 }).toArray()).map(fromMongoJson)
  }

  async getItem(datasetId: string, itemId: string): Promise<ItemRecord | null> {
    return fromMongoJson(await this.items.findOne({ _id: itemId, datasetId }))
  }

  async deleteItem(
    organizationId: string,
    datasetId: string,
    itemId: string,
    audit: AuditEntry[] = [],
  ): Promise<boolean> {
    return mongoTransaction(this.client, async (session) => {
      const r = await this.items.deleteOne({ _id: itemId, datasetId, organizationId }, { session })
      if (r.deletedCount !== 1) return false
      await this.datasets.updateOne(
        { _id: datasetId },
        { $inc: { itemCount: -1 }, $set: { updatedAt: new Date().toISOString() } },
        { session },
      )
      await this.auditOutbox.insert(audit, session)
      return true
    })
  }

  async createExperiment(
    e: ExperimentRecord,
    units: UnitRecord[],
    audit: AuditEntry[] = [],
  ): Promise<boolean> {
    return mongoTransaction(this.client, async (session) => {
      // The dataset's document is written first (a conflict with its delete shows at once): a
      // delete committed before this transaction leaves nothing to match, and nothing is written.
      const dataset = await this.datasets.updateOne(
        { _id: e.datasetId, organizationId: e.organizationId },
        { $set: { lastExperimentId: e._id } },
        { session },
      )
      if (dataset.matchedCount !== 1) return false
      // Params and evaluators (a JSON schema) are user JSON (toMongoJson).
      await this.experiments.insertOne(
        toMongoJson({ ...e, promptIds: [...new Set(e.variants.map((v) => v.promptId))] }),
        { session },
      )
      // At most 50,000 units (10,000 items × 5 variants): batches keep each insert small.
      for (let i = 0; i < units.length; i += 5_000) {
        await this.units.insertMany(units.slice(i, i + 5_000), { session, ordered: true })
      }
      await this.auditOutbox.insert(audit, session)
      return true
    })
  }

  async getExperiment(organizationId: string | null, id: string): Promise<ExperimentRecord | null> {
    const doc = await this.experiments.findOne(
      organizationId === null ? { _id: id } : { _id: id, organizationId },
    )
    return doc ? withoutDoc(fromMongoJson(doc), 'promptIds') : null
  }

  async listExperiments(
    organizationId: string,
    p: PageArgs,
    promptId?: string,
  ): Promise<Page<ExperimentRecord>> {
    const filter: Filter<ExperimentDoc> =
      promptId === undefined ? { organizationId } : { organizationId, promptIds: promptId }
    const [docs, total] = await Promise.all([
      this.experiments
        .find(filter)
        .sort({ createdAt: -1, _id: -1 })
        .skip((p.page - 1) * p.limit)
        .limit(p.limit)
        .toArray(),
      this.experiments.countDocuments(filter),
    ])
    return { rows: docs.map((d) => withoutDoc(fromMongoJson(d), 'promptIds')), total }
  }

  async transition(
    id: string,
    from: readonly ExperimentStatus[],
    to: ExperimentStatus,
    fields: Partial<Pick<ExperimentRecord, 'startedAt' | 'finishedAt' | 'error' | 'summary'>> = {},
    audit: AuditEntry[] = [],
  ): Promise<boolean> {
    const set: Partial<ExperimentDoc> = { status: to }
    if (fields.startedAt !== undefined) set.startedAt = fields.startedAt
    if (fields.finishedAt !== undefined) set.finishedAt = fields.finishedAt
    if (fields.error !== undefined) set.error = fields.error
    if (fields.summary !== undefined) set.summary = fields.summary
    if (audit.length === 0) {
      // Matched, not modified: a move to the status it has with the same fields (a cancelled
      // experiment's summary frozen again) is a move, as SQLite's changes() counts it.
      const r = await this.experiments.updateOne({ _id: id, status: { $in: [...from] } }, { $set: set })
      return r.matchedCount === 1
    }
    return mongoTransaction(this.client, async (session) => {
      const r = await this.experiments.updateOne(
        { _id: id, status: { $in: [...from] } },
        { $set: set },
        { session },
      )
      if (r.matchedCount !== 1) return false
      await this.auditOutbox.insert(audit, session)
      return true
    })
  }

  async activeExperiments(): Promise<ExperimentRecord[]> {
    const docs = await this.experiments
      .find({ status: { $in: ACTIVE } })
      .sort({ createdAt: 1 })
      .toArray()
    return docs.map((d) => withoutDoc(fromMongoJson(d), 'promptIds'))
  }

  async unannounced(): Promise<ExperimentRecord[]> {
    const docs = await this.experiments.find({ status: { $in: ENDED }, announced: false }).toArray()
    return docs.map((d) => withoutDoc(fromMongoJson(d), 'promptIds'))
  }

  async markAnnounced(id: string): Promise<void> {
    await this.experiments.updateOne({ _id: id }, { $set: { announced: true } })
  }

  async claimUnits(
    experimentId: string,
    n: number,
    now: string,
    leaseUntil: string,
    token: string,
  ): Promise<UnitRecord[]> {
    const claimed: UnitRecord[] = []
    for (let i = 0; i < n; i++) {
      const doc = await this.units.findOneAndUpdate(
        {
          experimentId,
          status: 'pending',
          $and: [
            { $or: [{ leaseUntil: null }, { leaseUntil: { $lte: now } }] },
            { $or: [{ notBefore: null }, { notBefore: { $lte: now } }] },
          ],
        },
        { $set: { leaseToken: token, leaseUntil } },
        { sort: { position: 1, variant: 1 }, returnDocument: 'after' },
      )
      if (!doc) break
      // A unit written before the 429 count was kept has none.
      claimed.push({ ...doc, rateLimited: doc.rateLimited ?? 0 })
    }
    return claimed
  }

  async renewLeases(ids: readonly string[], token: string, leaseUntil: string): Promise<void> {
    if (ids.length === 0) return
    await this.units.updateMany(
      { _id: { $in: [...ids] }, leaseToken: token, status: 'pending' },
      { $set: { leaseUntil } },
    )
  }

  async releaseUnit(id: string, token: string, notBefore: string | null, rateLimited = false): Promise<void> {
    await this.units.updateOne(
      { _id: id, leaseToken: token, status: 'pending' },
      {
        $set: { leaseToken: null, leaseUntil: null, notBefore },
        ...(rateLimited ? { $inc: { rateLimited: 1 } } : {}),
      },
    )
  }

  async cancelUnits(experimentId: string): Promise<void> {
    await this.units.updateMany(
      { experimentId, status: 'pending' },
      { $set: { status: 'cancelled', leaseToken: null, leaseUntil: null } },
    )
  }

  async completeUnit(id: string, r: UnitResult): Promise<boolean> {
    const res = await this.units.updateOne(
      { _id: id, status: 'pending' },
      { $set: { ...r, status: 'done', leaseToken: null, leaseUntil: null } },
    )
    return res.modifiedCount === 1
  }

  async countUnits(experimentId: string): Promise<{ done: number; pending: number }> {
    const [done, pending] = await Promise.all([
      this.units.countDocuments({ experimentId, status: 'done' }),
      this.units.countDocuments({ experimentId, status: 'pending' }),
    ])
    return { done, pending }
  }

  async doneUnits(experimentId: string): Promise<UnitRecord[]> {
    return this.units.find({ experimentId, status: 'done' }).toArray()
  }

  async listResults(
    experimentId: string,
    p: PageArgs,
    filter: { variant?: number; failed?: boolean },
  ): Promise<Page<UnitRecord>> {
    const f: Filter<UnitRecord> = { experimentId, status: 'done' }
    if (filter.variant !== undefined) f.variant = filter.variant
    if (filter.failed === true) f.$or = [{ error: { $ne: null } }, { passed: false }]
    const [rows, total] = await Promise.all([
      this.units
        .find(f)
        .sort({ position: 1, variant: 1 })
        .skip((p.page - 1) * p.limit)
        .limit(p.limit)
        .toArray(),
      this.units.countDocuments(f),
    ])
    return { rows, total }
  }

  async check(): Promise<void> {
    await this.db.command({ ping: 1 })
  }

  async close(): Promise<void> {
    if (this.ownsClient) await this.client.close()
  }
}
