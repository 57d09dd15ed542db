import { join } from 'node:path'
import { busConnection, createBus, type EventBus, tracedBus } from '@pm/bus'
import { EVENT_SUBJECTS, EVENT_TYPES } from '@pm/contracts'
import {
  busAuditRelay,
  createService,
  loadSecretBox,
  type Metrics,
  type SecretBox,
  type Service,
  type Tracing,
  traceMethods,
} from '@pm/kit'
import type { WebhooksConfig } from './config.ts'
import type { HostLookup } from './services/ssrf.ts'
import { webhookRoutes } from './routes/webhooks.ts'
import { resealSecrets } from './services/secrets.ts'
import { SqliteWebhookStore } from './store/sqlite.ts'
import type { WebhookStore } from './store/types.ts'
import { Webhooks } from './webhooks.ts'
import { DeliveryWorker } from './worker.ts'

export { loadWebhooksConfig, WebhooksConfigSchema, type WebhooksConfig } from './config.ts'
export type { WebhookStore } from './store/types.ts'
export { SqliteWebhookStore } from './store/sqlite.ts'

export interface WebhooksAppOptions {
  config: WebhooksConfig
  bus?: EventBus
  store?: WebhookStore
  logStream?: NodeJS.WritableStream
  /** Stands in for DNS (tests of the delivery-time address check); the system resolver by default. */
  lookup?: HostLookup
  /** This process's metrics (METRICS_PORT); none: nothing observed. */
  metrics?: Metrics
  /** This process's tracing (OTEL_EXPORTER_OTLP_ENDPOINT); none: nothing traced. */
  tracing?: Tracing
  /** Seals the signing secrets; by default from SECRETS_KEY or, in the embedded default, DATA_DIR/secret.key. */
  secrets?: SecretBox
}

export async function openWebhookStore(config: WebhooksConfig): Promise<WebhookStore> {
  if (config.MONGO_URL) {
    // The driver and the store load only here: a service on SQLite never loads them.
    const [{ connectMongo }, { MongoWebhookStore }] = await Promise.all([
      import('@pm/kit/mongo'),
      import('./store/mongo.ts'),
    ])
    const store = new MongoWebhookStore(
      await connectMongo(config.MONGO_URL),
      config.MONGO_DB ?? 'pm_webhooks',
    )
    await store.init()
    return store
  }
  return new SqliteWebhookStore(join(config.DATA_DIR, 'webhooks.db'))
}

export async function buildApp(opts: WebhooksAppOptions): Promise<Service> {
  const { config } = opts
  const { tracing } = opts
  opts.metrics?.declare('webhooks')
  // Before anything connects: without SECRETS_KEY the distributed mode stops here, saying so.
  const secrets = opts.secrets ?? loadSecretBox(config)
  const ownStore = opts.store ?? (await openWebhookStore(config))
  let resealed: number
  try {
    resealed = await resealSecrets(ownStore, secrets)
  } catch (err) {
    if (!opts.store) await ownStore.close()
    throw err
  }
  const store = tracing ? traceMethods(ownStore, tracing, 'webhooks.store') : ownStore
  const ownBus = opts.bus ?? (await createBus(config.NATS_URL, 'webhooks'))
  const bus = tracing ? tracedBus(ownBus, tracing) : ownBus
  const app = createService({
    name: 'webhooks',
    logLevel: config.LOG_LEVEL,
    compileSchemas: config.SCHEMA_COMPILE,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { store: () => store.check(), bus: () => bus.check() },
    metrics: opts.metrics && { registry: opts.metrics, connections: busConnection(bus) },
    ...(tracing ? { tracing } : {}),
  })
  if (resealed > 0) app.log.info({ resealed }, 'signing secrets sealed under the current key')
  const worker = new DeliveryWorker({
    store,
    secrets,
    log: app.log,
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    retryScale: config.WEBHOOK_RETRY_SCALE,
    pollMs: config.WEBHOOK_POLL_MS,
    concurrency: config.WEBHOOK_CONCURRENCY,
    maxPerOrganization: config.WEBHOOK_MAX_IN_FLIGHT_PER_ORG,
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
    ...(opts.metrics ? { metrics: opts.metrics } : {}),
    ...(tracing ? { tracing } : {}),
  })
  // Audit entries are written with their changes and published from the outbox (DESIGN section 15).
  const relay = busAuditRelay(store, bus, app.log, config)
  const webhooks = new Webhooks({
    onAudit: () => relay.kick(),
    store,
    secrets,
    worker,
    log: app.log,
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    maxPerOrganization: config.WEBHOOK_MAX_PER_ORG,
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
  })

  webhookRoutes(app, { webhooks })

  let closing = false
  app.addHook('onReady', async () => {
    worker.start()
    relay.start()
    // One durable consumer per event kind: `version.published` keeps the consumer it always had
    // (WEBHOOK_CONSUMER), so an upgrade loses none of its pending events; the others are new.
    for (const type of EVENT_TYPES) {
      const durable =
        type === 'version.published'
          ? config.WEBHOOK_CONSUMER
          : `${config.WEBHOOK_CONSUMER}-${type.replaceAll('.', '-')}`
      await bus.consume(EVENT_SUBJECTS[type], durable, async (data) => {
        // Not acknowledged while shutting down: the event goes to another replica, or to us after the restart.
        if (closing) throw new Error('webhooks service is shutting down')
        await webhooks.onEvent(data)
      })
    }
  })
  // Stop taking work, let attempts in flight be recorded, then close the bus and the store.
  app.addHook('onClose', async () => {
    closing = true
    await worker.stop()
    // An entry the relay has not sent stays in the outbox for the next start.
    await relay.stop()
    if (!opts.bus) await ownBus.close()
    if (!opts.store) await ownStore.close()
  })
  return app
}
