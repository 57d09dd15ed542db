import { EventEmitter } from 'node:events'
import type { BroadcastHandler, DurableHandler, EventBus } from './bus.ts'

interface Consumer {
  subject: string
  handler: DurableHandler
  queue: Array<{ data: unknown; msgId: string; attempt: number; headers?: Record<string, string> }>
  running: boolean
}

/**
 * In-process bus for the embedded default, where every service runs in one process.
 * Keeps JetStream's promises that matter here: a message id is stored once, each durable
 * consumer gets every message until its handler succeeds (retried with a delay).
 */
export class MemoryBus implements EventBus {
  readonly kind = 'memory'
  private readonly emitter = new EventEmitter()
  private readonly seen = new Set<string>()
  private readonly log: Array<{
    subject: string
    data: unknown
    msgId: string
    headers?: Record<string, string>
  }> = []
  private readonly consumers = new Map<string, Consumer>()
  private closed = false
  private readonly timers = new Set<NodeJS.Timeout>()

  private readonly retryDelayMs: number

  constructor(retryDelayMs = 1_000) {
    this.retryDelayMs = retryDelayMs
    this.emitter.setMaxListeners(0)
  }

  async publishDurable(
    subject: string,
    data: unknown,
    msgId: string,
    headers?: Record<string, string>,
  ): Promise<void> {
    if (this.closed) throw new Error('bus is closed')
    const key = `${subject}\u0000${msgId}`
    if (this.seen.has(key)) return
    this.seen.add(key)
    const message = {
      subject,
      data: structuredClone(data),
      msgId,
      ...(headers ? { headers: { ...headers } } : {}),
    }
    this.log.push(message)
    for (const consumer of this.consumers.values()) {
      if (consumer.subject === subject) this.enqueue(consumer, message.data, msgId, 1, message.headers)
    }
  }

  async consume(subject: string, durable: string, handler: DurableHandler): Promise<void> {
    if (this.consumers.has(durable)) throw new Error(`consumer ${durable} already exists`)
    const consumer: Consumer = { subject, handler, queue: [], running: false }
    this.consumers.set(durable, consumer)
    // A new durable consumer starts from the beginning of the stream, as JetStream's does.
    for (const m of this.log) if (m.subject === subject) this.enqueue(consumer, m.data, m.msgId, 1, m.headers)
  }

  private enqueue(
    consumer: Consumer,
    data: unknown,
    msgId: string,
    attempt: number,
    headers?: Record<string, string>,
  ): void {
    consumer.queue.push({ data, msgId, attempt, ...(headers ? { headers } : {}) })
    if (!consumer.running) void this.drain(consumer)
  }

  private async drain(consumer: Consumer): Promise<void> {
    consumer.running = true
    while (!this.closed && consumer.queue.length > 0) {
      const item = consumer.queue.shift()
      if (!item) break
      try {
        await consumer.handler(item.data, {
          msgId: item.msgId,
          attempt: item.attempt,
          ...(item.headers ? { headers: item.headers } : {}),
        })
      } catch {
        const timer = setTimeout(() => {
          this.timers.delete(timer)
          if (!this.closed) this.enqueue(consumer, item.data, item.msgId, item.attempt + 1, item.headers)
        }, this.retryDelayMs)
        this.timers.add(timer)
      }
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
