import type { EventBus } from '@pm/bus'
import type { FastifyBaseLogger } from 'fastify'
import type { PromptStore } from '../store/types.ts'

/**
 * Sends the events written by publish (in the same transaction as the version) to the bus.
 * The message id is the version id, so a relay that crashed after sending but before
 * marking the row sent republishes a message JetStream recognises as a duplicate.
 */
export class OutboxRelay {
  private readonly store: PromptStore
  private readonly bus: EventBus
  private readonly log: FastifyBaseLogger
  private readonly pollMs: number
  private timer: NodeJS.Timeout | undefined
  private running: Promise<void> | undefined
  private again = false
  private stopped = true

  constructor(store: PromptStore, bus: EventBus, log: FastifyBaseLogger, pollMs: number) {
    this.store = store
    this.bus = bus
    this.log = log
    this.pollMs = pollMs
  }

  start(): void {
    this.stopped = false
    this.kick()
  }

  /** Runs a pass now (after a publish); a pass already running runs once more. */
  kick(): void {
    if (this.stopped) return
    if (this.running) {
      this.again = true
      return
    }
    clearTimeout(this.timer)
    this.running = this.pass().finally(() => {
      this.running = undefined
      if (this.stopped) return
      if (this.again) {
        this.again = false
        this.kick()
      } else {
        this.timer = setTimeout(() => this.kick(), this.pollMs)
      }
    })
  }

  private async pass(): Promise<void> {
    try {
      for (;;) {
        const batch = await this.store.pendingOutbox(100)
        for (const row of batch) {
          if (this.stopped) return
          await this.bus.publishDurable(row.subject, row.payload, row.msgId)
          await this.store.markOutboxSent(row._id, new Date().toISOString())
        }
        if (batch.length < 100) return
      }
    } catch (err) {
      this.log.warn({ err }, 'outbox relay pass failed; will retry')
    }
  }

  async stop(): Promise<void> {
    this.stopped = true
    clearTimeout(this.timer)
    await this.running
  }
}
