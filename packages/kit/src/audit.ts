import type { DatabaseSync } from 'node:sqlite'
import { type AuditAction, type AuditActor, type AuditEntry, isAuditAction, SUBJECTS } from '@pm/contracts'
import type { FastifyRequest } from 'fastify'
import { backgroundRunner } from './contextFrame.ts'
import { newId } from './ids.ts'

/**
 * The audit log (DESIGN section 15): one entry per committed change, written in the change's
 * own transaction. The prompts service keeps the log; identity, webhooks, runs and experiments
 * write their entries into an outbox of their own (`audit_outbox`) with the change, and an
 * AuditRelay publishes them
 * on the durable subject SUBJECTS.auditEntry (message id = entry id), which prompts stores
 * idempotently by entry id. docs/decisions.md, "Release safety". The outbox on MongoDB is
 * `MongoAuditOutbox` in mongo.ts (`@pm/kit/mongo`).
 */

/** Who made a change, from where, in which request. */
export interface AuditContext {
  actor: AuditActor
  requestId: string
  ip: string
}

/**
 * The request's part of an entry: the client's address as the gateway saw it (`x-pm-client-ip`;
 * a client cannot set it: the gateway strips `x-pm-*`) and the request id.
 */
export function requestOrigin(request: FastifyRequest): { requestId: string; ip: string } {
  const ip = request.headers['x-pm-client-ip']
  return { requestId: request.id, ip: typeof ip === 'string' ? ip : request.ip }
}

/**
 * Who makes this change, for its audit entry: the user or API key of the signed caller context,
 * named as the gateway named it (`actorName`: the user's display name or email, the key's name),
 * else by its id. Undefined for any other caller (anonymous, service): such a change has no actor.
 */
export function auditContextOf(request: FastifyRequest): AuditContext | undefined {
  const { caller } = request
  const id = caller.kind === 'apiKey' ? caller.apiKeyId : caller.userId
  if (!id || (caller.kind !== 'user' && caller.kind !== 'apiKey')) return undefined
  return { actor: { type: caller.kind, id, name: caller.actorName || id }, ...requestOrigin(request) }
}

/** Summaries are short: at most this many characters (they may quote user-chosen text). */
export const AUDIT_SUMMARY_MAX = 500

export function auditEntry(
  ctx: AuditContext,
  organizationId: string,
  action: AuditAction,
  resource: { type: string; id: string },
  summary: string,
  at = new Date().toISOString(),
): AuditEntry {
  return {
    id: newId(),
    at,
    organizationId,
    actor: ctx.actor,
    action,
    resource,
    requestId: ctx.requestId,
    ip: ctx.ip,
    summary: summary.slice(0, AUDIT_SUMMARY_MAX),
  }
}

const isString = (v: unknown): v is string => typeof v === 'string'
const ID = /^[0-9a-f]{24}$/

/** Whether a message off the bus is an audit entry (the ingesting side checks before it stores). */
export function isAuditEntry(data: unknown): data is AuditEntry {
  if (typeof data !== 'object' || data === null) return false
  const e = data as Record<string, unknown>
  const actor = e.actor as Record<string, unknown> | null | undefined
  const resource = e.resource as Record<string, unknown> | null | undefined
  return (
    isString(e.id) &&
    ID.test(e.id) &&
    isString(e.at) &&
    !Number.isNaN(Date.parse(e.at)) &&
    isString(e.organizationId) &&
    ID.test(e.organizationId) &&
    typeof actor === 'object' &&
    actor !== null &&
    (actor.type === 'user' || actor.type === 'apiKey') &&
    isString(actor.id) &&
    isString(actor.name) &&
    isAuditAction(e.action) &&
    typeof resource === 'object' &&
    resource !== null &&
    isString(resource.type) &&
    isString(resource.id) &&
    isString(e.requestId) &&
    isString(e.ip) &&
    isString(e.summary)
  )
}

/** A service's audit outbox: entries written with their change, waiting for the relay. */
export interface AuditOutbox {
  /** Entries not yet published, oldest first. */
  pendingAudit(limit: number): Promise<AuditEntry[]>
  markAuditSent(ids: string[], at: string): Promise<void>
  /** Forgets entries published before `before`; returns how many. */
  pruneAuditOutbox(before: string): Promise<number>
}

// ---------------------------------------------------------------------------------------------
// SQLite: a table beside the service's own, written inside the change's IMMEDIATE transaction.

export const AUDIT_OUTBOX_SCHEMA = [
  `CREATE TABLE IF NOT EXISTS audit_outbox (
    id TEXT PRIMARY KEY, payload TEXT NOT NULL, created_at TEXT NOT NULL, sent_at TEXT)`,
  'CREATE INDEX IF NOT EXISTS audit_outbox_pending ON audit_outbox(sent_at, created_at, id)',
]

/** Inserts entries; call it inside the transaction of the change they record. */
export function insertAuditOutbox(db: DatabaseSync, entries: readonly AuditEntry[]): void {
  if (entries.length === 0) return
  const insert = db.prepare(
    'INSERT INTO audit_outbox (id, payload, created_at, sent_at) VALUES (?, ?, ?, NULL)',
  )
  for (const e of entries) insert.run(e.id, JSON.stringify(e), e.at)
}

/** The AuditOutbox of a SQLite store whose schema includes AUDIT_OUTBOX_SCHEMA. */
export function sqliteAuditOutbox(db: () => DatabaseSync): AuditOutbox {
  return {
    async pendingAudit(limit) {
      const rows = db()
        .prepare('SELECT payload FROM audit_outbox WHERE sent_at IS NULL ORDER BY created_at, id LIMIT ?')
        .all(limit) as { payload: string }[]
      return rows.map((r) => JSON.parse(r.payload) as AuditEntry)
    },
    async markAuditSent(ids, at) {
      if (ids.length === 0) return
      db()
        .prepare(`UPDATE audit_outbox SET sent_at = ? WHERE id IN (${ids.map(() => '?').join(', ')})`)
        .run(at, ...ids)
    },
    async pruneAuditOutbox(before) {
      return Number(
        db().prepare('DELETE FROM audit_outbox WHERE sent_at IS NOT NULL AND sent_at < ?').run(before)
          .changes,
      )
    },
  }
}

// ---------------------------------------------------------------------------------------------
// The relay.

export interface AuditRelayOptions {
  /** Publishes one entry durably (JetStream: resolves once stored or recognised as a duplicate). */
  publish(subject: string, entry: AuditEntry, msgId: string): Promise<void>
  subject: string
  log: { warn(obj: object, msg: string): void }
  /** How often to look for entries not yet sent (a write also wakes the relay: `kick`). */
  pollMs?: number
  /** Sent entries are forgotten after this long (past JetStream's one-hour duplicate window). */
  retainMs?: number
  /**
   * Holds each entry back this long after its change before publishing it (default 0;
   * `AUDIT_RELAY_DELAY_MS`, as prompts' `OUTBOX_RELAY_DELAY_MS`: the crash test uses it to stop a
   * process while its entries are still in the outbox).
   */
  delayMs?: number
}

/**
 * The relay each service runs (DESIGN section 15): its outbox to the audit subject on the bus,
 * with the AUDIT_RELAY_* settings (settings.ts, `auditRelaySettings`).
 */
export function busAuditRelay(
  outbox: AuditOutbox,
  bus: { publishDurable(subject: string, data: unknown, msgId: string): Promise<unknown> },
  log: AuditRelayOptions['log'],
  settings: { AUDIT_RELAY_POLL_MS: number; AUDIT_RELAY_DELAY_MS: number },
): AuditRelay {
  return new AuditRelay(outbox, {
    publish: async (subject, entry, msgId) => {
      await bus.publishDurable(subject, entry, msgId)
    },
    subject: SUBJECTS.auditEntry,
    log,
    pollMs: settings.AUDIT_RELAY_POLL_MS,
    delayMs: settings.AUDIT_RELAY_DELAY_MS,
  })
}

const BATCH = 100
const PRUNE_EVERY_MS = 60 * 60 * 1000

/**
 * Publishes a service's audit outbox. An entry is marked sent after the bus has stored it, so a
 * crash before the publish leaves it unsent for the next start, and a crash after it republishes
 * a message id the bus drops as a duplicate (and prompts' insert ignores a known id).
 */
export class AuditRelay {
  private readonly outbox: AuditOutbox
  private readonly opts: Required<AuditRelayOptions>
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private again = false
  private stopped = true
  private lastPrune = 0
  /** When the oldest entry held back by `delayMs` falls due (ms since the epoch), if any. */
  private heldUntil: number | undefined
  private readonly background = backgroundRunner()

  constructor(outbox: AuditOutbox, opts: AuditRelayOptions) {
    this.outbox = outbox
    this.opts = { pollMs: 1_000, retainMs: 24 * 60 * 60 * 1000, delayMs: 0, ...opts }
  }

  start(): void {
    this.stopped = false
    this.kick()
  }

  /** Runs a pass now (after a write); a pass already running runs once more. */
  kick(): void {
    // Outside the caller's context: a request that kicks the relay does not carry its passes.
    this.background(() => this.kickHere())
  }

  private kickHere(): void {
    if (this.stopped) return
    if (this.running) {
      this.again = true
      return
    }
    clearTimeout(this.timer)
    this.running = this.pass()
    void this.running.then(() => {
      this.running = undefined
      if (this.stopped) return
      if (this.again) {
        this.again = false
        this.kickHere()
      } else {
        const due = this.heldUntil === undefined ? this.opts.pollMs : this.heldUntil - Date.now()
        this.timer = setTimeout(() => this.kickHere(), Math.max(0, Math.min(this.opts.pollMs, due)))
      }
    })
  }

  private async pass(): Promise<void> {
    try {
      this.heldUntil = undefined
      for (;;) {
        const batch = await this.outbox.pendingAudit(BATCH)
        const sent: string[] = []
        try {
          for (const entry of batch) {
            if (this.stopped) break
            // Oldest first: the first entry not yet due holds back the rest of the batch too.
            const due = Date.parse(entry.at) + this.opts.delayMs
            if (due > Date.now()) {
              this.heldUntil = due
              break
            }
            await this.opts.publish(this.opts.subject, entry, entry.id)
            sent.push(entry.id)
          }
        } finally {
          await this.outbox.markAuditSent(sent, new Date().toISOString())
        }
        if (this.stopped || this.heldUntil !== undefined || batch.length < BATCH) break
      }
      if (Date.now() - this.lastPrune > PRUNE_EVERY_MS) {
        this.lastPrune = Date.now()
        await this.outbox.pruneAuditOutbox(new Date(Date.now() - this.opts.retainMs).toISOString())
      }
    } catch (err) {
      this.opts.log.warn({ err }, 'audit relay pass failed; will retry')
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }
}
