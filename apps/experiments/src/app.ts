import { join } from 'node:path'
import { busConnection, createBus, type EventBus, tracedBus } from '@pm/bus'
import { SUBJECTS } from '@pm/contracts'
import { busAuditRelay, createService, type Metrics, type Service, type Tracing, traceMethods } from '@pm/kit'
import type { ExperimentsConfig } from './config.ts'
import { datasetRoutes } from './routes/datasets.ts'
import { experimentRoutes } from './routes/experiments.ts'
import { PromptsClient, RunsExecutor, type UnitExecutor } from './services/clients.ts'
import { ExperimentsService } from './services/experiments.ts'
import { EvaluatorSandbox } from './domain/sandbox.ts'
import { Runner } from './services/runner.ts'
import { SqliteExperimentStore } from './store/sqlite.ts'
import type { ExperimentStore } from './store/types.ts'

export { loadExperimentsConfig, ExperimentsConfigSchema, type ExperimentsConfig } from './config.ts'
export type { ExperimentStore } from './store/types.ts'
export { SqliteExperimentStore } from './store/sqlite.ts'
export { type RunAnswer, type RunRequest, RateLimitedError, type UnitExecutor } from './services/clients.ts'

export interface ExperimentsAppOptions {
  config: ExperimentsConfig
  bus?: EventBus
  store?: ExperimentStore
  /** Stands in for the runs service (tests of the job machinery); RUNS_URL by default. */
  executor?: UnitExecutor
  logStream?: NodeJS.WritableStream
  metrics?: Metrics
  tracing?: Tracing
}

export async function openExperimentStore(config: ExperimentsConfig): Promise<ExperimentStore> {
  if (config.MONGO_URL) {
    // The driver and the store load only here: a service on SQLite never loads them.
    const [{ connectMongo }, { MongoExperimentStore }] = await Promise.all([
      import('@pm/kit/mongo'),
      import('./store/mongo.ts'),
    ])
    const store = new MongoExperimentStore(
      await connectMongo(config.MONGO_URL),
      config.MONGO_DB ?? 'pm_experiments',
    )
    await store.init()
    return store
  }
  return new SqliteExperimentStore(join(config.DATA_DIR, 'experiments.db'))
}

export async function buildApp(opts: ExperimentsAppOptions): Promise<Service> {
  const { config, tracing } = opts
  const ownStore = opts.store ?? (await openExperimentStore(config))
  const store = tracing ? traceMethods(ownStore, tracing, 'experiments.store') : ownStore
  const ownBus = opts.bus ?? (await createBus(config.NATS_URL, 'experiments'))
  const bus = tracing ? tracedBus(ownBus, tracing) : ownBus
  const app = createService({
    name: 'experiments',
    logLevel: config.LOG_LEVEL,
    compileSchemas: config.SCHEMA_COMPILE,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { store: () => store.check(), bus: () => bus.check() },
    metrics: opts.metrics && { registry: opts.metrics, connections: busConnection(bus) },
    ...(tracing ? { tracing } : {}),
  })
  // Audit entries are written with their changes and published from the outbox (DESIGN section 15).
  const relay = busAuditRelay(store, bus, app.log, config)
  const executor =
    opts.executor ??
    new RunsExecutor(config.RUNS_URL, config.INTERNAL_AUTH_SECRET, config.EXPERIMENT_CALL_TIMEOUT_MS)
  const prompts = new PromptsClient(config.PROMPTS_URL, config.INTERNAL_AUTH_SECRET)
  let service: ExperimentsService | undefined
  // regex and json-schema evaluators: in a worker thread, each evaluation with a deadline.
  const sandbox = new EvaluatorSandbox({ timeoutMs: config.EXPERIMENT_EVALUATOR_TIMEOUT_MS })
  const runner = new Runner({
    store,
    executor,
    log: app.log,
    orgConcurrency: config.EXPERIMENT_ORG_CONCURRENCY,
    leaseMs: config.EXPERIMENT_LEASE_MS,
    pollMs: config.EXPERIMENT_POLL_MS,
    maxBackoffMs: config.EXPERIMENT_MAX_BACKOFF_MS,
    maxRateLimited: config.EXPERIMENT_MAX_RATE_LIMITED_ATTEMPTS,
    sandbox,
    onEnded: (exp, cannotRun) => (service ? service.ended(exp, cannotRun) : Promise.resolve()),
  })
  service = new ExperimentsService({
    store,
    bus,
    prompts,
    runner,
    log: app.log,
    defaultConcurrency: config.EXPERIMENT_DEFAULT_CONCURRENCY,
    onAudit: () => relay.kick(),
  })
  const deps = { config, service }
  datasetRoutes(app, deps)
  experimentRoutes(app, deps)

  let closing = false
  let scanTimer: NodeJS.Timeout | undefined
  const scan = async () => {
    if (closing || !service) return
    await service.scan().catch((err: unknown) => app.log.error({ err }, 'experiment scan failed'))
    if (!closing) scanTimer = setTimeout(scan, Math.max(1_000, config.EXPERIMENT_POLL_MS * 4))
  }
  app.addHook('onReady', async () => {
    relay.start()
    // The job queue: every replica shares one durable consumer, so each queued experiment is
    // taken by one of them; the scan resumes what a crashed process held (leases run out).
    await bus.consume(SUBJECTS.experimentQueued, config.EXPERIMENT_CONSUMER, async (data) => {
      if (closing) throw new Error('experiments service is shutting down')
      const id = (data as { experimentId?: unknown } | null)?.experimentId
      if (typeof id === 'string' && service) await service.take(id)
    })
    void scan()
  })
  // Stop taking work, give the units in flight back, then close the clients, the bus and the store.
  app.addHook('onClose', async () => {
    closing = true
    clearTimeout(scanTimer)
    // The runner gives its units in flight back (a unit whose signal was aborted is released, not
    // recorded), so the sandbox stops at once too: an evaluation running or queued then ends
    // now, not after its deadline, which could outlast SHUTDOWN_TIMEOUT_MS.
    const stopping = runner.close()
    await sandbox.close()
    await stopping
    // An entry the relay has not sent stays in the outbox for the next start.
    await relay.stop()
    await executor.close()
    await prompts.close()
    if (!opts.bus) await ownBus.close()
    if (!opts.store) await ownStore.close()
  })
  return app
}
