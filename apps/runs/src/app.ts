import { join } from 'node:path'
import { busConnection, createBus, type EventBus, tracedBus } from '@pm/bus'
import {
  busAuditRelay,
  createService,
  type HostLookup,
  type InternalTarget,
  loadSecretBox,
  type Metrics,
  type Service,
  type Tracing,
  traceMethods,
} from '@pm/kit'
import type { RunsConfig } from './config.ts'
import { connectionRoutes } from './routes/connections.ts'
import { runRoutes } from './routes/runs.ts'
import { Connections } from './services/connections.ts'
import { Egress } from './services/egress.ts'
import { OrgLimiter } from './services/limiter.ts'
import { RenderClient } from './services/render.ts'
import { preloadProviders, Runs } from './services/runs.ts'
import { SqliteRunStore } from './store/sqlite.ts'
import type { RunStore } from './store/types.ts'

export { loadRunsConfig, RunsConfigSchema, type RunsConfig } from './config.ts'
export type { RunStore } from './store/types.ts'
export { SqliteRunStore } from './store/sqlite.ts'

export interface RunsAppOptions {
  config: RunsConfig
  /** Carries the audit entries of connection changes to the prompts service; NATS_URL by default. */
  bus?: EventBus
  store?: RunStore
  logStream?: NodeJS.WritableStream
  /** Stands in for DNS (tests of the base-URL checks); the system resolver by default. */
  lookup?: HostLookup
  /** This process's metrics (METRICS_PORT); none: nothing observed. */
  metrics?: Metrics
  /** This process's tracing (OTEL_EXPORTER_OTLP_ENDPOINT); none: nothing traced. */
  tracing?: Tracing
  /**
   * Render and prompts as services of this process (the embedded default), called without an
   * HTTP exchange; by default they are called at RENDER_URL and PROMPTS_URL.
   */
  inProcess?: { render: InternalTarget; prompts: InternalTarget }
}

export async function openRunStore(config: RunsConfig): Promise<RunStore> {
  if (config.MONGO_URL) {
    // The driver and the store load only here: a service on SQLite never loads them.
    const [{ connectMongo }, { MongoRunStore }] = await Promise.all([
      import('@pm/kit/mongo'),
      import('./store/mongo.ts'),
    ])
    const store = new MongoRunStore(await connectMongo(config.MONGO_URL), config.MONGO_DB ?? 'pm_runs')
    await store.init()
    return store
  }
  return new SqliteRunStore(join(config.DATA_DIR, 'runs.db'))
}

const PRUNE_EVERY_MS = 60 * 60 * 1000

/** The runs service: provider connections, model calls, the run log (DESIGN section 13). */
export async function buildApp(opts: RunsAppOptions): Promise<Service> {
  const { config, tracing } = opts
  // Before anything opens: without SECRETS_KEY the distributed mode refuses to start.
  const secrets = loadSecretBox(config)
  const ownStore = opts.store ?? (await openRunStore(config))
  const store = tracing ? traceMethods(ownStore, tracing, 'runs.store') : ownStore
  let ownBus: EventBus
  try {
    ownBus = opts.bus ?? (await createBus(config.NATS_URL, 'runs'))
  } catch (err) {
    if (!opts.store) await ownStore.close()
    throw err
  }
  const bus = tracing ? tracedBus(ownBus, tracing) : ownBus
  const app = createService({
    name: 'runs',
    logLevel: config.LOG_LEVEL,
    compileSchemas: config.SCHEMA_COMPILE,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { store: () => store.check(), bus: () => bus.check() },
    ...(opts.metrics ? { metrics: { registry: opts.metrics, connections: busConnection(bus) } } : {}),
    ...(tracing ? { tracing } : {}),
  })
  // Provider keys sealed under a key SECRETS_KEY has since replaced are sealed again under the
  // current one, as webhooks does with its signing secrets, so that SECRETS_KEY_PREVIOUS can be
  // retired (docs/operations.md, "Rotating SECRETS_KEY"). A key that opens under no held key stops
  // the start here (SecretError names it) rather than failing every run on that connection.
  const resealed = await ownStore.resealConnections((id, stored) =>
    secrets.needsReseal(stored) ? secrets.seal(secrets.open(stored, id), id) : null,
  )
  if (resealed > 0) app.log.info({ resealed }, 'provider keys sealed under the current key')
  // Audit entries are written with their changes and published from the outbox (DESIGN section 15).
  const relay = busAuditRelay(store, bus, app.log, config)
  const egress = new Egress(config.PROVIDER_ALLOWED_HOSTS, config.RUN_CONNECT_TIMEOUT_MS, opts.lookup)
  const render = new RenderClient(
    opts.inProcess?.render ?? config.RENDER_URL,
    opts.inProcess?.prompts ?? config.PROMPTS_URL,
  )
  const connections = new Connections({
    store,
    secrets,
    egress,
    maxPerOrganization: config.RUN_MAX_CONNECTIONS,
    onAudit: () => relay.kick(),
  })
  const runs = new Runs({
    store,
    connections,
    render,
    egress,
    limiter: new OrgLimiter(config.RUN_MAX_CONCURRENT),
    timeoutMs: config.RUN_TIMEOUT_MS,
    maxOutputBytes: config.RUN_MAX_OUTPUT_BYTES,
    log: app.log,
  })
  connectionRoutes(app, { connections })
  runRoutes(app, { connections, runs, heartbeatMs: config.RUN_HEARTBEAT_MS })

  let pruner: NodeJS.Timeout | undefined
  const prune = () =>
    runs.prune(config.RUN_RETENTION_DAYS).then(
      (n) => {
        if (n > 0) app.log.info({ deleted: n, retentionDays: config.RUN_RETENTION_DAYS }, 'old runs deleted')
      },
      (err: unknown) => app.log.error({ err }, 'deleting old runs failed'),
    )
  // The provider SDKs load in the background on the service's first request (the dashboard lists
  // connections before anyone runs), not at start: loading them costs about 0.7 s of CPU, which
  // every start paid, the embedded default's included, for a feature many never use.
  let preloaded = false
  app.addHook('onRequest', (request, _reply, done) => {
    if (!preloaded && !request.url.startsWith('/health')) {
      preloaded = true
      preloadProviders()
    }
    done()
  })
  app.addHook('onReady', async () => {
    relay.start()
    await prune()
    pruner = setInterval(prune, PRUNE_EVERY_MS)
    pruner.unref()
  })
  app.addHook('onClose', async () => {
    clearInterval(pruner)
    // An entry the relay has not sent stays in the outbox for the next start.
    await relay.stop()
    await render.close()
    await egress.close()
    if (!opts.bus) await ownBus.close()
    if (!opts.store) await ownStore.close()
  })
  return app
}
