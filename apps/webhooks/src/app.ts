import { join } from 'node:path'
import { createBus, type EventBus } from '@pm/bus'
import { SUBJECTS } from '@pm/contracts'
import { connectMongo, createService, type Service } from '@pm/kit'
import type { WebhooksConfig } from './config.ts'
import type { HostLookup } from './domain/ssrf.ts'
import { webhookRoutes } from './routes/webhooks.ts'
import { MongoWebhookStore } from './store/mongo.ts'
import { SqliteWebhookStore } from './store/sqlite.ts'
import type { WebhookStore } from './store/types.ts'
import { Webhooks } from './webhooks.ts'
import { DeliveryWorker } from './worker.ts'

export { loadWebhooksConfig, WebhooksConfigSchema, type WebhooksConfig } from './config.ts'
export type { WebhookStore } from './store/types.ts'
export { SqliteWebhookStore } from './store/sqlite.ts'
export { MongoWebhookStore } from './store/mongo.ts'

export interface WebhooksAppOptions {
  config: WebhooksConfig
  bus?: EventBus
  store?: WebhookStore
  logStream?: NodeJS.WritableStream
  /** Stands in for DNS (tests of the delivery-time address check); the system resolver by default. */
  lookup?: HostLookup
}

export async function openWebhookStore(config: WebhooksConfig): Promise<WebhookStore> {
  if (config.MONGO_URL) {
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
  const store = opts.store ?? (await openWebhookStore(config))
  const bus = opts.bus ?? (await createBus(config.NATS_URL, 'webhooks'))
  const app = createService({
    name: 'webhooks',
    logLevel: config.LOG_LEVEL,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { store: () => store.check(), bus: () => bus.check() },
  })
  const worker = new DeliveryWorker({
    store,
    log: app.log,
    allowPrivate: config.WEBHOOK_ALLOW_PRIVATE_TARGETS,
    timeoutMs: config.WEBHOOK_TIMEOUT_MS,
    retryScale: config.WEBHOOK_RETRY_SCALE,
    pollMs: config.WEBHOOK_POLL_MS,
    concurrency: config.WEBHOOK_CONCURRENCY,
    ...(opts.lookup ? { lookup: opts.lookup } : {}),
  })
  const webhooks = new Webhooks({
    store,
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
    await bus.consume(SUBJECTS.versionPublished, config.WEBHOOK_CONSUMER, async (data) => {
      // Not acknowledged while shutting down: the event goes to another replica, or to us after the restart.
      if (closing) throw new Error('webhooks service is shutting down')
      await webhooks.onEvent(data)
    })
  })
  // Stop taking work, let attempts in flight be recorded, then close the bus and the store.
  app.addHook('onClose', async () => {
    closing = true
    await worker.stop()
    if (!opts.bus) await bus.close()
    if (!opts.store) await store.close()
  })
  return app
}
