import type { AuditEntry, RunRecord } from '@pm/contracts'
import {
  ensureCollection,
  fromMongoJson,
  MongoAuditOutbox,
  mongoTransaction,
  resealFields,
  toMongoJson,
} from '@pm/kit/mongo'
import type { Collection, Db, MongoClient } from 'mongodb'
import type { ConnectionPatch, ConnectionRecord, Page, RunStore } from './types.ts'

/**
 * MongoDB implementation: string `_id`s (the services' 24-hex ids), one document per
 * connection and per run. Every query filters on `organizationId` (tenant isolation), and
 * every sort has its index, created by `init()` at start-up.
 */
export class MongoRunStore implements RunStore {
  private readonly client: MongoClient
  private readonly ownsClient: boolean
  private readonly db: Db
  private readonly connections: Collection<ConnectionRecord>
  private readonly runs: Collection<RunRecord>
  /** One document per organization, written by every connection create (`insertConnection`). */
  private readonly connectionGuards: Collection<{ _id: string; creates: number }>
  /** Audit entries written in their change's transaction, until the relay has published them. */
  private readonly auditOutbox: MongoAuditOutbox

  constructor(client: MongoClient, dbName: string, ownsClient = true) {
    this.client = client
    this.ownsClient = ownsClient
    this.db = client.db(dbName)
    this.connections = this.db.collection('connections')
    this.runs = this.db.collection('runs')
    this.connectionGuards = this.db.collection('connection_guards')
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
    // Written only in transactions: made here, so that none has to create it.
    await ensureCollection(this.db, 'connection_guards')
    await Promise.all([
      this.connections.createIndex({ organizationId: 1, createdAt: 1, _id: 1 }),
      this.runs.createIndex({ organizationId: 1, 'prompt.promptId': 1, createdAt: -1, _id: -1 }),
      this.runs.createIndex({ createdAt: 1 }),
    ])
  }

  async insertConnection(
    record: ConnectionRecord,
    maxPerOrganization: number,
    audit: AuditEntry[] = [],
  ): Promise<boolean> {
    const { organizationId } = record
    return mongoTransaction(this.client, async (session) => {
      // A count alone does not serialize: two creates at once each count in their own snapshot
      // and insert different documents, which do not conflict. Both first write the
      // organization's guard document, so the second meets a write conflict (a transient error:
      // withTransaction runs it again, and its count then includes the first's insert).
      await this.connectionGuards.updateOne(
        { _id: organizationId },
        { $inc: { creates: 1 } },
        { session, upsert: true },
      )
      const held = await this.connections.countDocuments({ organizationId }, { session })
      if (held >= maxPerOrganization) return false
      await this.connections.insertOne({ ...record }, { session })
      if (audit.length > 0) await this.auditOutbox.insert(audit, session)
      return true
    })
  }

  async listConnections(organizationId: string): Promise<ConnectionRecord[]> {
    return this.connections.find({ organizationId }).sort({ createdAt: 1, _id: 1 }).toArray()
  }

  async getConnection(organizationId: string, id: string): Promise<ConnectionRecord | null> {
    return this.connections.findOne({ _id: id, organizationId })
  }

  async updateConnection(
    organizationId: string,
    id: string,
    patch: ConnectionPatch,
    audit: AuditEntry[] = [],
  ): Promise<ConnectionRecord | null> {
    const set = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined))
    if (audit.length === 0) {
      return this.connections.findOneAndUpdate(
        { _id: id, organizationId },
        { $set: set },
        { returnDocument: 'after' },
      )
    }
    return mongoTransaction(this.client, async (session) => {
      const updated = await this.connections.findOneAndUpdate(
        { _id: id, organizationId },
        { $set: set },
        { returnDocument: 'after', session },
      )
      if (updated) await this.auditOutbox.insert(audit, session)
      return updated
    })
  }

  async deleteConnection(organizationId: string, id: string, audit: AuditEntry[] = []): Promise<boolean> {
    if (audit.length === 0) {
      const result = await this.connections.deleteOne({ _id: id, organizationId })
      return result.deletedCount > 0
    }
    return mongoTransaction(this.client, async (session) => {
      const result = await this.connections.deleteOne({ _id: id, organizationId }, { session })
      if (result.deletedCount === 0) return false
      await this.auditOutbox.insert(audit, session)
      return true
    })
  }

  async insertRun(run: RunRecord): Promise<void> {
    // Params, variables and error details are user JSON (toMongoJson).
    await this.runs.insertOne(toMongoJson({ ...run }))
  }

  async listRuns(
    organizationId: string,
    promptId: string,
    page: number,
    limit: number,
  ): Promise<Page<RunRecord>> {
    const filter = { organizationId, 'prompt.promptId': promptId }
    const [items, total] = await Promise.all([
      this.runs
        .find(filter)
        .sort({ createdAt: -1, _id: -1 })
        .skip((page - 1) * limit)
        .limit(limit)
        .toArray(),
      this.runs.countDocuments(filter),
    ])
    return { items: items.map(fromMongoJson), total }
  }

  async getRun(organizationId: string, id: string): Promise<RunRecord | null> {
    return fromMongoJson(await this.runs.findOne({ _id: id, organizationId }))
  }

  async deleteRunsBefore(before: string): Promise<number> {
    const result = await this.runs.deleteMany({ createdAt: { $lt: before } })
    return result.deletedCount
  }

  async resealConnections(reseal: (id: string, stored: string) => string | null): Promise<number> {
    return resealFields(this.db.collection('connections'), 'sealedKey', 'sealedHeaders', reseal)
  }

  async check(): Promise<void> {
    await this.db.command({ ping: 1 })
  }

  async close(): Promise<void> {
    if (this.ownsClient) await this.client.close()
  }
}
