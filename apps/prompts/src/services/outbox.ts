import type { EventBus } from '@pm/bus'
import type { FastifyBaseLogger } from 'fastify'
import { backgroundRunner } from '@pm/kit'
import { AUDIT_SUBJECT } from '../domain/audit.ts'
import type { PromptStore } from '../store/types.ts'

export interface OutboxRelayOptions {
  /** How often to look for events not yet sent (a publish also wakes the relay). */
  pollMs: number
  /**
   * How long an event waits after it is written before it is sent. 0 in production; the
   * crash test sets it so that the process can be killed between the write and the send.
   */
  delayMs: number
  /** Sent events are forgotten after this long (well past JetStream's one-hour duplicate window). */
  retainMs: number
  /** Told of each event handed to the bus (metrics). */
  onSent?: () => void
  /** Audit entries older than this are deleted (AUDIT_RETENTION_DAYS); none: kept. */
  auditRetainMs?: number
}

const BATCH = 100
const PRUNE_EVERY_MS = 60 * 60 * 1000

/**
 * Sends the events written by publish (in the same transaction as the version) to the bus.
 * The message id is the version id, so a relay that crashed after sending but before
 * marking the row sent republishes a message JetStream recognises as a duplicate; a relay
 * that crashed before sending finds the row unsent at its next start.
 */
export class OutboxRelay {
  private readonly store: PromptStore
  private readonly bus: EventBus
  private readonly log: FastifyBaseLogger
  private readonly opts: OutboxRelayOptions
  private timer: NodeJS.Timeout | undefined
  private running: Promise<number | undefined> | undefined
  private again = false
  private stopped = true
  private lastPrune = 0
  private readonly background = backgroundRunner()

  constructor(store: PromptStore, bus: EventBus, log: FastifyBaseLogger, opts: OutboxRelayOptions) {
    this.store = store
    this.bus = bus
    this.log = log
    this.opts = opts
  }

  start(): void {
    this.stopped = false
    this.kick()
  }

  /** Runs a pass now (after a publish); a pass already running runs once more. */
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
    void this.running.then((wakeInMs) => {
      this.running = undefined
      if (this.stopped) return
      if (this.again) {
        this.again = false
        this.kickHere()
      } else {
        this.timer = setTimeout(
          () => this.kickHere(),
          Math.min(wakeInMs ?? this.opts.pollMs, this.opts.pollMs),
        )
      }
    })
  }

  /** Sends what is due; returns how soon an event held back by `delayMs` becomes due. */
  private async pass(): Promise<number | undefined> {
    try {
      for (;;) {
        const batch = await this.store.pendingOutbox(BATCH)
        for (const row of batch) {
          if (this.stopped) return undefined
          const dueIn = Date.parse(row.createdAt) + this.opts.delayMs - Date.now()
          // Rows come oldest first: once one is not due, none after it is.
          if (dueIn > 0) return dueIn
          // An audit entry goes into the audit log, not to the bus (domain/audit.ts).
          if (row.subject === AUDIT_SUBJECT) {
            await this.store.recordAudit(row, new Date().toISOString())
            continue
          }
          await this.bus.publishDurable(row.subject, row.payload, row.msgId, row.traceHeaders ?? {})
          await this.store.markOutboxSent(row._id, new Date().toISOString())
          this.opts.onSent?.()
        }
        if (batch.length < BATCH) break
      }
      if (Date.now() - this.lastPrune > PRUNE_EVERY_MS) {
        this.lastPrune = Date.now()
        await this.store.pruneOutbox(new Date(Date.now() - this.opts.retainMs).toISOString())
        if (this.opts.auditRetainMs !== undefined)
          await this.store.pruneAudit(new Date(Date.now() - this.opts.auditRetainMs).toISOString())
      }
    } catch (err) {
      this.log.warn({ err }, 'outbox relay pass failed; will retry')
    }
    return undefined
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }
}
