import cookie from '@fastify/cookie'
import { busConnection, createBus, type EventBus, tracedBus } from '@pm/bus'
import {
  type AuditRelay,
  busAuditRelay,
  createService,
  type Metrics,
  type Service,
  type Tracing,
  traceMethods,
} from '@pm/kit'
import type { IdentityConfig } from './config.ts'
import { IdentityService } from './services/identity.ts'
import { Sessions } from './services/sessions.ts'
import { TokenIssuer } from './services/tokens.ts'
import { authRoutes } from './routes/auth.ts'
import { internalRoutes } from './routes/internal.ts'
import { organizationRoutes } from './routes/organizations.ts'
import { openIdentityStore } from './store/open.ts'
import type { IdentityDeps } from './deps.ts'
import type { IdentityStore } from './store/types.ts'

export { loadIdentityConfig, IdentityConfigSchema, type IdentityConfig } from './config.ts'
export type { IdentityStore } from './store/types.ts'
export { SqliteIdentityStore } from './store/sqlite.ts'
export { openIdentityStore } from './store/open.ts'
export { IdentityService } from './services/identity.ts'
export { Sessions } from './services/sessions.ts'
export type { IdentityDeps } from './deps.ts'
export { bootstrapIdentity, type BootstrapInput, type BootstrapOutcome } from './bootstrap.ts'

export interface IdentityAppOptions {
  config: IdentityConfig
  /** Injected by the embedded launcher (shared in-process bus) or tests; owned by the caller. */
  bus?: EventBus
  store?: IdentityStore
  logStream?: NodeJS.WritableStream
  /** This process's metrics (METRICS_PORT); none: nothing observed. */
  metrics?: Metrics
  /** This process's tracing (OTEL_EXPORTER_OTLP_ENDPOINT); none: nothing traced. */
  tracing?: Tracing
}

export async function buildApp(opts: IdentityAppOptions): Promise<Service> {
  const { config } = opts
  const { tracing } = opts
  const ownStore = opts.store ?? (await openIdentityStore(config))
  const store = tracing ? traceMethods(ownStore, tracing, 'identity.store') : ownStore
  const ownBus = opts.bus ?? (await createBus(config.NATS_URL, 'identity'))
  const bus = tracing ? tracedBus(ownBus, tracing) : ownBus
  const tokens = new TokenIssuer(store, {
    issuer: config.JWT_ISSUER,
    audience: config.JWT_AUDIENCE,
    ttlSeconds: config.ACCESS_TOKEN_TTL_SECONDS,
  })
  await tokens.init()
  // Audit entries are written with their changes and published from the outbox (DESIGN section 15).
  let relay: AuditRelay | undefined
  const kick = () => relay?.kick()
  const identity = new IdentityService(store, bus, kick, {
    passwordCost: config.PASSWORD_HASH_COST,
    maxApiKeysPerOrganization: config.API_KEY_MAX_PER_ORG,
  })
  const sessions = new Sessions(store, tokens, config.REFRESH_TOKEN_TTL_SECONDS, kick)

  const app = createService({
    name: 'identity',
    logLevel: config.LOG_LEVEL,
    compileSchemas: config.SCHEMA_COMPILE,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { store: () => store.check(), bus: () => bus.check() },
    metrics: opts.metrics && { registry: opts.metrics, connections: busConnection(bus) },
    ...(tracing ? { tracing } : {}),
  })
  relay = busAuditRelay(store, bus, app.log, config)
  // The browser session's refresh cookie (routes/auth.ts); nothing else reads cookies.
  await app.register(cookie)

  if (config.BOOTSTRAP_ADMIN_EMAIL && config.BOOTSTRAP_ADMIN_PASSWORD && config.BOOTSTRAP_ORG_NAME) {
    const result = await identity.bootstrap({
      email: config.BOOTSTRAP_ADMIN_EMAIL,
      password: config.BOOTSTRAP_ADMIN_PASSWORD,
      name: config.BOOTSTRAP_ADMIN_NAME,
      orgName: config.BOOTSTRAP_ORG_NAME,
    })
    app.log.info(
      { userId: result.user._id, organizationId: result.organization?._id, created: result.created },
      'bootstrap admin',
    )
  }

  const deps: IdentityDeps = {
    config,
    identity,
    tokens,
    sessions,
  }
  authRoutes(app, deps)
  organizationRoutes(app, deps)
  internalRoutes(app, deps)

  app.addHook('onReady', async () => relay?.start())
  // The relay stops first (an entry it has not sent stays in the outbox for the next start).
  app.addHook('onClose', async () => {
    await relay?.stop()
    if (!opts.bus) await ownBus.close()
    if (!opts.store) await ownStore.close()
  })
  return app
}
