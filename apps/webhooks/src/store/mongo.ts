import type { AuditEntry, DeliveryStatus } from '@pm/contracts'
import {
  dropReplacedIndex,
  ensureCollection,
  MongoAuditOutbox,
  mongoTransaction,
  onlyDuplicateKeys,
  TRANSACTION_OPTIONS,
  resealFields,
} from '@pm/kit/mongo'
import type { Collection, Db, Filter, MongoClient, UpdateFilter } from 'mongodb'
import type {
  AttemptRecord,
  DeliveryOutcome,
  DeliveryRecord,
  OrganizationShare,
  Page,
  SecretRotation,
  SubscriptionPatch,
  SubscriptionRecord,
  WebhookStore,
} from './types.ts'
import { organizationShare } from './types.ts'

/** Due for a worker at `now`: waiting, and nobody's lease is still running. */
function claimable(now: string): Filter<DeliveryRecord> {
  return {
    status: 'PENDING',
    nextAttemptAt: { $lte: now },
    $or: [{ leaseUntil: null }, { leaseUntil: { $lte: now } }],
  }
}

/**
 * MongoDB implementation: string `_id`s (the services' 24-hex ids); the unique index on
 * (eventId, subscriptionId) is what makes delivery creation idempotent; claims are single-
 * document `findOneAndUpdate`s, so two workers never hold the same delivery. Multi-document
 * writes run in transactions (replica set required, as for the other services). Indexes are
 * created by `init()` at start-up.
 */
export class MongoWebhookStore implements WebhookStore {
  private readonly client: MongoClient
  private readonly db: Db
  private readonly subscriptions: Collection<SubscriptionRecord>
  private readonly deliveries: Collection<DeliveryRecord>
  private readonly attempts: Collection<AttemptRecord>
  /** One document per organization, written by every bounded create (`createSubscription`). */
  private readonly subscriptionGuards: Collection<{ _id: string; creates: number }>
  /** Audit entries written in their change's transaction, until the relay has published them. */
  private readonly auditOutbox: MongoAuditOutbox
  private readonly ownsClient: boolean

  constructor(client: MongoClient, dbName: string, ownsClient = true) {
    this.client = client
    this.ownsClient = ownsClient
    this.db = client.db(dbName)
    this.subscriptions = this.db.collection('subscriptions')
    this.deliveries = this.db.collection('deliveries')
    this.attempts = this.db.collection('attempts')
    this.subscriptionGuards = this.db.collection('subscription_guards')
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
    await ensureCollection(this.db, 'subscription_guards')
    // Every sort has its whole key, tie-break included, in an index after the equality fields,
    // so that MongoDB never sorts in memory (claimDue on the worker's hot path, listDeliveries,
    // listSubscriptions, subscriptionsFor).
    await Promise.all([
      this.subscriptions.createIndex({ organizationId: 1, createdAt: 1, _id: 1 }),
      // The delivery worker's sweep of previous secrets past their overlap, once a minute.
      this.subscriptions.createIndex({ previousSecretExpiresAt: 1 }),
      this.deliveries.createIndex({ eventId: 1, subscriptionId: 1 }, { unique: true }),
      this.deliveries.createIndex({ status: 1, nextAttemptAt: 1, _id: 1 }),
      this.deliveries.createIndex({ subscriptionId: 1, createdAt: -1, _id: -1 }),
      this.attempts.createIndex({ deliveryId: 1, number: 1 }),
      this.attempts.createIndex({ subscriptionId: 1 }),
    ])
    // Their narrower predecessors.
    await Promise.all([
      dropReplacedIndex(this.subscriptions, 'organizationId_1_createdAt_1'),
      dropReplacedIndex(this.deliveries, 'status_1_nextAttemptAt_1'),
      dropReplacedIndex(this.deliveries, 'subscriptionId_1_createdAt_-1'),
    ])
  }

  async createSubscription(
    sub: SubscriptionRecord,
    audit: AuditEntry[] = [],
    maxPerOrganization?: number,
  ): Promise<boolean> {
    if (audit.length === 0 && maxPerOrganization === undefined) {
      await this.subscriptions.insertOne({ ...sub })
      return true
    }
    return mongoTransaction(this.client, async (session) => {
      if (maxPerOrganization !== undefined) {
        // A count alone does not serialize: two creates at once each count in their own snapshot
        // and insert different documents, which do not conflict. Both first write the
        // organization's guard document, so the second meets a write conflict (a transient
        // error: withTransaction runs it again, and its count then includes the first's insert).
        await this.subscriptionGuards.updateOne(
          { _id: sub.organizationId },
          { $inc: { creates: 1 } },
          { session, upsert: true },
        )
        const held = await this.subscriptions.countDocuments(
          { organizationId: sub.organizationId },
          { session },
        )
        if (held >= maxPerOrganization) return false
      }
      await this.subscriptions.insertOne({ ...sub }, { session })
      if (audit.length > 0) await this.auditOutbox.insert(audit, session)
      return true
    })
  }

  async getSubscription(organizationId: string, id: string): Promise<SubscriptionRecord | null> {
    return this.subscriptions.findOne({ _id: id, organizationId })
  }

  async getSubscriptionById(id: string): Promise<SubscriptionRecord | null> {
    return this.subscriptions.findOne({ _id: id })
  }

  async listSubscriptions(organizationId: string): Promise<SubscriptionRecord[]> {
    return this.subscriptions.find({ organizationId }).sort({ createdAt: 1, _id: 1 }).toArray()
  }

  async countSubscriptions(organizationId: string): Promise<number> {
    return this.subscriptions.countDocuments({ organizationId })
  }

  async subscriptionsFor(organizationId: string, eventType: string): Promise<SubscriptionRecord[]> {
    // `events: eventType` matches documents whose events array contains it.
    return this.subscriptions
      .find({ organizationId, active: true, events: eventType })
      .sort({ createdAt: 1, _id: 1 })
      .toArray()
  }

  async updateSubscription(
    organizationId: string,
    id: string,
    patch: SubscriptionPatch,
    audit: AuditEntry[] = [],
    expected?: Pick<SubscriptionRecord, 'url' | 'active'>,
  ): Promise<SubscriptionRecord | null> {
    const $set = Object.fromEntries(Object.entries(patch).filter(([, v]) => v !== undefined))
    // With `expected`, only the subscription as the caller read it (compare-and-set in the filter).
    const filter: Filter<SubscriptionRecord> = expected
      ? { _id: id, organizationId, url: expected.url, active: expected.active }
      : { _id: id, organizationId }
    return this.updateAudited(filter, { $set }, audit)
  }

  /**
   * One subscription's update and its audit entries (in a transaction when there are any): the
   * document after, or null when none matched.
   */
  private async updateAudited(
    filter: Filter<SubscriptionRecord>,
    update: UpdateFilter<SubscriptionRecord>,
    audit: AuditEntry[],
  ): Promise<SubscriptionRecord | null> {
    if (audit.length === 0) {
      return this.subscriptions.findOneAndUpdate(filter, update, { returnDocument: 'after' })
    }
    return mongoTransaction(this.client, async (session) => {
      const sub = await this.subscriptions.findOneAndUpdate(filter, update, {
        returnDocument: 'after',
        session,
      })
      if (sub) await this.auditOutbox.insert(audit, session)
      return sub
    })
  }

  async rotateSecret(
    organizationId: string,
    id: string,
    expected: string,
    next: SecretRotation,
    audit: AuditEntry[] = [],
  ): Promise<SubscriptionRecord | null> {
    // Compare-and-set on the secret: of two rotations at once, one matches.
    return this.updateAudited({ _id: id, organizationId, secret: expected }, { $set: { ...next } }, audit)
  }

  async dropExpiredPreviousSecrets(now: string): Promise<number> {
    // `$ne: null` also leaves out documents without the field (written before rotation existed).
    const result = await this.subscriptions.updateMany(
      { previousSecret: { $ne: null }, previousSecretExpiresAt: { $lte: now } },
      { $set: { previousSecret: null, previousSecretExpiresAt: null } },
    )
    return result.modifiedCount
  }

  async deleteSubscription(organizationId: string, id: string, audit: AuditEntry[] = []): Promise<boolean> {
    const session = this.client.startSession({ defaultTransactionOptions: TRANSACTION_OPTIONS })
    try {
      let deleted = false
      await session.withTransaction(async () => {
        const result = await this.subscriptions.deleteOne({ _id: id, organizationId }, { session })
        deleted = result.deletedCount === 1
        if (deleted) {
          await this.attempts.deleteMany({ subscriptionId: id }, { session })
          await this.deliveries.deleteMany({ subscriptionId: id }, { session })
          await this.auditOutbox.insert(audit, session)
        }
      })
      return deleted
    } finally {
      await session.endSession()
    }
  }

  async createDeliveries(deliveries: DeliveryRecord[]): Promise<number> {
    if (deliveries.length === 0) return 0
    try {
      // Unordered: a duplicate (eventId, subscriptionId) fails alone and the others go in.
      const result = await this.deliveries.insertMany(
        deliveries.map((d) => ({ ...d })),
        { ordered: false },
      )
      return result.insertedCount
    } catch (err) {
      // Only "some were there already" is success; anything else may have lost deliveries, and
      // the caller must not acknowledge the event.
      if (onlyDuplicateKeys(err, deliveries.length)) return err.insertedCount
      throw err
    }
  }

  async getDelivery(
    organizationId: string,
    subscriptionId: string,
    id: string,
  ): Promise<DeliveryRecord | null> {
    return this.deliveries.findOne({ _id: id, organizationId, subscriptionId })
  }

  async listDeliveries(
    organizationId: string,
    subscriptionId: string,
    status: DeliveryStatus | undefined,
    page: Page,
  ): Promise<{ deliveries: DeliveryRecord[]; total: number }> {
    const filter: Filter<DeliveryRecord> = { organizationId, subscriptionId }
    if (status) filter.status = status
    const [deliveries, total] = await Promise.all([
      this.deliveries
        .find(filter)
        .sort({ createdAt: -1, _id: -1 })
        .skip((page.page - 1) * page.limit)
        .limit(page.limit)
        .toArray(),
      this.deliveries.countDocuments(filter),
    ])
    return { deliveries, total }
  }

  async listAttempts(deliveryIds: string[]): Promise<AttemptRecord[]> {
    if (deliveryIds.length === 0) return []
    return this.attempts
      .find({ deliveryId: { $in: deliveryIds } })
      .sort({ deliveryId: 1, number: 1, attemptedAt: 1 })
      .toArray()
  }

  async claimDue(
    now: string,
    limit: number,
    token: string,
    leaseUntil: string,
    perOrganization?: OrganizationShare,
  ): Promise<DeliveryRecord[]> {
    const claimed: DeliveryRecord[] = []
    const share = organizationShare(perOrganization)
    // One document at a time: each findOneAndUpdate is atomic, so a delivery is claimed once;
    // an organization at its share is left out of the next one's filter.
    while (claimed.length < limit) {
      const full = share.full()
      const filter: Filter<DeliveryRecord> =
        full.length > 0 ? { ...claimable(now), organizationId: { $nin: full } } : claimable(now)
      const doc = await this.deliveries.findOneAndUpdate(
        filter,
        { $set: { leaseToken: token, leaseUntil } },
        { sort: { nextAttemptAt: 1, _id: 1 }, returnDocument: 'after' },
      )
      if (!doc) break
      share.take(doc.organizationId)
      claimed.push(doc)
    }
    return claimed
  }

  async nextDueAt(): Promise<string | null> {
    const next = await this.deliveries.findOne(
      { status: 'PENDING', nextAttemptAt: { $ne: null } },
      { sort: { nextAttemptAt: 1 }, projection: { nextAttemptAt: 1 } },
    )
    return next?.nextAttemptAt ?? null
  }

  async recordAttempt(
    deliveryId: string,
    token: string,
    attempt: AttemptRecord | null,
    o: DeliveryOutcome,
  ): Promise<boolean> {
    const session = this.client.startSession({ defaultTransactionOptions: TRANSACTION_OPTIONS })
    try {
      let applied = false
      await session.withTransaction(async () => {
        if (attempt) await this.attempts.insertOne({ ...attempt }, { session })
        const result = await this.deliveries.updateOne(
          { _id: deliveryId, leaseToken: token },
          {
            $set: {
              status: o.status,
              attemptCount: o.attemptCount,
              nextAttemptAt: o.nextAttemptAt,
              lastStatusCode: o.lastStatusCode,
              lastError: o.lastError,
              deliveredAt: o.deliveredAt,
              updatedAt: o.updatedAt,
              leaseToken: null,
              leaseUntil: null,
            },
          },
          { session },
        )
        applied = result.modifiedCount === 1
      })
      return applied
    } finally {
      await session.endSession()
    }
  }

  async requeueDelivery(
    organizationId: string,
    subscriptionId: string,
    id: string,
    now: string,
  ): Promise<DeliveryRecord | 'leased' | null> {
    // An update pipeline, so that roundStart can be set from the document's own attemptCount.
    const updated = await this.deliveries.findOneAndUpdate(
      {
        _id: id,
        organizationId,
        subscriptionId,
        $or: [{ leaseUntil: null }, { leaseUntil: { $lte: now } }],
      },
      [
        {
          $set: {
            status: 'PENDING',
            roundStart: '$attemptCount',
            nextAttemptAt: now,
            leaseToken: null,
            leaseUntil: null,
            updatedAt: now,
          },
        },
      ],
      { returnDocument: 'after' },
    )
    if (updated) return updated
    const exists = await this.deliveries.countDocuments(
      { _id: id, organizationId, subscriptionId },
      { limit: 1 },
    )
    return exists > 0 ? 'leased' : null
  }

  async failPending(subscriptionId: string, reason: string, now: string): Promise<number> {
    const result = await this.deliveries.updateMany(
      {
        subscriptionId,
        status: 'PENDING',
        $or: [{ leaseUntil: null }, { leaseUntil: { $lte: now } }],
      },
      { $set: { status: 'FAILED', nextAttemptAt: null, lastError: reason, updatedAt: now } },
    )
    return result.modifiedCount
  }

  async resealSecrets(reseal: (id: string, stored: string) => string | null): Promise<number> {
    return resealFields(this.db.collection('subscriptions'), 'secret', 'previousSecret', reseal)
  }

  async check(): Promise<void> {
    await this.db.command({ ping: 1 })
  }

  async close(): Promise<void> {
    if (this.ownsClient) await this.client.close()
  }
}
