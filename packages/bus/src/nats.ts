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
  /** A message not taken: a broadcast that was not JSON or whose handler threw, a durable one not JSON (default: a warn line on stderr). */
  onUntaken?: (what: string, subject: string, error: unknown) => void
}

/** One JSON line at pino's warn level, as the services log. */
function warnOnStderr(what: string, subject: string, error: unknown): void {
  const err = error instanceof Error ? error.message : String(error)
  process.stderr.write(`${JSON.stringify({ level: 40, time: Date.now(), msg: what, subject, err })}\n`)
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
      // JetStream drops a duplicate id across the whole stream; the bus's contract (and the
      // in-process bus) is per subject: `experiment.completed` carried the id of its
      // `experiment.queued` and was dropped as its duplicate.
      msgID: `${subject}:${msgId}`,
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
          let data: unknown
          try {
            data = m.json()
          } catch (error) {
            // Not JSON: no delivery will ever make it so. Terminated (never redelivered) and said,
            // where a nak had it redelivered every second, silently, for the stream's week.
            ;(this.opts.onUntaken ?? warnOnStderr)('durable message not JSON, dropped', m.subject, error)
            m.term()
            return
          }
          try {
            const traceparent = m.headers?.get('traceparent')
            const tracestate = m.headers?.get('tracestate')
            const id = m.headers?.get('Nats-Msg-Id')
            await handler(data, {
              msgId: id
                ? id.startsWith(`${m.subject}:`)
                  ? id.slice(m.subject.length + 1)
                  : id
                : String(m.seq),
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
          if (err) return
          // A message that is not JSON, or that its handler cannot take, must not escape: thrown
          // here it ends nats.js's reading of the socket, for good (no cache invalidation, no key
          // revocation, readiness hanging on flush).
          try {
            handler(msg.json())
          } catch (error) {
            ;(this.opts.onUntaken ?? warnOnStderr)('broadcast not taken', subject, error)
          }
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
