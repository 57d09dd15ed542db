import { type PromptChangedEvent, SUBJECTS } from '@pm/contracts'
import { createBus, type EventBus } from '@pm/bus'
import { createService, type Service } from '@pm/kit'
import type { RenderConfig } from './config.ts'
import { Resolver } from './domain/resolver.ts'
import { renderRoutes } from './routes/render.ts'

export { loadRenderConfig, RenderConfigSchema, type RenderConfig } from './config.ts'

export interface RenderAppOptions {
  config: RenderConfig
  bus?: EventBus
  logStream?: NodeJS.WritableStream
}

export interface RenderDeps {
  resolver: Resolver
}

/** Stateless: every replica holds only caches, kept true by the prompts service's events. */
export async function buildApp(opts: RenderAppOptions): Promise<Service> {
  const { config } = opts
  const bus = opts.bus ?? (await createBus(config.NATS_URL, 'render'))
  const resolver = new Resolver({
    promptsUrl: config.PROMPTS_URL,
    snapshotCacheSize: config.SNAPSHOT_CACHE_SIZE,
    snapshotCacheMaxBytes: config.SNAPSHOT_CACHE_MAX_BYTES,
    resolveCacheSize: config.RESOLVE_CACHE_SIZE,
    resolveTtlMs: config.RESOLVE_CACHE_TTL_MS,
    connections: config.PROMPTS_CONNECTIONS,
  })
  bus.onBroadcast(SUBJECTS.promptChanged, (data) => {
    const promptId = (data as Partial<PromptChangedEvent> | null)?.promptId
    if (typeof promptId === 'string') resolver.invalidate(promptId)
  })

  const app = createService({
    name: 'render',
    logLevel: config.LOG_LEVEL,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { prompts: () => resolver.check(), bus: () => bus.check() },
  })
  renderRoutes(app, { resolver })
  app.addHook('onClose', async () => {
    await resolver.close()
    if (!opts.bus) await bus.close()
  })
  return app
}
