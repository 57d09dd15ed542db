import type { DatabaseSync, SQLInputValue } from 'node:sqlite'
import type { AuditEntry, DeliveryStatus } from '@pm/contracts'
import {
  addColumnIfMissing,
  AUDIT_OUTBOX_SCHEMA,
  type AuditOutbox,
  insertAuditOutbox,
  sqliteAuditOutbox,
  closeSqlite,
  openSqlite,
  transaction,
  queryAll,
  queryOne,
  queryPage,
  type SqliteRow,
  text,
  textOrNull,
  resealColumns,
} from '@pm/kit'
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

const SCHEMA = [
  // Audit entries written with their change, until the relay has published them (DESIGN section 15).
  ...AUDIT_OUTBOX_SCHEMA,
  `CREATE TABLE IF NOT EXISTS subscriptions (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, url TEXT NOT NULL, events TEXT NOT NULL,
    active INTEGER NOT NULL, secret TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL,
    disabled_at TEXT, disabled_reason TEXT)`,
  'CREATE INDEX IF NOT EXISTS subscriptions_org ON subscriptions(organization_id, created_at)',
  `CREATE TABLE IF NOT EXISTS deliveries (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, subscription_id TEXT NOT NULL,
    event_id TEXT NOT NULL, event_type TEXT NOT NULL, body TEXT NOT NULL, status TEXT NOT NULL,
    attempt_count INTEGER NOT NULL, round_start INTEGER NOT NULL, next_attempt_at TEXT,
    lease_token TEXT, lease_until TEXT, last_status_code INTEGER, last_error TEXT,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, delivered_at TEXT,
    UNIQUE (event_id, subscription_id))`,
  // The worker's query: due PENDING deliveries, earliest first.
  'CREATE INDEX IF NOT EXISTS deliveries_due ON deliveries(status, next_attempt_at)',
  'CREATE INDEX IF NOT EXISTS deliveries_sub ON deliveries(subscription_id, created_at DESC)',
  `CREATE TABLE IF NOT EXISTS attempts (
    id TEXT PRIMARY KEY, delivery_id TEXT NOT NULL, subscription_id TEXT NOT NULL, number INTEGER NOT NULL,
    attempted_at TEXT NOT NULL, status_code INTEGER, success INTEGER NOT NULL, duration_ms INTEGER NOT NULL,
    response_body TEXT NOT NULL, error TEXT)`,
  'CREATE INDEX IF NOT EXISTS attempts_delivery ON attempts(delivery_id, number)',
  'CREATE INDEX IF NOT EXISTS attempts_sub ON attempts(subscription_id)',
]

type Row = SqliteRow
const s = text
const sOrNull = textOrNull
const nOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v))

function toSubscription(r: Row): SubscriptionRecord {
  return {
    _id: s(r.id),
    organizationId: s(r.organization_id),
    url: s(r.url),
    events: JSON.parse(s(r.events)) as string[],
    active: r.active === 1,
    secret: s(r.secret),
    previousSecret: sOrNull(r.previous_secret),
    previousSecretExpiresAt: sOrNull(r.previous_secret_expires_at),
    createdAt: s(r.created_at),
    updatedAt: s(r.updated_at),
    disabledAt: sOrNull(r.disabled_at),
    disabledReason: sOrNull(r.disabled_reason),
  }
}

function toDelivery(r: Row): DeliveryRecord {
  return {
    _id: s(r.id),
    organizationId: s(r.organization_id),
    subscriptionId: s(r.subscription_id),
    eventId: s(r.event_id),
    eventType: s(r.event_type),
    body: s(r.body),
    status: s(r.status) as DeliveryStatus,
    attemptCount: Number(r.attempt_count),
    roundStart: Number(r.round_start),
    nextAttemptAt: sOrNull(r.next_attempt_at),
    leaseToken: sOrNull(r.lease_token),
    leaseUntil: sOrNull(r.lease_until),
    lastStatusCode: nOrNull(r.last_status_code),
    lastError: sOrNull(r.last_error),
    createdAt: s(r.created_at),
    updatedAt: s(r.updated_at),
    deliveredAt: sOrNull(r.delivered_at),
  }
}

function toAttempt(r: Row): AttemptRecord {
  return {
    _id: s(r.id),
    deliveryId: s(r.delivery_id),
    subscriptionId: s(r.subscription_id),
    number: Number(r.number),
    attemptedAt: s(r.attempted_at),
    statusCode: nOrNull(r.status_code),
    success: r.success === 1,
    durationMs: Number(r.duration_ms),
    responseBody: s(r.response_body),
    error: sOrNull(r.error),
  }
}

const COLUMNS: Record<keyof SubscriptionPatch, string> = {
  url: 'url',
  events: 'events',
  active: 'active',
  disabledAt: 'disabled_at',
  disabledReason: 'disabled_reason',
  updatedAt: 'updated_at',
}

/** SQLite implementation (node:sqlite). Every multi-row change runs in one IMMEDIATE transaction. */
export class SqliteWebhookStore implements WebhookStore {
  private readonly db: DatabaseSync
  private readonly outbox: AuditOutbox

  constructor(file: string) {
    this.db = openSqlite(file, SCHEMA)
    // Secret rotation (a previous secret that keeps signing for a while): stores written before it.
    addColumnIfMissing(this.db, 'subscriptions', 'previous_secret', 'TEXT')
    addColumnIfMissing(this.db, 'subscriptions', 'previous_secret_expires_at', 'TEXT')
    // Freed space is zeroed, so a secret replaced by its sealed form leaves no clear copy behind.
    this.db.exec('PRAGMA secure_delete = ON')
    this.outbox = sqliteAuditOutbox(() => this.db)
  }

  pendingAudit(limit: number): Promise<AuditEntry[]> {
    return this.outbox.pendingAudit(limit)
  }
  markAuditSent(ids: string[], at: string): Promise<void> {
    return this.outbox.markAuditSent(ids, at)
  }
  pruneAuditOutbox(before: string): Promise<number> {
    return this.outbox.pruneAuditOutbox(before)
  }

  private run(sql: string, ...params: SQLInputValue[]): number {
    return Number(this.db.prepare(sql).run(...params).changes)
  }

  async createSubscription(
    sub: SubscriptionRecord,
    audit: AuditEntry[] = [],
    maxPerOrganization = Number.POSITIVE_INFINITY,
  ): Promise<boolean> {
    // BEGIN IMMEDIATE serialises writers: the count sees every create before this one.
    return transaction(this.db, () => {
      const held = queryOne(
        this.db,
        'SELECT COUNT(*) AS n FROM subscriptions WHERE organization_id = ?',
        sub.organizationId,
      )
      if (Number(held?.n ?? 0) >= maxPerOrganization) return false
      this.insertSubscription(sub)
      insertAuditOutbox(this.db, audit)
      return true
    })
  }

  private insertSubscription(sub: SubscriptionRecord): void {
    this.run(
      `INSERT INTO subscriptions (id, organization_id, url, events, active, secret, previous_secret,
       previous_secret_expires_at, created_at, updated_at, disabled_at, disabled_reason)
       VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      sub._id,
      sub.organizationId,
      sub.url,
      JSON.stringify(sub.events),
      sub.active ? 1 : 0,
      sub.secret,
      sub.previousSecret ?? null,
      sub.previousSecretExpiresAt ?? null,
      sub.createdAt,
      sub.updatedAt,
      sub.disabledAt,
      sub.disabledReason,
    )
  }

  async getSubscription(organizationId: string, id: string): Promise<SubscriptionRecord | null> {
    const r = queryOne(
      this.db,
      'SELECT * FROM subscriptions WHERE id = ? AND organization_id = ?',
      id,
      organizationId,
    )
    return r ? toSubscription(r) : null
  }

  async getSubscriptionById(id: string): Promise<SubscriptionRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM subscriptions WHERE id = ?', id)
    return r ? toSubscription(r) : null
  }

  async listSubscriptions(organizationId: string): Promise<SubscriptionRecord[]> {
    return queryAll(
      this.db,
      'SELECT * FROM subscriptions WHERE organization_id = ? ORDER BY created_at, id',
      organizationId,
    ).map(toSubscription)
  }

  async countSubscriptions(organizationId: string): Promise<number> {
    return Number(
      queryOne(this.db, 'SELECT COUNT(*) AS n FROM subscriptions WHERE organization_id = ?', organizationId)
        ?.n ?? 0,
    )
  }

  async subscriptionsFor(organizationId: string, eventType: string): Promise<SubscriptionRecord[]> {
    return queryAll(
      this.db,
      `SELECT * FROM subscriptions WHERE organization_id = ? AND active = 1
       AND EXISTS (SELECT 1 FROM json_each(subscriptions.events) WHERE value = ?) ORDER BY created_at, id`,
      organizationId,
      eventType,
    ).map(toSubscription)
  }

  async updateSubscription(
    organizationId: string,
    id: string,
    patch: SubscriptionPatch,
    audit: AuditEntry[] = [],
    expected?: Pick<SubscriptionRecord, 'url' | 'active'>,
  ): Promise<SubscriptionRecord | null> {
    const sets: string[] = []
    const params: SQLInputValue[] = []
    for (const [key, value] of Object.entries(patch) as [keyof SubscriptionPatch, unknown][]) {
      if (value === undefined) continue
      sets.push(`${COLUMNS[key]} = ?`)
      if (key === 'events') params.push(JSON.stringify(value))
      else if (key === 'active') params.push(value ? 1 : 0)
      else params.push(value as SQLInputValue)
    }
    const unchanged = expected ? ' AND url = ? AND active = ?' : ''
    return this.updateAudited(
      id,
      `UPDATE subscriptions SET ${sets.join(', ')} WHERE id = ? AND organization_id = ?${unchanged}`,
      [...params, id, organizationId, ...(expected ? [expected.url, expected.active ? 1 : 0] : [])],
      audit,
    )
  }

  /**
   * One UPDATE of subscription `id` and its audit entries, in one transaction: the row after, or
   * null when none matched.
   */
  private updateAudited(
    id: string,
    sql: string,
    params: SQLInputValue[],
    audit: AuditEntry[],
  ): SubscriptionRecord | null {
    return transaction(this.db, () => {
      if (this.run(sql, ...params) === 0) return null
      insertAuditOutbox(this.db, audit)
      const r = queryOne(this.db, 'SELECT * FROM subscriptions WHERE id = ?', id)
      return r ? toSubscription(r) : null
    })
  }

  async rotateSecret(
    organizationId: string,
    id: string,
    expected: string,
    next: SecretRotation,
    audit: AuditEntry[] = [],
  ): Promise<SubscriptionRecord | null> {
    const rotated = this.updateAudited(
      id,
      `UPDATE subscriptions SET secret = ?, previous_secret = ?, previous_secret_expires_at = ?, updated_at = ?
       WHERE id = ? AND organization_id = ? AND secret = ?`,
      [
        next.secret,
        next.previousSecret,
        next.previousSecretExpiresAt,
        next.updatedAt,
        id,
        organizationId,
        expected,
      ],
      audit,
    )
    // A secret dropped at once (a leaked one) leaves no copy in the WAL either.
    if (rotated && next.previousSecret === null) this.db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
    return rotated
  }

  async dropExpiredPreviousSecrets(now: string): Promise<number> {
    const dropped = Number(
      this.db
        .prepare(
          `UPDATE subscriptions SET previous_secret = NULL, previous_secret_expires_at = NULL
           WHERE previous_secret IS NOT NULL AND previous_secret_expires_at <= ?`,
        )
        .run(now).changes,
    )
    // As for a secret dropped at once: no copy left in the WAL either.
    if (dropped > 0) this.db.exec('PRAGMA wal_checkpoint(TRUNCATE)')
    return dropped
  }

  async deleteSubscription(organizationId: string, id: string, audit: AuditEntry[] = []): Promise<boolean> {
    return transaction(this.db, () => {
      const deleted = this.run(
        'DELETE FROM subscriptions WHERE id = ? AND organization_id = ?',
        id,
        organizationId,
      )
      if (deleted === 0) return false
      this.run('DELETE FROM attempts WHERE subscription_id = ?', id)
      this.run('DELETE FROM deliveries WHERE subscription_id = ?', id)
      insertAuditOutbox(this.db, audit)
      return true
    })
  }

  async createDeliveries(deliveries: DeliveryRecord[]): Promise<number> {
    if (deliveries.length === 0) return 0
    const insert = this.db.prepare(
      `INSERT INTO deliveries (id, organization_id, subscription_id, event_id, event_type, body, status,
       attempt_count, round_start, next_attempt_at, lease_token, lease_until, last_status_code, last_error,
       created_at, updated_at, delivered_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)
       ON CONFLICT (event_id, subscription_id) DO NOTHING`,
    )
    return transaction(this.db, () => {
      let inserted = 0
      for (const d of deliveries) {
        inserted += Number(
          insert.run(
            d._id,
            d.organizationId,
            d.subscriptionId,
            d.eventId,
            d.eventType,
            d.body,
            d.status,
            d.attemptCount,
            d.roundStart,
            d.nextAttemptAt,
            d.leaseToken,
            d.leaseUntil,
            d.lastStatusCode,
            d.lastError,
            d.createdAt,
            d.updatedAt,
            d.deliveredAt,
          ).changes,
        )
      }
      return inserted
    })
  }

  async getDelivery(
    organizationId: string,
    subscriptionId: string,
    id: string,
  ): Promise<DeliveryRecord | null> {
    const r = queryOne(
      this.db,
      'SELECT * FROM deliveries WHERE id = ? AND organization_id = ? AND subscription_id = ?',
      id,
      organizationId,
      subscriptionId,
    )
    return r ? toDelivery(r) : null
  }

  async listDeliveries(
    organizationId: string,
    subscriptionId: string,
    status: DeliveryStatus | undefined,
    page: Page,
  ): Promise<{ deliveries: DeliveryRecord[]; total: number }> {
    const where = ['organization_id = ?', 'subscription_id = ?']
    const params: SQLInputValue[] = [organizationId, subscriptionId]
    if (status) {
      where.push('status = ?')
      params.push(status)
    }
    const { rows, total } = queryPage(this.db, 'deliveries', where, params, page)
    return { deliveries: rows.map(toDelivery), total }
  }

  async listAttempts(deliveryIds: string[]): Promise<AttemptRecord[]> {
    if (deliveryIds.length === 0) return []
    return queryAll(
      this.db,
      `SELECT * FROM attempts WHERE delivery_id IN (${deliveryIds.map(() => '?').join(', ')})
       ORDER BY delivery_id, number, attempted_at`,
      ...deliveryIds,
    ).map(toAttempt)
  }

  async claimDue(
    now: string,
    limit: number,
    token: string,
    leaseUntil: string,
    perOrganization?: OrganizationShare,
  ): Promise<DeliveryRecord[]> {
    return transaction(this.db, () => {
      const ids: string[] = []
      const share = organizationShare(perOrganization)
      // Oldest due first; an organization at its share is left out of the next look, so each
      // look takes at least one delivery or fills one more organization (a bounded loop).
      while (ids.length < limit) {
        const full = share.full()
        const marks = full.map(() => '?').join(', ')
        const rows = queryAll(
          this.db,
          `SELECT id, organization_id FROM deliveries WHERE status = 'PENDING' AND next_attempt_at <= ?
           AND (lease_until IS NULL OR lease_until <= ?)${full.length > 0 ? ` AND organization_id NOT IN (${marks})` : ''}
           ${ids.length > 0 ? `AND id NOT IN (${ids.map(() => '?').join(', ')})` : ''}
           ORDER BY next_attempt_at, id LIMIT ?`,
          now,
          now,
          ...full,
          ...ids,
          limit - ids.length,
        )
        if (rows.length === 0) break
        for (const r of rows) if (ids.length < limit && share.take(s(r.organization_id))) ids.push(s(r.id))
        if (!perOrganization) break
      }
      if (ids.length === 0) return []
      const marks = ids.map(() => '?').join(', ')
      this.run(
        `UPDATE deliveries SET lease_token = ?, lease_until = ? WHERE id IN (${marks})`,
        token,
        leaseUntil,
        ...ids,
      )
      return queryAll(
        this.db,
        `SELECT * FROM deliveries WHERE id IN (${marks}) ORDER BY next_attempt_at, id`,
        ...ids,
      ).map(toDelivery)
    })
  }

  async nextDueAt(): Promise<string | null> {
    const r = queryOne(
      this.db,
      "SELECT MIN(next_attempt_at) AS at FROM deliveries WHERE status = 'PENDING' AND next_attempt_at IS NOT NULL",
    )
    return sOrNull(r?.at)
  }

  async recordAttempt(
    deliveryId: string,
    token: string,
    attempt: AttemptRecord | null,
    o: DeliveryOutcome,
  ): Promise<boolean> {
    return transaction(this.db, () => {
      if (attempt) {
        this.run(
          `INSERT INTO attempts (id, delivery_id, subscription_id, number, attempted_at, status_code, success,
           duration_ms, response_body, error) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          attempt._id,
          attempt.deliveryId,
          attempt.subscriptionId,
          attempt.number,
          attempt.attemptedAt,
          attempt.statusCode,
          attempt.success ? 1 : 0,
          attempt.durationMs,
          attempt.responseBody,
          attempt.error,
        )
      }
      const changed = this.run(
        `UPDATE deliveries SET status = ?, attempt_count = ?, next_attempt_at = ?, last_status_code = ?,
         last_error = ?, delivered_at = ?, updated_at = ?, lease_token = NULL, lease_until = NULL
         WHERE id = ? AND lease_token = ?`,
        o.status,
        o.attemptCount,
        o.nextAttemptAt,
        o.lastStatusCode,
        o.lastError,
        o.deliveredAt,
        o.updatedAt,
        deliveryId,
        token,
      )
      return changed === 1
    })
  }

  async requeueDelivery(
    organizationId: string,
    subscriptionId: string,
    id: string,
    now: string,
  ): Promise<DeliveryRecord | 'leased' | null> {
    return transaction(this.db, () => {
      const r = queryOne(
        this.db,
        'SELECT * FROM deliveries WHERE id = ? AND organization_id = ? AND subscription_id = ?',
        id,
        organizationId,
        subscriptionId,
      )
      if (!r) return null
      const d = toDelivery(r)
      if (d.leaseUntil !== null && d.leaseUntil > now) return 'leased'
      this.run(
        `UPDATE deliveries SET status = 'PENDING', round_start = attempt_count, next_attempt_at = ?,
         lease_token = NULL, lease_until = NULL, updated_at = ? WHERE id = ?`,
        now,
        now,
        id,
      )
      const after = queryOne(this.db, 'SELECT * FROM deliveries WHERE id = ?', id)
      return after ? toDelivery(after) : null
    })
  }

  async failPending(subscriptionId: string, reason: string, now: string): Promise<number> {
    return this.run(
      `UPDATE deliveries SET status = 'FAILED', next_attempt_at = NULL, last_error = ?, updated_at = ?
       WHERE subscription_id = ? AND status = 'PENDING' AND (lease_until IS NULL OR lease_until <= ?)`,
      reason,
      now,
      subscriptionId,
      now,
    )
  }

  async resealSecrets(reseal: (id: string, stored: string) => string | null): Promise<number> {
    return resealColumns(this.db, 'subscriptions', 'secret', 'previous_secret', reseal)
  }

  async check(): Promise<void> {
    queryOne(this.db, 'SELECT 1 AS ok')
  }

  async close(): Promise<void> {
    closeSqlite(this.db)
  }
}
