import { readFileSync } from 'node:fs'
import proxy from '@fastify/http-proxy'
import {
  type ApiKeyRevokedEvent,
  AppError,
  INTERNAL_HEADER_PREFIX,
  type MembershipChangedEvent,
  SUBJECTS,
} from '@pm/contracts'
import { busConnection, createBus, type EventBus, tracedBus } from '@pm/bus'
import {
  ContextSigner,
  collectWhileOpen,
  createService,
  Metrics,
  type Service,
  type Tracing,
  traceMethods,
} from '@pm/kit'
import { Redis } from 'ioredis'
import { request } from 'undici'
import { checkKeyAllowed, resolveCaller } from './access.ts'
import { Authenticator } from './auth.ts'
import { peekBody } from './body.ts'
import type { GatewayConfig } from './config.ts'
import { parseCorsOrigins, registerCors } from './cors.ts'
import { dashboardDir, dashboardRoutes } from './dashboard.ts'
import { docsRoutes, isDocsRoute, scalarDir } from './docs.ts'
import { IdentityClient } from './identityClient.ts'
import { buildParamsChecks, checkParams } from './inputs.ts'
import { KeyGuard } from './keyGuard.ts'
import { RequestLimits } from './limits.ts'
import { buildPolicyLookup, type PolicyMatch } from './policy.ts'
import { proxyOptions, Upstreams } from './proxy.ts'
import { type LimitOutcome, RateLimits, rateLimitHeaders } from './rateLimits.ts'

export { loadGatewayConfig, GatewayConfigSchema, type GatewayConfig } from './config.ts'
export { ROUTES, type RoutePolicy } from './policy.ts'

/** How much longer than the longest upstream wait a client's connection may sit idle. */
const IDLE_MARGIN_MS = 30_000

export interface GatewayAppOptions {
  config: GatewayConfig
  bus?: EventBus
  logStream?: NodeJS.WritableStream
  /** This process's metrics (METRICS_PORT); none: nothing observed. */
  metrics?: Metrics
  /** This process's tracing (OTEL_EXPORTER_OTLP_ENDPOINT); none: nothing traced. */
  tracing?: Tracing
}

declare module 'fastify' {
  interface FastifyRequest {
    policyMatch: PolicyMatch | null
    contextToken: string | null
    limitOutcome: LimitOutcome | null
    /** The JSON body, when the gateway had to read it (organizationId, email, fork target). */
    peekedBody: Record<string, unknown> | null
    peekedLength: number | null
    /** The email whose failed-login budget this request consumed (refunded on success). */
    loginEmail: string | null
  }
}

/**
 * Wires the gateway's parts: transport and body (body.ts), access (access.ts), limits
 * (limits.ts), the route table (policy.ts, from the declarations in @pm/contracts), the
 * envelope (envelope.ts) and the proxy (proxy.ts).
 */
export async function buildApp(opts: GatewayAppOptions): Promise<Service> {
  const { config } = opts
  const requireHttps = config.REQUIRE_HTTPS ?? config.NODE_ENV === 'production'
  const https =
    config.TLS_CERT_FILE && config.TLS_KEY_FILE
      ? { cert: readFileSync(config.TLS_CERT_FILE), key: readFileSync(config.TLS_KEY_FILE) }
      : undefined
  const trustProxy = config.TRUSTED_PROXIES?.split(',')
    .map((s) => s.trim())
    .filter(Boolean)

  const { metrics, tracing } = opts
  metrics?.declare('gateway')
  const ownBus = opts.bus ?? (await createBus(config.NATS_URL, 'gateway'))
  const bus = tracing ? tracedBus(ownBus, tracing) : ownBus
  const redis = config.REDIS_URL
    ? new Redis(config.REDIS_URL, {
        enableOfflineQueue: false,
        maxRetriesPerRequest: 1,
        lazyConnect: false,
        connectionName: 'pm-gateway',
        // Rate-limit calls of one event-loop turn go to Redis in one write (one per request otherwise).
        enableAutoPipelining: true,
      })
    : undefined
  redis?.on('error', () => {}) // the insurance limiter covers outages; ioredis keeps reconnecting
  const rateLimits = new RateLimits(
    redis,
    metrics && ((limiter) => metrics.rateLimitRefusals.inc({ limiter })),
  )
  // With tracing on, the steps that wait on another process are spans: each limit kept in Redis
  // (gateway.limits.*) and each question to identity (gateway.identity.*, a credential or
  // membership the caches did not answer). Checks answered from memory are not: a span costs
  // more than they do, and a sampled trace would be mostly them.
  const limits = new RequestLimits(
    tracing && redis ? traceMethods(rateLimits, tracing, 'gateway.limits') : rateLimits,
    config,
  )
  const keyGuard = new KeyGuard(rateLimits, {
    points: config.RATE_LIMIT_BAD_KEY_IP_POINTS,
    durationSeconds: config.RATE_LIMIT_BAD_KEY_DURATION_S,
  })
  const identity = new IdentityClient(config.IDENTITY_URL, config.INTERNAL_AUTH_SECRET)
  const auth = new Authenticator(tracing ? traceMethods(identity, tracing, 'gateway.identity') : identity, {
    identityUrl: config.IDENTITY_URL,
    issuer: config.JWT_ISSUER,
    audience: config.JWT_AUDIENCE,
    clockToleranceSeconds: config.JWT_CLOCK_TOLERANCE_SECONDS,
    keyCacheTtlMs: config.API_KEY_CACHE_TTL_MS,
    membershipCacheTtlMs: config.MEMBERSHIP_CACHE_TTL_MS,
  })
  bus.onBroadcast(SUBJECTS.apiKeyRevoked, (data) => auth.revoked((data as ApiKeyRevokedEvent).hash))
  bus.onBroadcast(SUBJECTS.membershipChanged, (data) => {
    const { organizationId, userId } = data as MembershipChangedEvent
    auth.membershipChanged(organizationId, userId)
  })

  const upstreams = new Upstreams(config)

  const lookup = buildPolicyLookup()
  const paramsChecks = buildParamsChecks()
  // One signed token per caller, reused for a while (the request id travels in x-request-id).
  const contexts = new ContextSigner(config.INTERNAL_AUTH_SECRET)
  const app = createService({
    name: 'gateway',
    logLevel: config.LOG_LEVEL,
    compileSchemas: config.SCHEMA_COMPILE,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    requireContext: false,
    parseJsonBodies: false,
    // A client that stops reading an answer held its connection, and what was buffered for it,
    // for good (a streamed run: some 10 MB each). Longer than any upstream's answer may take.
    idleTimeoutMs: Math.max(config.UPSTREAM_TIMEOUT_MS, config.RUNS_UPSTREAM_TIMEOUT_MS) + IDLE_MARGIN_MS,
    https,
    trustProxy: trustProxy && trustProxy.length > 0 ? trustProxy : false,
    // The public route's template (the proxy itself is one wildcard route).
    route: (request) => request.policyMatch?.policy.url ?? localRoute(request.routeOptions.url),
    ...(tracing ? { tracing } : {}),
    metrics: metrics && {
      registry: metrics,
      connections: {
        ...busConnection(bus),
        ...(redis ? { redis: () => redis.status === 'ready' } : {}),
      },
    },
    readiness: Object.fromEntries(
      upstreams.named().map(([name, base]) => [
        name,
        // undici's `request` (the identity client's undici), not the global fetch, which would
        // load the fetch of the undici that Node bundles into the gateway for this alone.
        async () => {
          const res = await request(new URL('/health/live', base), { signal: AbortSignal.timeout(2_000) })
          await res.body.dump()
          if (res.statusCode < 200 || res.statusCode > 299) throw new Error(`answered ${res.statusCode}`)
        },
      ]),
    ),
  })
  if (metrics) {
    const hits = Metrics.follow(metrics.keyCache, { result: 'hit' }, () => auth.keyStats.hits)
    const misses = Metrics.follow(metrics.keyCache, { result: 'miss' }, () => auth.keyStats.misses)
    collectWhileOpen(app, metrics, () => {
      hits()
      misses()
    })
  }
  // Before the gateway's own hooks: a listed origin's preflight is answered first.
  await registerCors(app, parseCorsOrigins(config.CORS_ORIGINS))
  app.decorateRequest('policyMatch', null)
  app.decorateRequest('contextToken', null)
  app.decorateRequest('limitOutcome', null)
  app.decorateRequest('peekedBody', null)
  app.decorateRequest('peekedLength', null)
  app.decorateRequest('loginEmail', null)

  // Transport, routing and credentials: before the body is read.
  app.addHook('onRequest', async (request, reply) => {
    if (request.protocol === 'https')
      reply.header('strict-transport-security', 'max-age=31536000; includeSubDomains')
    const path = request.url.split('?', 1)[0] ?? ''
    if (path.startsWith('/health/')) return
    if (requireHttps && request.protocol !== 'https') throw new AppError('HTTPS_REQUIRED', 'use HTTPS')
    for (const name of Object.keys(request.headers)) {
      if (name.startsWith(INTERNAL_HEADER_PREFIX)) delete request.headers[name]
    }
    const match = lookup(request.method, request.url)
    if (!match) {
      if (path.startsWith('/api/') && !isDocsRoute(request.method, path))
        throw new AppError('NOT_FOUND', `route ${request.method} ${path} not found`)
      return
    }
    request.policyMatch = match
  })

  // Workspace, scopes and limits: after the body is available (organizationId may be in it).
  app.addHook('preHandler', async (request, reply) => {
    const match = request.policyMatch
    if (!match) return
    const { policy, params } = match
    // Ids the gateway itself uses are checked before any internal call (issue 14, findings 1, 3),
    // and after the credential: a request without a good one is 401 whatever its path holds.
    const check = () => checkParams(paramsChecks, policy.method, policy.url, params)
    if (policy.auth === 'public') {
      check()
      await peekBody(request, policy, null)
      await limits.public(request, policy)
    }
    const credential =
      policy.auth === 'public'
        ? null
        : await keyGuard.run(request.ip, auth.needsLookup(request.headers.authorization), () =>
            auth.authenticate(request.headers.authorization, request.id),
          )
    if (credential) {
      check()
      // What a key may not do here is refused before its body is read (403, not 400 or 413).
      if (credential.kind === 'apiKey') checkKeyAllowed(policy, credential.key)
      // The credential first: its kind decides whether the body must be read (body.ts).
      await peekBody(request, policy, credential.kind)
    }
    const caller = await resolveCaller(
      policy,
      params,
      credential,
      {
        queryOrganizationId: (request.query as Record<string, unknown> | undefined)?.organizationId,
        body: request.peekedBody,
      },
      {
        activeMember: (organizationId, userId) => auth.activeMember(organizationId, userId, request.id),
        limitApiKey: (key) => limits.apiKey(request, key),
      },
      request.id,
    )
    request.contextToken = contexts.sign(caller)
    // Headers set before the proxy runs survive: reply-from adds the upstream's to them.
    if (request.limitOutcome) reply.headers(rateLimitHeaders(request.limitOutcome))
  })

  app.addHook('onResponse', async (request, reply) => limits.settle(request, reply.statusCode))

  await app.register(proxy, proxyOptions(config, upstreams, tracing))
  await docsRoutes(app, scalarDir())
  await dashboardRoutes(app, dashboardDir(config.DASHBOARD_DIR))

  app.addHook('onClose', async () => {
    await identity.close()
    redis?.disconnect()
    if (!opts.bus) await ownBus.close()
  })
  return app
}

/**
 * The label of a route the gateway answers itself: the dashboard's hashed assets under one
 * (`/assets/*`, not one per file and release), its page (the SPA fallback) as `/*`; any other
 * wildcard (the proxy's, for a path no public route declares) stays unmatched.
 */
export function localRoute(url: string | undefined): string | undefined {
  if (url === undefined) return undefined
  if (url.startsWith('/assets/')) return '/assets/*'
  if (url === '/*') return '/*'
  return url.includes('*') ? undefined : url
}
