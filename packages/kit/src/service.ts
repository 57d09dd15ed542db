import { randomUUID } from 'node:crypto'
import {
  ALL_SCHEMAS,
  AppError,
  type CallerContext,
  CONTEXT_HEADER,
  type ErrorBody,
  type ErrorCode,
  isErrorCode,
  patternProblem,
} from '@pm/contracts'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import Fastify, {
  LogController,
  type FastifyError,
  type FastifyInstance,
  type FastifyReply,
  type FastifyRequest,
} from 'fastify'
import { destination } from 'pino'
import { parseJsonBody } from './body.ts'
import { ContextVerifier } from './context.ts'
import { type Metrics, observeRequests } from './metrics.ts'
import { type SchemaCompilers, schemaCompilers } from './schemaCompilers.ts'
import { type Tracing, traceRequests } from './tracing.ts'

declare module 'fastify' {
  interface FastifyRequest {
    /** The verified caller (from the gateway's signed context). */
    caller: CallerContext
  }
  interface FastifyContextConfig {
    /** 'none': no signed caller context needed (health). Default: required. */
    auth?: 'none'
  }
}

/** How long one readiness check may take before it counts as failed. */
export const READINESS_CHECK_MS = 2_000

export type ReadinessCheck = () => Promise<void> | void

export interface ServiceOptions {
  name: string
  logLevel?: string
  /**
   * When the routes' schemas compile (SCHEMA_COMPILE): 'lazy' (the default), on each route's
   * first request; 'eager', every one before the service is ready, as a start that fails on a
   * schema that does not compile and a first request with nothing left to compile.
   */
  compileSchemas?: 'lazy' | 'eager'
  /** Shared secret that signs the caller context. */
  internalSecret: string
  /** Log destination override (tests read the log lines). */
  logStream?: NodeJS.WritableStream
  bodyLimit?: number
  /** How long a client may take to send a whole request (REQUEST_TIMEOUT_MS by default; tests shorten it). */
  requestTimeoutMs?: number
  /**
   * A connection on which nothing is read or written for this long is closed, a request in
   * flight too (default none: the services' only clients are the gateway and each other). It
   * must exceed the longest wait for an answer; the gateway's clients need it (app.ts).
   */
  idleTimeoutMs?: number
  /** Checks for /health/ready; each throws when its dependency is not usable. */
  readiness?: Record<string, ReadinessCheck>
  /**
   * false for the gateway, which authenticates clients itself. Default true. With tracing on,
   * false also makes it the service where traces start (the others only continue them).
   */
  requireContext?: boolean
  https?: { cert: Buffer; key: Buffer }
  trustProxy?: string[] | boolean
  /** Metrics of this process (none: nothing is observed, not even a hook is added). */
  metrics?: ServiceMetrics
  /** Tracing of this process (none: no hook is added). */
  tracing?: Tracing
  /** The route template for metrics and span names; Fastify's route by default. */
  route?: (request: FastifyRequest) => string | undefined
  /**
   * false for the gateway: it forwards bodies as streams and reads the ones it needs itself,
   * with the same parseJsonBody. Default true: JSON bodies are read by parseJsonBody.
   */
  parseJsonBodies?: boolean
}

export interface ServiceMetrics {
  registry: Metrics
  /** Connections to servers, reported as pm_connection_up{service, connection}. */
  connections?: Record<string, () => boolean>
}

export type Service = FastifyInstance<
  import('node:http').Server,
  import('node:http').IncomingMessage,
  import('node:http').ServerResponse,
  import('fastify').FastifyBaseLogger,
  TypeBoxTypeProvider
>

/**
 * One compact access line per request instead of Fastify's two ("incoming request" and
 * "request completed" with the whole req/res): request logging was the largest single cost on
 * the invoke path (bench/README.md). Errors keep Fastify's default lines.
 */
class AccessLog extends LogController {
  override incomingRequest(): void {}

  override requestCompleted(
    error: Error | null | undefined,
    request: FastifyRequest,
    reply: FastifyReply,
    metadata?: Record<string, unknown>,
  ): void {
    if (error) {
      if (clientGone(request)) logClientGone(request, error)
      else super.requestCompleted(error, request, reply, metadata)
      return
    }
    request.log.info(
      {
        method: request.method,
        url: request.url,
        // request.ip with trustProxy reads the socket, which a client that has already hung up
        // no longer has (that threw here and ended the process).
        remoteAddress: request.socket ? request.ip : undefined,
        statusCode: reply.statusCode,
        responseTime: Math.round(reply.elapsedTime * 100) / 100,
      },
      'request completed',
    )
  }
}

/**
 * Standard output, written in batches and synchronously: at a few thousand requests a second,
 * one write per log line (and, with pino's default asynchronous writes, one thread-pool
 * hand-off per write) was a measurable share of a service's CPU (bench/README.md). A line waits
 * at most 200 ms; the rest is flushed when the service closes or the process exits. Writes stay
 * within PIPE_BUF (4096 bytes), so that lines of processes sharing one stdout never interleave
 * mid-line. One for the process: the embedded default's seven services share its buffer and its
 * flush timer (which writes even when there is nothing to write, one system call each time).
 */
let processStdout: ReturnType<typeof destination> | undefined
function logDestination(): ReturnType<typeof destination> {
  processStdout ??= destination({ dest: 1, sync: true, minLength: 2048, maxWrite: 4096, periodicFlush: 200 })
  return processStdout
}

const REQUEST_ID = /^[A-Za-z0-9._:-]{1,128}$/

export const LOG_REDACT = [
  'req.headers.authorization',
  `req.headers["${CONTEXT_HEADER}"]`,
  'req.headers.cookie',
  'password',
  'refreshToken',
  'accessToken',
  'key',
  'secret',
]

export function requestIdFrom(header: unknown): string {
  return typeof header === 'string' && REQUEST_ID.test(header) ? header : randomUUID()
}

export function errorBody(code: ErrorCode, message: string, requestId: string, details?: unknown): ErrorBody {
  return { error: { code, message, requestId, ...(details === undefined ? {} : { details }) } }
}

/**
 * Ajv's message, with a hint where a common mistake is likely: a field the body does not take
 * (template values sent beside `variables` instead of inside it).
 */
function fieldMessage(
  keyword: string,
  message: string | undefined,
  location: string,
  instancePath: string,
  extra: string | undefined,
  pattern?: string,
): string {
  // The contract's name and text rules, said in words rather than as their patterns.
  const problem = keyword === 'pattern' && pattern !== undefined ? patternProblem(pattern) : undefined
  if (problem) return problem
  if (keyword === 'additionalProperties' && location === 'body' && instancePath === '' && extra) {
    return `unknown field "${extra}": this body takes only the fields the route declares (template values go inside "variables": {"variables": {"${extra}": ...}})`
  }
  if (keyword === 'additionalProperties' && extra) return `unknown field "${extra}"`
  return message ?? 'invalid'
}

/** Maps anything thrown in a handler to the error body of DESIGN section 3. */
export function toErrorResponse(
  err: FastifyError | AppError | Error,
  requestId: string,
): { status: number; body: ErrorBody } {
  if (err instanceof AppError) {
    return { status: err.statusCode, body: errorBody(err.code, err.message, requestId, err.details) }
  }
  const fe = err as FastifyError
  if (fe.validation) {
    // One style for every `details.path`: a JSON pointer under its location (/body/config,
    // /query/version, /params/id), as the gateway and the services' own checks write it.
    const location = fe.validationContext === 'querystring' ? 'query' : (fe.validationContext ?? 'body')
    const details = fe.validation.map((v) => {
      const extra = (v.params as { additionalProperty?: string }).additionalProperty
      const path = `/${location}${v.instancePath || ''}${
        v.keyword === 'required' ? `/${(v.params as { missingProperty?: string }).missingProperty}` : ''
      }${v.keyword === 'additionalProperties' ? `/${extra}` : ''}`
      const pattern = (v.params as { pattern?: string }).pattern
      return { path, message: fieldMessage(v.keyword, v.message, location, v.instancePath, extra, pattern) }
    })
    return { status: 400, body: errorBody('VALIDATION_ERROR', 'request is invalid', requestId, details) }
  }
  switch (fe.code) {
    case 'FST_ERR_CTP_BODY_TOO_LARGE':
      return { status: 413, body: errorBody('PAYLOAD_TOO_LARGE', 'request body is too large', requestId) }
    case 'FST_ERR_CTP_INVALID_MEDIA_TYPE':
      return {
        status: 415,
        body: errorBody(
          'UNSUPPORTED_MEDIA_TYPE',
          'unsupported content type: send the body as JSON with "content-type: application/json"',
          requestId,
        ),
      }
    case 'FST_ERR_CTP_EMPTY_JSON_BODY':
    case 'FST_ERR_CTP_INVALID_JSON_BODY':
      return { status: 400, body: errorBody('VALIDATION_ERROR', 'body is not valid JSON', requestId) }
  }
  if (isErrorCode(fe.code)) {
    return { status: fe.statusCode ?? 500, body: errorBody(fe.code, fe.message, requestId) }
  }
  if (fe.statusCode && fe.statusCode >= 400 && fe.statusCode < 500) {
    if (fe.statusCode === 413)
      return { status: 413, body: errorBody('PAYLOAD_TOO_LARGE', 'request body is too large', requestId) }
    return { status: 400, body: errorBody('VALIDATION_ERROR', fe.message, requestId) }
  }
  return { status: 500, body: errorBody('INTERNAL_ERROR', 'internal error', requestId) }
}

/** Each instance's schema compilers, for compileSchemasNow. */
const compilersOf = new WeakMap<object, SchemaCompilers>()

/**
 * Compiles every schema of the instance's routes that no request has compiled yet (they compile
 * on a route's first use: schemaCompilers.ts); answers how many. A schema that does not compile
 * throws here. Call it after `ready()`.
 */
export function compileSchemasNow(app: object): number {
  const compilers = compilersOf.get(app)
  if (!compilers) throw new Error('not an instance made by createService')
  return compilers.compileNow()
}

/**
 * How long a client may take to send a whole request, its headers and its body; Node closes the
 * connection past it (checked every REQUEST_CHECK_MS). Fastify turns Node's own bound (5 min)
 * off: a request whose body never ends held its connection for good, and a few hundred of them
 * left the gateway without file descriptors (every other client refused). Answers are not
 * bounded by it: a streamed run goes on as long as its deadline allows. The headers keep Node's
 * own bound (60 s).
 */
// Node's own default, 5 min: an upload at the 50 MiB limit of a file import still fits at about
// 1.4 Mbit/s (2 min needed 3.5 Mbit/s).
export const REQUEST_TIMEOUT_MS = 300_000
const REQUEST_CHECK_MS = 30_000

/**
 * A Fastify instance with the conventions every service shares: JSON logs with the
 * request id, the error shape, the 404 shape, health routes, the contract schemas, and the
 * signed caller context required on every route but health.
 */
export function createService(opts: ServiceOptions): Service {
  const stdout = opts.logStream ? null : logDestination()
  const compilers = schemaCompilers()
  const requestTimeout = opts.requestTimeoutMs ?? REQUEST_TIMEOUT_MS
  const connectionsCheckingInterval = Math.min(REQUEST_CHECK_MS, Math.ceil(requestTimeout / 4))
  const app = Fastify({
    logger: {
      level: opts.logLevel ?? 'info',
      name: opts.name,
      redact: LOG_REDACT,
      stream: opts.logStream ?? stdout ?? undefined,
    },
    genReqId: (req) => requestIdFrom(req.headers['x-request-id']),
    logController: new AccessLog({ requestIdLogLabel: 'requestId' }),
    bodyLimit: opts.bodyLimit ?? 1024 * 1024,
    requestTimeout,
    ...(opts.idleTimeoutMs ? { connectionTimeout: opts.idleTimeoutMs } : {}),
    ajv: {
      // No meta-schema check of the contract's constant schemas at each start (about 45 ms of a
      // service start's 640 ms of main-thread CPU: Ajv compiles the draft-07 meta-schema, then
      // checks the 156 shared schemas against it); a unit test checks them all instead, with
      // every public route's schemas (schemaCompilers.test.ts), as config.ts does for settings.
      customOptions: {
        removeAdditional: false,
        coerceTypes: 'array',
        useDefaults: true,
        allErrors: false,
        validateSchema: false,
      },
    },
    return503OnClosing: true,
    // A URL the router cannot decode (`%ff`, a lone `%`) or a path parameter past its length is
    // answered before any hook: in the envelope with the request id, not Fastify's own body.
    frameworkErrors: (err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
      const { status, body } = toErrorResponse(err, request.id)
      reply.header('x-request-id', request.id).code(status).send(body)
    },
    schemaController: {
      compilersFactory: {
        buildValidator: compilers.buildValidator,
        buildSerializer: compilers.buildSerializer,
      },
    },
    // Node 24 applies the request timeout given to the server's constructor; set afterwards on the
    // server, as Fastify does, it was not applied.
    ...(opts.https
      ? { https: { ...opts.https, requestTimeout, connectionsCheckingInterval } }
      : { http: { requestTimeout, connectionsCheckingInterval } }),
    ...(opts.trustProxy ? { trustProxy: opts.trustProxy } : {}),
  }).withTypeProvider<TypeBoxTypeProvider>() as unknown as Service

  compilersOf.set(app, compilers)
  if (opts.compileSchemas === 'eager')
    app.addHook('onReady', async () => {
      compilers.compileNow()
    })
  for (const schema of ALL_SCHEMAS) app.addSchema(schema)

  // Bodies are JSON (or, on the CSV import, multipart); Fastify's text/plain parser would hand a
  // handler a string the gateway never read.
  app.removeContentTypeParser('text/plain')
  if (opts.parseJsonBodies !== false) {
    // Fastify matches the media type case-insensitively, without parameters: as isJsonMediaType.
    app.removeContentTypeParser('application/json')
    app.addContentTypeParser('application/json', { parseAs: 'buffer' }, (_request, body, done) => {
      try {
        done(null, parseJsonBody(body))
      } catch (err) {
        done(err as Error, undefined)
      }
    })
  }

  // On close, Fastify closes the connections idle at that moment; one whose request is still in
  // flight stays open after its answer (keep-alive: the gateway's pools, a browser) and holds the
  // close until the process's shutdown deadline cuts it (exit 1). Each is closed once it is idle.
  let idleCloser: NodeJS.Timeout | undefined
  app.addHook('preClose', (done) => {
    idleCloser = setInterval(() => app.server.closeIdleConnections(), 100)
    idleCloser.unref()
    done()
  })
  app.addHook('onClose', (_instance, done) => {
    clearInterval(idleCloser)
    done()
  })

  if (stdout) {
    // The last lines (a crash's included) still reach the output when the process exits.
    const flush = () => stdout.flushSync()
    process.on('exit', flush)
    app.addHook('onClose', async () => {
      process.off('exit', flush)
      flush()
    })
  }

  // First of all hooks: everything after runs inside the request's span. Traces start where
  // requests come in from outside (the gateway, which needs no caller context); the services
  // behind it continue the ones it sampled.
  if (opts.tracing)
    traceRequests(app, opts.tracing, {
      service: opts.name,
      roots: opts.requireContext === false,
      ...(opts.route ? { route: opts.route } : {}),
    })

  app.decorateRequest('caller', null as unknown as CallerContext)
  const contexts = new ContextVerifier(opts.internalSecret)

  app.addHook('onRequest', async (request, reply) => {
    reply.header('x-request-id', request.id)
    if (opts.requireContext === false || request.routeOptions.config?.auth === 'none') return
    const caller = contexts.verify(request.headers[CONTEXT_HEADER] as string | undefined)
    if (!caller) throw new AppError('INVALID_CREDENTIALS', 'a valid caller context is required')
    request.caller = { ...caller, requestId: request.id }
  })

  // ajv's type coercion turns the query text "Infinity" into a number it counts as an integer, and
  // skips minimum/maximum for it (ajv 8 checks isFinite there): refuse what no schema meant to allow.
  app.addHook('preHandler', (request, _reply, done) => {
    try {
      refuseNonFinite(request.query, 'querystring')
      refuseNonFinite(request.params, 'params')
      done()
    } catch (err) {
      done(err as Error)
    }
  })

  app.setErrorHandler((err: FastifyError, request: FastifyRequest, reply: FastifyReply) => {
    if (clientGone(request)) {
      // Nobody to answer, and nothing wrong with us (issue 14, finding 8): one line, no stack.
      logClientGone(request, err)
      reply.code(499).send()
      return
    }
    const { status, body } = toErrorResponse(err, request.id)
    if (status >= 500) request.log.error({ err }, 'request failed')
    if (err instanceof AppError && err.headers) reply.headers(err.headers)
    reply.code(status).send(body)
  })

  app.setNotFoundHandler((request, reply) => {
    reply
      .code(404)
      .send(
        errorBody('NOT_FOUND', `route ${request.method} ${request.url.split('?')[0]} not found`, request.id),
      )
  })

  if (opts.metrics) instrument(app, opts.name, opts.metrics, opts.route)

  app.get('/health/live', { config: { auth: 'none' }, logLevel: 'warn' }, async () => ({ status: 'ok' }))
  app.get('/health/ready', { config: { auth: 'none' }, logLevel: 'warn' }, async (_request, reply) => {
    const checks: Record<string, string> = {}
    let ok = true
    // All at once: a probe's own timeout (3 s in infra/) is shorter than two slow checks in turn.
    await Promise.all(
      Object.entries(opts.readiness ?? {}).map(async ([name, check]) => {
        // A check that hangs (a NATS connection that stopped reading never answers a flush) is a
        // failed one: a probe gets its 503 instead of no answer at all.
        let timer: NodeJS.Timeout | undefined
        try {
          await Promise.race([
            check(),
            new Promise<never>((_resolve, reject) => {
              timer = setTimeout(
                () => reject(new Error(`no answer within ${READINESS_CHECK_MS} ms`)),
                READINESS_CHECK_MS,
              )
            }),
          ])
          checks[name] = 'ok'
        } catch (err) {
          ok = false
          checks[name] = (err as Error).message || 'failed'
        } finally {
          clearTimeout(timer)
        }
      }),
    )
    reply.code(ok ? 200 : 503).send({ status: ok ? 'ok' : 'unavailable', checks })
  })

  return app
}

function instrument(
  app: Service,
  service: string,
  m: ServiceMetrics,
  route: ((request: FastifyRequest) => string | undefined) | undefined,
): void {
  observeRequests(app, m.registry, { service, ...(route ? { route } : {}) })
  const connections = Object.entries(m.connections ?? {})
  if (connections.length === 0) return
  const gauge = m.registry.connectionUp
  collectWhileOpen(app, m.registry, () => {
    for (const [connection, up] of connections) gauge.set({ service, connection }, up() ? 1 : 0)
  })
}

/** Runs `collector` before each scrape until the app closes. */
export function collectWhileOpen(
  app: FastifyInstance,
  metrics: Metrics,
  collector: () => Promise<void> | void,
): void {
  const off = metrics.onCollect(collector)
  app.addHook('onClose', async () => {
    off()
  })
}

/** What clientGone and logClientGone read of a request (any Fastify request type has it). */
export interface GoneRequest {
  raw: unknown
  socket: unknown
  method: string
  url: string
  log: FastifyRequest['log']
}

/** The client hung up before its answer was sent. */
export function clientGone(request: GoneRequest): boolean {
  const raw = request.raw as { destroyed?: boolean; complete?: boolean }
  const socket = request.socket as { destroyed?: boolean } | null | undefined
  return (raw.destroyed === true && raw.complete !== true) || socket?.destroyed === true
}

const GONE_LOGGED = Symbol('client gone logged')

/** Logs once per request, at info, that the client went away (whoever notices first). */
export function logClientGone(request: GoneRequest, err?: unknown): void {
  const marked = request as GoneRequest & { [GONE_LOGGED]?: true }
  if (marked[GONE_LOGGED]) return
  marked[GONE_LOGGED] = true
  const code = (err as { code?: unknown } | undefined)?.code
  request.log.info(
    { method: request.method, url: request.url, code: typeof code === 'string' ? code : undefined },
    'client disconnected before the answer',
  )
}

/** 400 VALIDATION_ERROR for a number that is not finite among the (coerced) fields of a request part. */
export function refuseNonFinite(part: unknown, where: string): void {
  if (!part || typeof part !== 'object') return
  for (const [key, value] of Object.entries(part)) {
    const values: unknown[] = Array.isArray(value) ? value : [value]
    if (values.some((v) => typeof v === 'number' && !Number.isFinite(v))) {
      throw new AppError('VALIDATION_ERROR', 'request is invalid', [
        { path: `${where}/${key}`, message: 'must be a finite number' },
      ])
    }
  }
}

/** The caller's workspace, or 404: a request without one cannot see workspace resources. */
export function requireOrganization(request: FastifyRequest): string {
  const org = request.caller.organizationId
  if (!org) throw new AppError('NOT_FOUND', 'no workspace in context')
  return org
}

/** The calling user, or 403 USER_TOKEN_REQUIRED when the caller is not a user. */
export function requireUser(request: FastifyRequest): string {
  if (request.caller.kind !== 'user' || !request.caller.userId) {
    throw new AppError('USER_TOKEN_REQUIRED', 'this operation needs a user access token')
  }
  return request.caller.userId
}
