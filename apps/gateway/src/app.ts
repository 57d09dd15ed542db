import { readFileSync } from 'node:fs'
import type { IncomingHttpHeaders } from 'node:http'
import { Readable } from 'node:stream'
import proxy, { type FastifyHttpProxyOptions } from '@fastify/http-proxy'
import {
  type ApiKeyRevokedEvent,
  AppError,
  type CallerContext,
  CONTEXT_HEADER,
  INTERNAL_HEADER_PREFIX,
  type MembershipChangedEvent,
  SUBJECTS,
} from '@pm/contracts'
import { createBus, type EventBus } from '@pm/bus'
import { ContextSigner, createService, errorBody, type Service } from '@pm/kit'
import type { FastifyRequest } from 'fastify'
import { Redis } from 'ioredis'
import { Authenticator } from './auth.ts'
import type { GatewayConfig } from './config.ts'
import { docsRoutes, isDocsRoute } from './docs.ts'
import { IdentityClient } from './identityClient.ts'
import { buildPolicyLookup, type PolicyMatch, scopesForRole, type Upstream } from './policy.ts'
import { type LimitOutcome, RateLimits, rateLimitHeaders } from './rateLimits.ts'

export { loadGatewayConfig, GatewayConfigSchema, type GatewayConfig } from './config.ts'
export { ROUTES, type RoutePolicy } from './policy.ts'

export interface GatewayAppOptions {
  config: GatewayConfig
  bus?: EventBus
  logStream?: NodeJS.WritableStream
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

const DEFAULT_BODY_LIMIT = 1024 * 1024

/** Reads a streamed request body into memory, refusing more than `limit` bytes. */
function readBody(stream: Readable, limit: number): Promise<Buffer> {
  // Events rather than an async iterator: this runs on every invoke, and the body is small.
  if (stream.readableEnded) return Promise.resolve(Buffer.alloc(0))
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
      size += buf.length
      if (size > limit) {
        cleanup()
        stream.resume()
        reject(new AppError('PAYLOAD_TOO_LARGE', 'request body is too large'))
        return
      }
      chunks.push(buf)
    }
    const onEnd = () => {
      cleanup()
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size))
    }
    const onError = (err: Error) => {
      cleanup()
      reject(err)
    }
    const cleanup = () => {
      stream.off('data', onData)
      stream.off('end', onEnd)
      stream.off('error', onError)
    }
    stream.on('data', onData)
    stream.on('end', onEnd)
    stream.on('error', onError)
  })
}

function parseJson(body: Buffer): Record<string, unknown> | null {
  if (body.length === 0) return null
  try {
    const parsed: unknown = JSON.parse(body.toString('utf8'))
    return parsed && typeof parsed === 'object' ? (parsed as Record<string, unknown>) : null
  } catch {
    return null // the service answers the malformed body with its own 400
  }
}

function bodyField(request: FastifyRequest, field: string): string | undefined {
  const value = request.peekedBody?.[field]
  return typeof value === 'string' ? value : undefined
}

function queryField(request: FastifyRequest, field: string): string | undefined {
  const value = (request.query as Record<string, unknown> | undefined)?.[field]
  return typeof value === 'string' ? value : undefined
}

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

  const bus = opts.bus ?? (await createBus(config.NATS_URL, 'gateway'))
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
  const limits = new RateLimits(redis)
  const identity = new IdentityClient(config.IDENTITY_URL, config.INTERNAL_AUTH_SECRET)
  const auth = new Authenticator(identity, {
    identityUrl: config.IDENTITY_URL,
    issuer: config.JWT_ISSUER,
    audience: config.JWT_AUDIENCE,
    keyCacheTtlMs: config.API_KEY_CACHE_TTL_MS,
    membershipCacheTtlMs: config.MEMBERSHIP_CACHE_TTL_MS,
  })
  bus.onBroadcast(SUBJECTS.apiKeyRevoked, (data) => auth.revoked((data as ApiKeyRevokedEvent).hash))
  bus.onBroadcast(SUBJECTS.membershipChanged, (data) => {
    const { organizationId, userId } = data as MembershipChangedEvent
    auth.membershipChanged(organizationId, userId)
  })

  const renderUrls = config.RENDER_URLS.split(',').map((u) => u.trim())
  let renderTurn = 0
  const upstreams: Record<Exclude<Upstream, 'render'>, string> = {
    identity: config.IDENTITY_URL,
    prompts: config.PROMPTS_URL,
    webhooks: config.WEBHOOKS_URL,
  }
  const upstreamFor = (u: Upstream): string => {
    if (u !== 'render') return upstreams[u]
    renderTurn = (renderTurn + 1) % renderUrls.length
    return renderUrls[renderTurn] ?? config.PROMPTS_URL
  }

  const lookup = buildPolicyLookup()
  // One signed token per caller, reused for a while (the request id travels in x-request-id).
  const contexts = new ContextSigner(config.INTERNAL_AUTH_SECRET)
  const app = createService({
    name: 'gateway',
    logLevel: config.LOG_LEVEL,
    internalSecret: config.INTERNAL_AUTH_SECRET,
    logStream: opts.logStream,
    requireContext: false,
    https,
    trustProxy: trustProxy && trustProxy.length > 0 ? trustProxy : false,
    readiness: Object.fromEntries(
      [...Object.entries(upstreams), ...renderUrls.map((u, i) => [`render${i}`, u] as const)].map(
        ([name, base]) => [
          name,
          async () => {
            const res = await fetch(new URL('/health/live', base), { signal: AbortSignal.timeout(2_000) })
            if (!res.ok) throw new Error(`answered ${res.status}`)
          },
        ],
      ),
    ),
  })
  app.decorateRequest('policyMatch', null)
  app.decorateRequest('contextToken', null)
  app.decorateRequest('limitOutcome', null)
  app.decorateRequest('peekedBody', null)
  app.decorateRequest('peekedLength', null)
  app.decorateRequest('loginEmail', null)

  const limit = async (
    request: FastifyRequest,
    name: string,
    key: string,
    points: number,
    duration: number,
  ) => {
    request.limitOutcome = await limits.consume(name, key, points, duration)
  }

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
    const needsBody =
      request.body instanceof Readable &&
      String(request.headers['content-type'] ?? '').includes('json') &&
      (policy.limit === 'login' ||
        policy.target !== undefined ||
        (policy.org === 'context' && policy.auth !== 'public'))
    if (needsBody) {
      // Read once, peek at the fields the gateway needs, and forward the very same bytes.
      const raw = await readBody(request.body as Readable, policy.bodyLimit ?? DEFAULT_BODY_LIMIT)
      request.peekedBody = parseJson(raw)
      request.peekedLength = raw.length
      request.body = Readable.from([raw])
    }

    const caller: CallerContext = { kind: 'anonymous', scopes: [], requestId: request.id }
    if (policy.auth === 'public') {
      if (policy.limit === 'login') {
        await limit(
          request,
          'login-ip',
          request.ip,
          config.RATE_LIMIT_LOGIN_IP_POINTS,
          config.RATE_LIMIT_LOGIN_DURATION_S,
        )
        // Per email, only failures count: a point is taken now (atomic, so parallel guesses
        // cannot slip past the limit) and given back when the login succeeds.
        const email = bodyField(request, 'email')?.trim().toLowerCase()
        if (email) {
          await limit(
            request,
            'login-email',
            email,
            config.RATE_LIMIT_LOGIN_EMAIL_POINTS,
            config.RATE_LIMIT_LOGIN_DURATION_S,
          )
          request.loginEmail = email
        }
      } else if (policy.limit === 'public') {
        await limit(
          request,
          'public-ip',
          request.ip,
          config.RATE_LIMIT_PUBLIC_POINTS,
          config.RATE_LIMIT_PUBLIC_DURATION_S,
        )
      }
    } else {
      const credential = await auth.authenticate(request.headers.authorization, request.id)
      if (credential.kind === 'apiKey') {
        if (policy.auth === 'user')
          throw new AppError('USER_TOKEN_REQUIRED', 'this operation needs a user access token')
        const { key } = credential
        if (policy.scope && !key.scopes.includes(policy.scope)) {
          throw new AppError('INSUFFICIENT_SCOPE', `the API key lacks the ${policy.scope} scope`)
        }
        const rl = key.rateLimit ?? {
          points: config.RATE_LIMIT_KEY_POINTS,
          durationSeconds: config.RATE_LIMIT_KEY_DURATION_S,
        }
        await limit(request, 'api-key', key._id, rl.points, rl.durationSeconds)
        caller.kind = 'apiKey'
        caller.apiKeyId = key._id
        caller.scopes = key.scopes
        caller.organizationId = key.organizationId
        if (policy.org === 'path' && params.id !== key.organizationId)
          throw new AppError('NOT_FOUND', 'organization not found')
        if (policy.org === 'context') {
          const asked = queryField(request, 'organizationId') ?? bodyField(request, 'organizationId')
          if (asked !== undefined && asked !== key.organizationId)
            throw new AppError('NOT_FOUND', 'organization not found')
        }
      } else {
        caller.kind = 'user'
        caller.userId = credential.userId
        let organizationId: string | undefined
        if (policy.org === 'path') organizationId = params.id
        else if (policy.org === 'context') {
          organizationId =
            queryField(request, 'organizationId') ?? bodyField(request, 'organizationId') ?? credential.org
          if (!organizationId) {
            throw new AppError('VALIDATION_ERROR', 'organizationId is required with an access token', [
              { path: '/query/organizationId', message: 'is required' },
            ])
          }
        }
        if (organizationId) {
          const role = await auth.activeRole(organizationId, credential.userId, request.id)
          if (!role) throw new AppError('NOT_FOUND', 'organization not found')
          caller.organizationId = organizationId
          caller.role = role
          caller.scopes = scopesForRole(role)
          if (policy.scope && !caller.scopes.includes(policy.scope)) {
            throw new AppError('INSUFFICIENT_SCOPE', `your role does not allow ${policy.scope}`)
          }
        }
      }
    }
    if (policy.target) {
      const target =
        bodyField(request, policy.target) ??
        (policy.target === 'targetOrganizationId' ? caller.organizationId : undefined)
      if (target && caller.userId) {
        const role = await auth.activeRole(target, caller.userId, request.id)
        if (!role)
          throw new AppError(
            'MEMBERSHIP_REQUIRED',
            'an ACTIVE membership in the target organization is required',
          )
        caller.targetOrganizationId = target
      }
    }
    request.contextToken = contexts.sign(caller)
    // Headers set before the proxy runs survive: reply-from adds the upstream's to them.
    if (request.limitOutcome) reply.headers(rateLimitHeaders(request.limitOutcome))
  })

  app.addHook('onResponse', async (request, reply) => {
    if (request.loginEmail && reply.statusCode < 400) {
      await limits
        .reward(
          'login-email',
          request.loginEmail,
          config.RATE_LIMIT_LOGIN_EMAIL_POINTS,
          config.RATE_LIMIT_LOGIN_DURATION_S,
        )
        .catch((err: unknown) => request.log.warn({ err }, 'could not refund a login attempt'))
    }
  })

  const proxyOptions: FastifyHttpProxyOptions = {
    upstream: '',
    prefix: '/api/v1',
    rewritePrefix: '/api/v1',
    httpMethods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'],
    // The gateway's own access line covers the request; reply-from's two info lines per proxied
    // request would triple the log volume.
    disableRequestLogging: true,
    undici: {
      connections: 128,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      headersTimeout: config.UPSTREAM_TIMEOUT_MS,
      bodyTimeout: config.UPSTREAM_TIMEOUT_MS,
    },
    replyOptions: {
      getUpstream: (request) => {
        const match = request.policyMatch
        if (!match) throw new AppError('NOT_FOUND', 'not found')
        return upstreamFor(match.policy.upstream)
      },
      rewriteRequestHeaders: (request, headers) => {
        const out: IncomingHttpHeaders = { ...(headers as IncomingHttpHeaders), 'x-request-id': request.id }
        delete out.authorization
        delete out.connection
        if (request.contextToken) out[CONTEXT_HEADER] = request.contextToken
        if (request.peekedLength !== null) out['content-length'] = String(request.peekedLength)
        return out
      },
      rewriteHeaders: (headers) => {
        const out = { ...headers }
        delete out['content-length']
        delete out['transfer-encoding']
        return out
      },
      onResponse: (request, reply, res) => {
        envelope(reply, res as unknown as UpstreamResponse).catch((err: unknown) => {
          request.log.error({ err }, 'reading upstream response failed')
          if (!reply.sent)
            reply.code(503).send(errorBody('SERVICE_UNAVAILABLE', 'upstream response failed', request.id))
        })
      },
      onError: (reply, { error }) => {
        const timeout = (error as { code?: string }).code === 'FST_REPLY_FROM_GATEWAY_TIMEOUT'
        reply.log.warn({ err: error }, 'upstream failed')
        reply
          .code(timeout ? 504 : 503)
          .send(
            timeout
              ? errorBody('UPSTREAM_TIMEOUT', 'the upstream service timed out', reply.request.id)
              : errorBody('SERVICE_UNAVAILABLE', 'the upstream service is unavailable', reply.request.id),
          )
      },
    },
  }
  await app.register(proxy, proxyOptions)
  docsRoutes(app)

  app.addHook('onClose', async () => {
    await identity.close()
    redis?.disconnect()
    if (!opts.bus) await bus.close()
  })
  return app
}

/** Successful JSON bodies become {"data": ...}; everything else passes through unchanged. */
interface UpstreamResponse {
  statusCode: number
  stream: Readable
}

function envelope(
  reply: { getHeader(name: string): unknown; send(payload: unknown): unknown },
  res: UpstreamResponse,
): Promise<void> {
  const type = String(reply.getHeader('content-type') ?? '')
  if (
    res.statusCode < 200 ||
    res.statusCode >= 300 ||
    res.statusCode === 204 ||
    !type.includes('application/json')
  ) {
    reply.send(res.stream)
    return Promise.resolve()
  }
  // Events rather than an async iterator, and one copy: this runs on every invoke.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [ENVELOPE_OPEN]
    let size = ENVELOPE_OPEN.length + ENVELOPE_CLOSE.length
    res.stream.on('data', (chunk: Buffer | string) => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
      chunks.push(buf)
      size += buf.length
    })
    res.stream.once('error', reject)
    res.stream.once('end', () => {
      if (chunks.length === 1) {
        chunks.push(ENVELOPE_NULL)
        size += ENVELOPE_NULL.length
      }
      chunks.push(ENVELOPE_CLOSE)
      reply.send(Buffer.concat(chunks, size))
      resolve()
    })
  })
}

const ENVELOPE_OPEN = Buffer.from('{"data":')
const ENVELOPE_NULL = Buffer.from('null')
const ENVELOPE_CLOSE = Buffer.from('}')
