import { type ApiKeyRevokedEvent, type MembershipChangedEvent, SUBJECTS } from '@pm/contracts'
import { createBus, type EventBus } from '@pm/bus'
import { createService, type Service } from '@pm/kit'
import type { IdentityConfig } from './config.ts'
import { IdentityService } from './domain/identity.ts'
import { Sessions } from './domain/sessions.ts'
import { TokenIssuer } from './domain/tokens.ts'
import { authRoutes } from './routes/auth.ts'
import { internalRoutes } from './routes/internal.ts'
import { organizationRoutes } from './routes/organizations.ts'
import { openIdentityStore } from './store/open.ts'
import type { ApiKeyRecord, IdentityStore } from './store/types.ts'

export { loadIdentityConfig, IdentityConfigSchema, type IdentityConfig } from './config.ts'
export type { IdentityStore } from './store/types.ts'
export { SqliteIdentityStore } from './store/sqlite.ts'
export { MongoIdentityStore } from './store/mongo.ts'
export { openIdentityStore } from './store/open.ts'
export { IdentityService } from './domain/identity.ts'
export { Sessions } from './domain/sessions.ts'

export interface IdentityAppOptions {
  config: IdentityConfig
  /** Injected by the embedded launcher (shared in-process bus) or tests; owned by the caller. */
  bus?: EventBus
  store?: IdentityStore
  logStream?: NodeJS.WritableStream
}

export interface IdentityDeps {
  config: IdentityConfig
  store: IdentityStore
  identity: IdentityService
  tokens: TokenIssuer
  sessions: Sessions
  /** Tells every gateway replica to drop the key now (its cache would keep it a while). */
  onRevoked(key: ApiKeyRecord): void
  /** Tells every gateway replica to drop its cached copy of this membership. */
  onMembershipChanged(organizationId: string, userId: string): void
}

export async function buildApp(opts: IdentityAppOptions): Promise<Service> {
  const { config } = opts
  const store = opts.store ?? (await openIdentityStore(config))
  const bus = opts.bus ?? (await createBus(config.NATS_URL, 'identity'))
  const tokens = new TokenIssuer(store, {
    issuer: config.JWT_ISSUER,
    audience: config.JWT_AUDIENCE,
    ttlSeconds: config.ACCESS_TOKEN_TTL_SECONDS,
  })
  await tokens.init()
  const identity = new IdentityService(store)
  const sessions = new Sessions(store, tokens, config.REFRESH_TOKEN_TTL_SECONDS)

  const app = createService({
    name: 'identity',
    logLevel: config.LOG_LEVEL,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    readiness: { store: () => store.check(), bus: () => bus.check() },
  })

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
    store,
    identity,
    tokens,
    sessions,
    onRevoked: (key) => {
      const event: ApiKeyRevokedEvent = { keyId: key._id, hash: key.hash, organizationId: key.organizationId }
      bus.broadcast(SUBJECTS.apiKeyRevoked, event)
    },
    onMembershipChanged: (organizationId, userId) => {
      const event: MembershipChangedEvent = { organizationId, userId }
      bus.broadcast(SUBJECTS.membershipChanged, event)
    },
  }
  authRoutes(app, deps)
  organizationRoutes(app, deps)
  internalRoutes(app, deps)

  app.addHook('onClose', async () => {
    if (!opts.bus) await bus.close()
    if (!opts.store) await store.close()
  })
  return app
}
