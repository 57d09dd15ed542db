import { join } from 'node:path'
import { busConnection, createBus, type EventBus, tracedBus } from '@pm/bus'
import {
  collectWhileOpen,
  createService,
  isAuditEntry,
  type Metrics,
  type Service,
  type Tracing,
  traceMethods,
} from '@pm/kit'
import { SUBJECTS } from '@pm/contracts'
import type { PromptsConfig } from './config.ts'
import { PromptFiles } from './services/files.ts'
import { Importer } from './services/importer.ts'
import { IdentityOrgSettings, type OrgSettings } from './services/orgSettings.ts'
import { OutboxRelay } from './services/outbox.ts'
import { PromptsService } from './services/prompts.ts'
import { auditRoutes } from './routes/audit.ts'
import { environmentRoutes } from './routes/environments.ts'
import { fileRoutes } from './routes/files.ts'
import { forkRoutes } from './routes/fork.ts'
import { importRoutes } from './routes/import.ts'
import { internalRoutes } from './routes/internal.ts'
import { resolveRoutes } from './routes/resolve.ts'
import { promptRoutes } from './routes/prompts.ts'
import { publicRoutes } from './routes/public.ts'
import { versionRoutes } from './routes/versions.ts'
import { SqlitePromptStore } from './store/sqlite.ts'
import type { OutboxRecord, PromptStore } from './store/types.ts'
import type { PromptsDeps } from './deps.ts'

export { loadPromptsConfig, PromptsConfigSchema, type PromptsConfig } from './config.ts'
export type { PromptStore } from './store/types.ts'
export { SqlitePromptStore } from './store/sqlite.ts'
export type { PromptsDeps } from './deps.ts'
export { StaticOrgSettings, type OrgSettings } from './services/orgSettings.ts'

export interface PromptsAppOptions {
  config: PromptsConfig
  bus?: EventBus
  store?: PromptStore
  logStream?: NodeJS.WritableStream
  /** This process's metrics (METRICS_PORT); none: nothing observed. */
  metrics?: Metrics
  /** This process's tracing (OTEL_EXPORTER_OTLP_ENDPOINT); none: nothing traced. */
  tracing?: Tracing
  /** Where promotes learn the protected environments (default: identity at IDENTITY_URL). */
  orgSettings?: OrgSettings
}

export async function openPromptStore(config: PromptsConfig): Promise<PromptStore> {
  if (config.MONGO_URL) {
    // The driver and the store load only here: a service on SQLite never loads them.
    const [{ connectMongo }, { MongoPromptStore }] = await Promise.all([
      import('@pm/kit/mongo'),
      import('./store/mongo.ts'),
    ])
    const store = new MongoPromptStore(await connectMongo(config.MONGO_URL), config.MONGO_DB ?? 'pm_prompts')
    await store.init()
    return store
  }
  return new SqlitePromptStore(join(config.DATA_DIR, 'prompts.db'))
}

export async function buildApp(opts: PromptsAppOptions): Promise<Service> {
  const { config } = opts
  const { tracing } = opts
  const ownStore = opts.store ?? (await openPromptStore(config))
  const store = tracing ? tracedStore(ownStore, tracing) : ownStore
  const ownBus = opts.bus ?? (await createBus(config.NATS_URL, 'prompts'))
  const bus = tracing ? tracedBus(ownBus, tracing) : ownBus
  const app = createService({
    name: 'prompts',
    logLevel: config.LOG_LEVEL,
    compileSchemas: config.SCHEMA_COMPILE,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { store: () => store.check(), bus: () => bus.check() },
    metrics: opts.metrics && { registry: opts.metrics, connections: busConnection(bus) },
    ...(tracing ? { tracing } : {}),
  })
  const { metrics } = opts
  metrics?.declare('prompts')
  if (metrics) {
    collectWhileOpen(app, metrics, async () => {
      metrics.setOutboxBacklog(await store.outboxBacklog())
    })
  }
  const relay = new OutboxRelay(store, bus, app.log, {
    pollMs: config.OUTBOX_POLL_MS,
    delayMs: config.OUTBOX_RELAY_DELAY_MS,
    retainMs: config.OUTBOX_RETAIN_MS,
    auditRetainMs: config.AUDIT_RETENTION_DAYS * 24 * 60 * 60 * 1000,
    ...(metrics ? { onSent: () => metrics.outboxSent.inc() } : {}),
  })
  const orgSettings =
    opts.orgSettings ?? new IdentityOrgSettings(config.IDENTITY_URL, config.INTERNAL_AUTH_SECRET)
  const service = new PromptsService(store, bus, () => relay.kick(), orgSettings)
  const importer = new Importer(service, store, app.log, {
    leaseMs: config.IMPORT_LEASE_MS,
    pollMs: config.IMPORT_POLL_MS,
    dedupeMs: config.IMPORT_DEDUPE_MS,
    rowDelayMs: config.IMPORT_ROW_DELAY_MS,
  })
  const deps: PromptsDeps = { config, service, importer, files: new PromptFiles(service, store, orgSettings) }

  promptRoutes(app, deps)
  versionRoutes(app, deps)
  environmentRoutes(app, deps)
  forkRoutes(app, deps)
  publicRoutes(app, deps)
  importRoutes(app, deps)
  fileRoutes(app, deps)
  internalRoutes(app, deps)
  resolveRoutes(app, deps)
  auditRoutes(app, deps)

  let closing = false
  app.addHook('onReady', async () => {
    relay.start()
    importer.start()
    // The audit entries of identity and webhooks, written in their changes' transactions and
    // relayed here (DESIGN section 15): stored once by entry id, so a redelivery changes nothing.
    await bus.consume(SUBJECTS.auditEntry, config.AUDIT_CONSUMER, async (data) => {
      if (closing) throw new Error('prompts service is shutting down')
      if (!isAuditEntry(data)) {
        // Acknowledged anyway: a malformed entry would fail the same way forever.
        app.log.warn({ entry: data }, 'ignoring a malformed audit entry')
        return
      }
      await store.ingestAudit(data)
    })
  })
  // Imports stop after their current row and release their batches for the next start (or
  // another replica); then the relay stops so nothing is half-sent (unsent events stay in the
  // outbox for the next start); then the bus and the store.
  app.addHook('onClose', async () => {
    closing = true
    await importer.stop()
    await relay.stop()
    if (!opts.orgSettings) await orgSettings.close()
    if (!opts.bus) await ownBus.close()
    if (!opts.store) await ownStore.close()
  })
  return app
}

/**
 * Store calls as spans (prompts.store.*), and the trace context of the request written into
 * each outbox event (given directly, or made by a builder the store calls inside its
 * transaction), so that the event's publish and its consumers continue the request's trace.
 */
function tracedStore(store: PromptStore, tracing: Tracing): PromptStore {
  const isOutbox = (v: unknown): v is OutboxRecord =>
    typeof v === 'object' && v !== null && typeof (v as OutboxRecord).msgId === 'string' && 'payload' in v
  const stamp = (v: unknown): unknown => {
    if (isOutbox(v)) {
      const headers = tracing.headers()
      return headers.traceparent ? { ...v, traceHeaders: headers } : v
    }
    if (Array.isArray(v)) return v.map(stamp)
    const built = v as { outbox?: unknown } | null
    if (built && typeof built === 'object' && isOutbox(built.outbox))
      return { ...built, outbox: stamp(built.outbox) }
    return v
  }
  const traced = traceMethods(store, tracing, 'prompts.store')
  return new Proxy(traced, {
    get(target, prop, receiver) {
      const value = Reflect.get(target, prop, receiver)
      if (typeof value !== 'function') return value
      return (...args: unknown[]) =>
        (value as (...a: unknown[]) => unknown).apply(
          target,
          args.map((a) =>
            typeof a === 'function'
              ? (...inner: unknown[]) => stamp((a as (...x: unknown[]) => unknown)(...inner))
              : stamp(a),
          ),
        )
    },
  })
}
