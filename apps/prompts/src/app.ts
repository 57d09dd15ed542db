import { join } from 'node:path'
import { createBus, type EventBus } from '@pm/bus'
import { connectMongo, createService, type Service } from '@pm/kit'
import type { PromptsConfig } from './config.ts'
import { Importer } from './domain/importer.ts'
import { OutboxRelay } from './domain/outbox.ts'
import { PromptsService } from './domain/prompts.ts'
import { environmentRoutes } from './routes/environments.ts'
import { forkRoutes } from './routes/fork.ts'
import { importRoutes } from './routes/import.ts'
import { internalRoutes } from './routes/internal.ts'
import { promptRoutes } from './routes/prompts.ts'
import { publicRoutes } from './routes/public.ts'
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
  importer: Importer
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
  const relay = new OutboxRelay(store, bus, app.log, {
    pollMs: config.OUTBOX_POLL_MS,
    delayMs: config.OUTBOX_RELAY_DELAY_MS,
    retainMs: config.OUTBOX_RETAIN_MS,
  })
  const service = new PromptsService(store, bus, () => relay.kick())
  const importer = new Importer(service, app.log, {
    progressEvery: config.IMPORT_PROGRESS_EVERY,
    staleMs: config.IMPORT_STALE_MS,
  })
  const deps: PromptsDeps = { config, service, importer }

  promptRoutes(app, deps)
  versionRoutes(app, deps)
  environmentRoutes(app, deps)
  forkRoutes(app, deps)
  publicRoutes(app, deps)
  importRoutes(app, deps)
  internalRoutes(app, deps)

  app.addHook('onReady', async () => relay.start())
  // Imports record where they stopped; then the relay stops so nothing is half-sent
  // (events written by the last rows stay in the outbox for the next start); then the
  // bus and the store.
  app.addHook('onClose', async () => {
    await importer.stop()
    await relay.stop()
    if (!opts.bus) await bus.close()
    if (!opts.store) await store.close()
  })
  return app
}
