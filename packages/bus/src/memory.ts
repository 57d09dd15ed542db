import { EventEmitter } from 'node:events'
import type { BroadcastHandler, DurableHandler, EventBus } from './bus.ts'

interface Stored {
  subject: string
  data: unknown
  msgId: string
  headers?: Record<string, string>
  /** Consumers of its subject that have not acknowledged it yet. */
  unacked: number
}

interface Consumer {
  subject: string
  handler: DurableHandler
  queue: Array<{ message: Stored; attempt: number }>
  running: boolean
}

export interface MemoryBusOptions {
  /**
   * From the bus's creation, how long every message is kept for consumers that have not started
   * yet (in the embedded default, prompts' outbox relay and identity's audit relay publish before
   * webhooks and prompts consume). Default 5 minutes.
   */
  startupGraceMs?: number
  /** Messages kept at most (the oldest go first, as JetStream's max_msgs). Default 10,000. */
  maxMessages?: number
  /** How long a message id is remembered as published (JetStream's duplicate window). Default 1 hour. */
  duplicateWindowMs?: number
  /** Message ids remembered at most, the oldest forgotten first. Default 20,000. */
  maxDuplicateIds?: number
}

const STARTUP_GRACE_MS = 5 * 60_000
const MAX_MESSAGES = 10_000
const DUPLICATE_WINDOW_MS = 60 * 60_000
const MAX_DUPLICATE_IDS = 20_000

/**
 * In-process bus for the embedded default, where every service runs in one process.
 * Keeps JetStream's promises that matter here: a message id is stored once within the duplicate
 * window, each durable consumer gets every message until its handler succeeds (retried with a
 * delay), and a consumer that starts within the start-up grace gets the messages published
 * before it. Memory stays bounded for the process's life: once the grace is over, a message is
 * kept only until every consumer of its subject has acknowledged it (JetStream's interest
 * retention), and never more than `maxMessages` of them; message ids are remembered for the
 * duplicate window, `maxDuplicateIds` at most.
 */
export class MemoryBus implements EventBus {
  readonly kind = 'memory'
  private readonly emitter = new EventEmitter()
  /** Message key → when it was published (ms), oldest first. */
  private readonly seen = new Map<string, number>()
  /** Stored messages, oldest first (a Set: an acknowledged one leaves from anywhere in O(1)). */
  private readonly log = new Set<Stored>()
  private readonly consumers = new Map<string, Consumer>()
  private closed = false
  private readonly timers = new Set<NodeJS.Timeout>()

  private readonly retryDelayMs: number
  private readonly graceEndsAt: number
  private graceSwept = false
  private readonly maxMessages: number
  private readonly duplicateWindowMs: number
  private readonly maxDuplicateIds: number

  constructor(retryDelayMs = 1_000, options: MemoryBusOptions = {}) {
    this.retryDelayMs = retryDelayMs
    this.graceEndsAt = Date.now() + (options.startupGraceMs ?? STARTUP_GRACE_MS)
    this.maxMessages = options.maxMessages ?? MAX_MESSAGES
    this.duplicateWindowMs = options.duplicateWindowMs ?? DUPLICATE_WINDOW_MS
    this.maxDuplicateIds = options.maxDuplicateIds ?? MAX_DUPLICATE_IDS
    this.emitter.setMaxListeners(0)
  }

  /** Messages kept now, and message ids remembered now (tests of the bounds). */
  get sizes(): { messages: number; duplicateIds: number } {
    return { messages: this.log.size, duplicateIds: this.seen.size }
  }

  async publishDurable(
    subject: string,
    data: unknown,
    msgId: string,
    headers?: Record<string, string>,
  ): Promise<void> {
    if (this.closed) throw new Error('bus is closed')
    const now = Date.now()
    this.forgetOldIds(now)
    const key = `${subject}\u0000${msgId}`
    if (this.seen.has(key)) return
    this.seen.set(key, now)
    const consumers = [...this.consumers.values()].filter((c) => c.subject === subject)
    const message: Stored = {
      subject,
      data: structuredClone(data),
      msgId,
      ...(headers ? { headers: { ...headers } } : {}),
      unacked: consumers.length,
    }
    this.store(message, now)
    for (const consumer of consumers) this.enqueue(consumer, message, 1)
  }

  async consume(subject: string, durable: string, handler: DurableHandler): Promise<void> {
    if (this.consumers.has(durable)) throw new Error(`consumer ${durable} already exists`)
    const consumer: Consumer = { subject, handler, queue: [], running: false }
    this.consumers.set(durable, consumer)
    // A new durable consumer starts from the beginning of what is kept, as JetStream's does.
    for (const m of this.log) {
      if (m.subject !== subject) continue
      m.unacked++
      this.enqueue(consumer, m, 1)
    }
  }

  private forgetOldIds(now: number): void {
    for (const [key, at] of this.seen) {
      if (at > now - this.duplicateWindowMs && this.seen.size < this.maxDuplicateIds) break
      this.seen.delete(key)
    }
  }

  private store(message: Stored, now: number): void {
    if (now >= this.graceEndsAt) {
      if (!this.graceSwept) {
        this.graceSwept = true
        for (const m of this.log) if (m.unacked <= 0) this.log.delete(m)
      }
      // No consumer of its subject yet: no one will ask for it.
      if (message.unacked === 0) return
    }
    this.log.add(message)
    for (const oldest of this.log) {
      if (this.log.size <= this.maxMessages) break
      this.log.delete(oldest)
    }
  }

  private acknowledged(message: Stored): void {
    message.unacked--
    if (message.unacked <= 0 && Date.now() >= this.graceEndsAt) this.log.delete(message)
  }

  private enqueue(consumer: Consumer, message: Stored, attempt: number): void {
    consumer.queue.push({ message, attempt })
    if (!consumer.running) void this.drain(consumer)
  }

  private async drain(consumer: Consumer): Promise<void> {
    consumer.running = true
    while (!this.closed && consumer.queue.length > 0) {
      const item = consumer.queue.shift()
      if (!item) break
      const { message } = item
      try {
        await consumer.handler(message.data, {
          msgId: message.msgId,
          attempt: item.attempt,
          ...(message.headers ? { headers: message.headers } : {}),
        })
      } catch {
        const timer = setTimeout(() => {
          this.timers.delete(timer)
          if (!this.closed) this.enqueue(consumer, message, item.attempt + 1)
        }, this.retryDelayMs)
        this.timers.add(timer)
        continue
      }
      this.acknowledged(message)
    }
    consumer.running = false
  }

  broadcast(subject: string, data: unknown): void {
    if (!this.closed) this.emitter.emit(subject, data)
  }

  connected(): boolean {
    return !this.closed
  }

  onBroadcast(subject: string, handler: BroadcastHandler): void {
    this.emitter.on(subject, handler)
  }

  async check(): Promise<void> {
    if (this.closed) throw new Error('bus is closed')
  }

  async close(): Promise<void> {
    this.closed = true
    for (const t of this.timers) clearTimeout(t)
    this.timers.clear()
    this.emitter.removeAllListeners()
  }
}
