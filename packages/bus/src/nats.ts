import {
  AckPolicy,
  type ConsumerMessages,
  DeliverPolicy,
  jetstream,
  jetstreamManager,
} from '@nats-io/jetstream'
import {
  connect,
  headers as natsHeaders,
  type NatsConnection,
  type Subscription,
} from '@nats-io/transport-node'
import type { BroadcastHandler, DurableHandler, EventBus } from './bus.ts'

export interface NatsBusOptions {
  url: string
  /** JetStream stream holding the durable subjects. */
  stream: string
  /** Subjects the stream captures, e.g. ['pm.events.>']. */
  streamSubjects: string[]
  /** Prefix for durable consumer names and subjects (tests isolate themselves with it). */
  name?: string
  /** Delay before a failed message is delivered again. */
  retryDelayMs?: number
}

const DUPLICATE_WINDOW_NS = 60 * 60 * 1_000_000_000 // one hour: a restarted outbox relay republishes within it
const MAX_AGE_NS = 7 * 24 * 60 * 60 * 1_000_000_000 // consumers that were down a week have lost their events

/** JetStream for durable messages, core NATS for broadcasts. */
export class NatsBus implements EventBus {
  readonly kind = 'nats'
  private readonly running: ConsumerMessages[] = []
  private readonly subscriptions: Subscription[] = []
  private readonly inFlight = new Set<Promise<void>>()

  private readonly nc: NatsConnection
  private readonly opts: NatsBusOptions
  private up = true

  private constructor(nc: NatsConnection, opts: NatsBusOptions) {
    this.nc = nc
    this.opts = opts
    void (async () => {
      for await (const s of nc.status()) {
        if (s.type === 'disconnect') this.up = false
        else if (s.type === 'reconnect') this.up = true
      }
    })()
  }

  connected(): boolean {
    return this.up && !this.nc.isClosed()
  }

  static async connect(opts: NatsBusOptions): Promise<NatsBus> {
    const nc = await connect({ servers: opts.url, name: opts.name, maxReconnectAttempts: -1 })
    const jsm = await jetstreamManager(nc)
    const config = {
      name: opts.stream,
      subjects: opts.streamSubjects,
      duplicate_window: DUPLICATE_WINDOW_NS,
      max_age: MAX_AGE_NS,
    }
    try {
      await jsm.streams.info(opts.stream)
      await jsm.streams.update(opts.stream, config)
    } catch {
      await jsm.streams.add(config)
    }
    return new NatsBus(nc, opts)
  }

  async publishDurable(
    subject: string,
    data: unknown,
    msgId: string,
    headers?: Record<string, string>,
  ): Promise<void> {
    let h: ReturnType<typeof natsHeaders> | undefined
    if (headers) {
      h = natsHeaders()
      for (const [key, value] of Object.entries(headers)) h.set(key, value)
    }
    await jetstream(this.nc).publish(subject, JSON.stringify(data), {
      msgID: msgId,
      ...(h ? { headers: h } : {}),
    })
  }

  async consume(subject: string, durable: string, handler: DurableHandler): Promise<void> {
    const jsm = await jetstreamManager(this.nc)
    await jsm.consumers.add(this.opts.stream, {
      durable_name: durable,
      ack_policy: AckPolicy.Explicit,
      deliver_policy: DeliverPolicy.All,
      filter_subject: subject,
      ack_wait: 30_000_000_000,
      max_ack_pending: 256,
    })
    const consumer = await jetstream(this.nc).consumers.get(this.opts.stream, durable)
    const messages = await consumer.consume()
    this.running.push(messages)
    const retryDelay = this.opts.retryDelayMs ?? 1_000
    void (async () => {
      for await (const m of messages) {
        const work = (async () => {
          try {
            const traceparent = m.headers?.get('traceparent')
            const tracestate = m.headers?.get('tracestate')
            await handler(m.json(), {
              msgId: m.headers?.get('Nats-Msg-Id') ?? String(m.seq),
              attempt: m.info.deliveryCount,
              ...(traceparent ? { headers: { traceparent, ...(tracestate ? { tracestate } : {}) } } : {}),
            })
            m.ack()
          } catch {
            m.nak(retryDelay)
          }
        })()
        this.inFlight.add(work)
        await work
        this.inFlight.delete(work)
      }
    })()
  }

  broadcast(subject: string, data: unknown): void {
    if (!this.nc.isClosed()) this.nc.publish(subject, JSON.stringify(data))
  }

  onBroadcast(subject: string, handler: BroadcastHandler): void {
    this.subscriptions.push(
      this.nc.subscribe(subject, {
        callback: (err, msg) => {
          if (!err) handler(msg.json())
        },
      }),
    )
  }

  async check(): Promise<void> {
    if (this.nc.isClosed()) throw new Error('nats connection closed')
    await this.nc.flush()
  }

  async close(): Promise<void> {
    for (const m of this.running) await m.close()
    await Promise.all(this.inFlight)
    for (const s of this.subscriptions) s.unsubscribe()
    await this.nc.drain()
  }
}
