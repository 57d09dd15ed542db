import { createBus, type EventBus } from '@pm/bus'
import { createService, type Service } from '@pm/kit'
import type { WebhooksConfig } from './config.ts'

export { loadWebhooksConfig, WebhooksConfigSchema, type WebhooksConfig } from './config.ts'

export interface WebhooksAppOptions {
  config: WebhooksConfig
  bus?: EventBus
  logStream?: NodeJS.WritableStream
}

export async function buildApp(opts: WebhooksAppOptions): Promise<Service> {
  const { config } = opts
  const bus = opts.bus ?? (await createBus(config.NATS_URL, 'webhooks'))
  const app = createService({
    name: 'webhooks',
    logLevel: config.LOG_LEVEL,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { bus: () => bus.check() },
  })
  app.addHook('onClose', async () => {
    if (!opts.bus) await bus.close()
  })
  return app
}
