import { join } from 'node:path'
import { createBus, type EventBus } from '@pm/bus'
import { connectMongo, createService, type Service } from '@pm/kit'
import type { PromptsConfig } from './config.ts'
import { OutboxRelay } from './domain/outbox.ts'
import { PromptsService } from './domain/prompts.ts'
import { internalRoutes } from './routes/internal.ts'
import { promptRoutes } from './routes/prompts.ts'
import { versionRoutes } from './routes/versions.ts'
import { MongoPromptStore } from './store/mongo.ts'
import { SqlitePromptStore } from './store/sqlite.ts'
import type { PromptStore } from './store/types.ts'

export { loadPromptsConfig, PromptsConfigSchema, type PromptsConfig } from './config.ts'
export type { PromptStore } from './store/types.ts'
export { SqlitePromptStore } from './store/sqlite.ts'
export { MongoPromptStore } from './store/mongo.ts'

export interface PromptsAppOptions {
  config: PromptsConfig
  bus?: EventBus
  store?: PromptStore
  logStream?: NodeJS.WritableStream
}

export interface PromptsDeps {
  config: PromptsConfig
  service: PromptsService
}

export async function openPromptStore(config: PromptsConfig): Promise<PromptStore> {
  if (config.MONGO_URL) {
    const store = new MongoPromptStore(await connectMongo(config.MONGO_URL), config.MONGO_DB ?? 'pm_prompts')
    await store.init()
    return store
  }
  return new SqlitePromptStore(join(config.DATA_DIR, 'prompts.db'))
}

export async function buildApp(opts: PromptsAppOptions): Promise<Service> {
  const { config } = opts
  const store = opts.store ?? (await openPromptStore(config))
  const bus = opts.bus ?? (await createBus(config.NATS_URL, 'prompts'))
  const app = createService({
    name: 'prompts',
    logLevel: config.LOG_LEVEL,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { store: () => store.check(), bus: () => bus.check() },
  })
  const relay = new OutboxRelay(store, bus, app.log, config.OUTBOX_POLL_MS)
  const service = new PromptsService(store, bus, () => relay.kick())
  const deps: PromptsDeps = { config, service }

  promptRoutes(app, deps)
  versionRoutes(app, deps)
  internalRoutes(app, deps)

  app.addHook('onReady', async () => relay.start())
  // Stop the relay first so nothing is half-sent, then the bus and the store.
  app.addHook('onClose', async () => {
    await relay.stop()
    if (!opts.bus) await bus.close()
    if (!opts.store) await store.close()
  })
  return app
}
