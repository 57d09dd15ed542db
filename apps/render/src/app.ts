import { type PromptChangedEvent, SUBJECTS } from '@pm/contracts'
import { busConnection, createBus, type EventBus, tracedBus } from '@pm/bus'
import { collectWhileOpen, createService, Metrics, type Service, type Tracing } from '@pm/kit'
import type { RenderConfig } from './config.ts'
import { Resolver } from './services/resolver.ts'
import { renderRoutes } from './routes/render.ts'
import { SplitCounter } from './services/splitCounter.ts'

export type { RenderDeps } from './deps.ts'
export { loadRenderConfig, RenderConfigSchema, type RenderConfig } from './config.ts'

export interface RenderAppOptions {
  config: RenderConfig
  bus?: EventBus
  logStream?: NodeJS.WritableStream
  /** This process's metrics (METRICS_PORT); none: nothing observed. */
  metrics?: Metrics
  /** This process's tracing (OTEL_EXPORTER_OTLP_ENDPOINT); none: nothing traced. */
  tracing?: Tracing
}

/** Stateless: every replica holds only caches, kept true by the prompts service's events. */
export async function buildApp(opts: RenderAppOptions): Promise<Service> {
  const { config } = opts
  const { tracing } = opts
  const ownBus = opts.bus ?? (await createBus(config.NATS_URL, 'render'))
  const bus = tracing ? tracedBus(ownBus, tracing) : ownBus
  const resolver = new Resolver({
    promptsUrl: config.PROMPTS_URL,
    snapshotCacheSize: config.SNAPSHOT_CACHE_SIZE,
    snapshotCacheMaxBytes: config.SNAPSHOT_CACHE_MAX_BYTES,
    resolveCacheSize: config.RESOLVE_CACHE_SIZE,
    resolveTtlMs: config.RESOLVE_CACHE_TTL_MS,
    connections: config.PROMPTS_CONNECTIONS,
    timeoutMs: config.PROMPTS_TIMEOUT_MS,
    ...(tracing ? { tracing } : {}),
  })
  bus.onBroadcast(SUBJECTS.promptChanged, (data) => {
    const promptId = (data as Partial<PromptChangedEvent> | null)?.promptId
    if (typeof promptId === 'string') resolver.invalidate(promptId)
  })

  const app = createService({
    name: 'render',
    logLevel: config.LOG_LEVEL,
    compileSchemas: config.SCHEMA_COMPILE,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { prompts: () => resolver.check(), bus: () => bus.check() },
    metrics: opts.metrics && { registry: opts.metrics, connections: busConnection(bus) },
    ...(tracing ? { tracing } : {}),
  })
  if (opts.metrics) {
    opts.metrics.declare('render')
    // Read from the resolver's own tallies at scrape time: nothing added to the render path.
    const lookups = opts.metrics.renderCache
    const hits = Metrics.follow(lookups, { result: 'hit' }, () => resolver.stats.hits)
    const misses = Metrics.follow(lookups, { result: 'miss' }, () => resolver.stats.fetches)
    collectWhileOpen(app, opts.metrics, () => {
      hits()
      misses()
    })
  }
  const splitCounter = new SplitCounter(
    config.PROMPTS_URL,
    config.INTERNAL_AUTH_SECRET,
    app.log,
    config.SPLIT_COUNTS_FLUSH_MS,
  )
  renderRoutes(app, {
    resolver,
    maxOutputBytes: config.RENDER_MAX_OUTPUT_BYTES,
    countVariant: (splitId, variant) => splitCounter.count(splitId, variant),
  })
  app.addHook('onReady', async () => splitCounter.start())
  app.addHook('onClose', async () => {
    await splitCounter.close()
    await resolver.close()
    if (!opts.bus) await ownBus.close()
  })
  return app
}
