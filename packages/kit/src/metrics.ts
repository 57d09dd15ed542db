import type { Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import type { FastifyInstance, FastifyRequest } from 'fastify'
import { Counter, collectDefaultMetrics, Gauge, Histogram, type Metric, Registry } from 'prom-client'

// Node's CommonJS `http`, not `import { createServer } from 'node:http'`: the ES module facade
// of `http` reads every export once, its lazy `WebSocket`, `CloseEvent` and `MessageEvent`
// among them, which compile all of the undici that Node bundles at every service's start (in
// a webhooks start 40 ms of CPU against 15 ms for the part still loaded without the facade).
// The same module object, without that.
const { createServer } = process.getBuiltinModule('node:http')

/** Runs before each scrape: reads a state (a backlog, a connection) into a gauge or counter. */
export type Collector = () => Promise<void> | void

/** The gateway's rate limiters (apps/gateway/src/limits.ts, keyGuard.ts), each a `limiter` label value. */
export const RATE_LIMITERS = ['login-ip', 'login-email', 'public-ip', 'api-key', 'bad-key-ip'] as const

const DURATION_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10]

/**
 * One process's metrics: a prom-client registry of its own (never the global one) with the
 * runtime's default metrics, and the project's metrics, each created on first use so that a
 * process only shows the ones it has. The embedded default passes one instance to every
 * service, so all of them are served from one registry (the `service` label tells them apart).
 * Nothing here is a module-level singleton: a process (or a test) makes as many as it wants.
 */
export class Metrics {
  readonly registry = new Registry()
  private readonly collectors = new Set<Collector>()
  private readonly made = new Map<string, Metric>()

  constructor(opts: { defaultMetrics?: boolean } = {}) {
    if (opts.defaultMetrics !== false) collectDefaultMetrics({ register: this.registry })
  }

  private once<T extends Metric>(name: string, make: (registers: Registry[]) => T): T {
    let metric = this.made.get(name)
    if (!metric) {
      metric = make([this.registry])
      this.made.set(name, metric)
    }
    return metric as T
  }

  /**
   * Creates the metrics a service reports, each of its known series at 0, so that a healthy
   * install has data for the alerts docs/operations.md recommends (a counter that appears only
   * at its first event leaves `rate(...)` and `absent(...)` with nothing to read). Called by
   * each service when it is built with metrics; the others stay absent from its registry.
   */
  declare(service: 'gateway' | 'prompts' | 'render' | 'webhooks'): void {
    if (service === 'gateway') {
      for (const limiter of RATE_LIMITERS) this.rateLimitRefusals.inc({ limiter }, 0)
      for (const result of ['hit', 'miss']) this.keyCache.inc({ result }, 0)
    } else if (service === 'render') {
      for (const result of ['hit', 'miss']) this.renderCache.inc({ result }, 0)
    } else if (service === 'prompts') {
      this.outboxSent.inc(0)
      this.outboxBacklog.set(0)
      this.outboxOldestAge.set(0)
    } else {
      for (const outcome of ['delivered', 'retry', 'failed']) this.webhookAttempts.inc({ outcome }, 0)
      for (const outcome of ['delivered', 'failed']) this.webhookDeliveries.zero({ outcome })
    }
  }

  /** Request duration by service, route template, method and status (one observe per request). */
  get httpDuration(): Histogram<'service' | 'route' | 'method' | 'status'> {
    return this.once(
      'pm_http_request_duration_seconds',
      (registers) =>
        new Histogram({
          name: 'pm_http_request_duration_seconds',
          help: 'HTTP request duration by route template, method and status',
          labelNames: ['service', 'route', 'method', 'status'],
          buckets: DURATION_BUCKETS,
          registers,
        }),
    )
  }

  /** Render's compiled-snapshot lookups: hit (served from memory) or miss (asked prompts). */
  get renderCache(): Counter<'result'> {
    return this.once(
      'pm_render_cache_lookups_total',
      (registers) =>
        new Counter({
          name: 'pm_render_cache_lookups_total',
          help: 'Render cache lookups by result (hit: answered from memory; miss: asked the prompts service)',
          labelNames: ['result'],
          registers,
        }),
    )
  }

  /** The gateway's API-key cache: hit, or miss (asked identity). */
  get keyCache(): Counter<'result'> {
    return this.once(
      'pm_gateway_key_cache_lookups_total',
      (registers) =>
        new Counter({
          name: 'pm_gateway_key_cache_lookups_total',
          help: 'API-key lookups at the gateway by result (hit: cached; miss: asked the identity service)',
          labelNames: ['result'],
          registers,
        }),
    )
  }

  get rateLimitRefusals(): Counter<'limiter'> {
    return this.once(
      'pm_rate_limit_refusals_total',
      (registers) =>
        new Counter({
          name: 'pm_rate_limit_refusals_total',
          help: 'Requests refused with 429 by limiter',
          labelNames: ['limiter'],
          registers,
        }),
    )
  }

  get outboxSent(): Counter {
    return this.once(
      'pm_outbox_events_sent_total',
      (registers) =>
        new Counter({
          name: 'pm_outbox_events_sent_total',
          help: 'Events the outbox relay handed to the bus',
          registers,
        }),
    )
  }

  get outboxBacklog(): Gauge {
    return this.once(
      'pm_outbox_backlog_events',
      (registers) =>
        new Gauge({ name: 'pm_outbox_backlog_events', help: 'Outbox events not yet sent', registers }),
    )
  }

  get outboxOldestAge(): Gauge {
    return this.once(
      'pm_outbox_oldest_unsent_age_seconds',
      (registers) =>
        new Gauge({
          name: 'pm_outbox_oldest_unsent_age_seconds',
          help: 'Age of the oldest outbox event not yet sent (0 when none)',
          registers,
        }),
    )
  }

  /**
   * The outbox gauges from a backlog reading: its count, and the age of its oldest event, 0
   * exactly when none waits (not the difference of two clock readings, which can be 1 ms).
   */
  setOutboxBacklog(backlog: { count: number; oldestCreatedAt: string | null }, now = Date.now()): void {
    this.outboxBacklog.set(backlog.count)
    const oldest = backlog.oldestCreatedAt === null ? Number.NaN : Date.parse(backlog.oldestCreatedAt)
    this.outboxOldestAge.set(Number.isNaN(oldest) ? 0 : Math.max(0, (now - oldest) / 1000))
  }

  /** One per attempt: delivered, retry (another attempt is scheduled) or failed (given up). */
  get webhookAttempts(): Counter<'outcome'> {
    return this.once(
      'pm_webhook_attempts_total',
      (registers) =>
        new Counter({
          name: 'pm_webhook_attempts_total',
          help: 'Webhook delivery attempts by outcome (delivered, retry, failed)',
          labelNames: ['outcome'],
          registers,
        }),
    )
  }

  /** One per finished delivery, with the attempts it took. */
  get webhookDeliveries(): Histogram<'outcome'> {
    return this.once(
      'pm_webhook_deliveries_attempts',
      (registers) =>
        new Histogram({
          name: 'pm_webhook_deliveries_attempts',
          help: 'Finished webhook deliveries by outcome (delivered, failed), observed with the attempts each took',
          labelNames: ['outcome'],
          buckets: [1, 2, 3, 4, 5, 6, 8],
          registers,
        }),
    )
  }

  /** 1 while a connection to a server (nats, redis) is up, 0 otherwise. */
  get connectionUp(): Gauge<'service' | 'connection'> {
    return this.once(
      'pm_connection_up',
      (registers) =>
        new Gauge({
          name: 'pm_connection_up',
          help: 'Connection state to a server (1 up, 0 down) by service and connection',
          labelNames: ['service', 'connection'],
          registers,
        }),
    )
  }

  /** Adds a collector run before each scrape; returns its removal. */
  onCollect(collector: Collector): () => void {
    this.collectors.add(collector)
    return () => this.collectors.delete(collector)
  }

  /**
   * A collector that keeps `counter` equal to a running total read at scrape time: a plain
   * field incremented on the hot path costs nothing, and the counter follows it by the
   * difference.
   */
  static follow<L extends string>(
    counter: Counter<L>,
    labels: Partial<Record<L, string>>,
    read: () => number,
  ): Collector {
    let last = 0
    return () => {
      const now = read()
      if (now > last) counter.inc(labels, now - last)
      last = now
    }
  }

  /** The Prometheus text, after every collector has run (a failing one is skipped). */
  async scrape(): Promise<string> {
    await Promise.all([...this.collectors].map(async (c) => c()).map((p) => p.catch(() => {})))
    return this.registry.metrics()
  }
}

export interface RequestMetricsOptions {
  service: string
  /**
   * The route template for the label; Fastify's own by default. A request that matched no
   * route is labelled "unmatched", so that a client cannot grow the label set.
   */
  route?: (request: FastifyRequest) => string | undefined
}

/** Observes every request's duration once, in onResponse (after the reply went out). */
export function observeRequests(app: FastifyInstance, metrics: Metrics, opts: RequestMetricsOptions): void {
  const histogram = metrics.httpDuration
  const routeOf = opts.route ?? ((request: FastifyRequest) => request.routeOptions.url)
  app.addHook('onResponse', (request, reply, done) => {
    histogram.observe(
      {
        service: opts.service,
        route: routeOf(request) ?? 'unmatched',
        method: request.method,
        status: reply.statusCode,
      },
      reply.elapsedTime / 1000,
    )
    done()
  })
}

export interface MetricsServer {
  port: number
  close(): Promise<void>
}

/**
 * Serves `GET /metrics` on its own port (never the public one): Prometheus scrapes it from
 * inside the cluster, and the API port never exposes it.
 */
export async function serveMetrics(metrics: Metrics, host: string, port: number): Promise<MetricsServer> {
  const server: Server = createServer((req, res) => {
    if (req.method !== 'GET' || (req.url ?? '').split('?', 1)[0] !== '/metrics') {
      res.writeHead(404, { 'content-type': 'text/plain' }).end('not found\n')
      return
    }
    metrics.scrape().then(
      (text) => res.writeHead(200, { 'content-type': metrics.registry.contentType }).end(text),
      () => res.writeHead(500, { 'content-type': 'text/plain' }).end('scrape failed\n'),
    )
  })
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject)
    server.listen(port, host, () => {
      server.off('error', reject)
      resolve()
    })
  })
  return {
    port: (server.address() as AddressInfo).port,
    close: () =>
      new Promise<void>((resolve) => {
        server.close(() => resolve())
        server.closeAllConnections()
      }),
  }
}
