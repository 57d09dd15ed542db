import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyHttpProxyOptions } from '@fastify/http-proxy'
import type { FastifyReply } from 'fastify'
import { Agent, type Dispatcher } from 'undici'
import { AppError, CONTEXT_HEADER, type Upstream } from '@pm/contracts'
import { clientGone, errorBody, logClientGone, type Tracing } from '@pm/kit'
import type { GatewayConfig } from './config.ts'
import { envelope, type UpstreamResponse } from './envelope.ts'

/** Headers for one connection only (RFC 9110 7.6.1, and `expect`): never sent on upstream. */
const HOP_BY_HOP = [
  'connection',
  'keep-alive',
  'proxy-connection',
  'te',
  'trailer',
  'upgrade',
  'expect',
] as const

/** The header that carries a proxied run's abort key from the handler to the dispatcher (never sent). */
const ABORT_KEY = 'x-pm-abort-key'

/**
 * The proxy's connections to the services, with one thing @fastify/reply-from lacks: a request
 * can be given up. reply-from calls undici without a signal, so a client that leaves before the
 * answer's headers left the upstream request (and its keep-alive socket) open, and a run went on
 * calling the model to the end, holding one of RUN_MAX_CONCURRENT. A run's request carries an
 * abort key (`abortOnClose`); aborting it destroys the socket, which the runs service sees as
 * its client gone (docs/decisions.md, "A run is given up when its client leaves").
 */
export class UpstreamAgent {
  private readonly agent: Agent
  private readonly signals = new Map<string, AbortSignal>()
  private next = 0

  constructor(config: GatewayConfig) {
    this.agent = new Agent({
      connections: 128,
      pipelining: 1,
      keepAliveTimeout: 30_000,
      // A connection is closed after this many requests (`Connection: close` on the last one), so
      // that new replicas behind a per-connection balancer get traffic (config.ts).
      ...(config.UPSTREAM_MAX_REQUESTS_PER_CONNECTION > 0
        ? { maxRequestsPerClient: config.UPSTREAM_MAX_REQUESTS_PER_CONNECTION }
        : {}),
      headersTimeout: config.UPSTREAM_TIMEOUT_MS,
      bodyTimeout: config.UPSTREAM_TIMEOUT_MS,
    })
  }

  /** An abort key for this request: its upstream request is aborted if the client leaves first. */
  abortOnClose(reply: FastifyReply): string {
    const key = String(++this.next)
    const controller = new AbortController()
    this.signals.set(key, controller.signal)
    reply.raw.once('close', () => {
      this.signals.delete(key)
      if (!reply.raw.writableFinished) controller.abort()
    })
    return key
  }

  /** reply-from's call (undici's `request`), with the request's signal where it has an abort key. */
  request<T = null>(opts: Dispatcher.RequestOptions<T>): Promise<Dispatcher.ResponseData<T>>
  request<T = null>(
    opts: Dispatcher.RequestOptions<T>,
    callback: (err: Error | null, data: Dispatcher.ResponseData<T>) => void,
  ): void
  request<T = null>(
    opts: Dispatcher.RequestOptions<T>,
    callback?: (err: Error | null, data: Dispatcher.ResponseData<T>) => void,
  ): Promise<Dispatcher.ResponseData<T>> | undefined {
    const headers = opts.headers as Record<string, string | undefined> | undefined
    const key = headers?.[ABORT_KEY]
    let sent = opts
    if (headers && key !== undefined) {
      // reply-from hands over a copy of its headers: this one is ours to drop.
      delete headers[ABORT_KEY]
      const signal = this.signals.get(key)
      if (signal) sent = { ...opts, signal }
    }
    if (!callback) return this.agent.request(sent)
    this.agent.request(sent, callback)
    return undefined
  }

  /** At the gateway's close (reply-from calls it, `destroyAgent`). */
  destroy(): Promise<void> {
    return this.agent.destroy()
  }
}

/** Where each upstream lives; render's replicas are taken in turn. */
export class Upstreams {
  readonly fixed: Record<Exclude<Upstream, 'render'>, string | undefined>
  readonly renderUrls: string[]
  private readonly fallback: string
  private renderTurn = 0

  constructor(config: GatewayConfig) {
    this.fixed = {
      identity: config.IDENTITY_URL,
      prompts: config.PROMPTS_URL,
      webhooks: config.WEBHOOKS_URL,
      experiments: config.EXPERIMENTS_URL,
      runs: config.RUNS_URL,
    }
    this.renderUrls = config.RENDER_URLS.split(',').map((u) => u.trim())
    this.fallback = config.PROMPTS_URL
  }

  urlFor(u: Upstream): string {
    if (u !== 'render') {
      const url = this.fixed[u]
      if (url === undefined) {
        const setting = u === 'runs' ? 'RUNS_URL' : 'EXPERIMENTS_URL'
        throw new AppError(
          'SERVICE_UNAVAILABLE',
          `the ${u} service is not deployed here (${setting} is not set)`,
        )
      }
      return url
    }
    this.renderTurn = (this.renderTurn + 1) % this.renderUrls.length
    return this.renderUrls[this.renderTurn] ?? this.fallback
  }

  /** Every upstream by a name for the readiness checks (render0, render1, ...). */
  named(): [string, string][] {
    return [
      ...Object.entries(this.fixed).filter((e): e is [string, string] => e[1] !== undefined),
      ...this.renderUrls.map((u, i) => [`render${i}`, u] as [string, string]),
    ]
  }
}

/**
 * @fastify/http-proxy's options: one proxy for /api/v1, the upstream chosen by the matched
 * route, the caller's signed context and request id set, the client's credential dropped,
 * successful JSON answers wrapped in {data}, upstream failures mapped to 503/504.
 */
export function proxyOptions(
  config: GatewayConfig,
  upstreams: Upstreams,
  tracing?: Tracing,
  agent: UpstreamAgent = new UpstreamAgent(config),
): FastifyHttpProxyOptions {
  // A run's abort key, from the handler to rewriteRequestHeaders.
  const abortKeys = new WeakMap<object, string>()
  return {
    upstream: '',
    prefix: '/api/v1',
    // A run waits on a model: its routes get RUNS_UPSTREAM_TIMEOUT_MS instead of
    // UPSTREAM_TIMEOUT_MS (reply-from's per-request `timeout` sets undici's headers and body
    // timeouts), and are given up when their client leaves.
    handler: (request, reply, dest, options) => {
      if (request.policyMatch?.policy.upstream !== 'runs') return reply.from(dest, options)
      abortKeys.set(request, agent.abortOnClose(reply))
      return reply.from(dest, { ...options, timeout: config.RUNS_UPSTREAM_TIMEOUT_MS })
    },
    rewritePrefix: '/api/v1',
    httpMethods: ['GET', 'POST', 'PATCH', 'PUT', 'DELETE'],
    // The gateway's own access line covers the request; reply-from's two info lines per proxied
    // request would triple the log volume.
    disableRequestLogging: true,
    undici: agent,
    destroyAgent: true,
    replyOptions: {
      getUpstream: (request) => {
        const match = request.policyMatch
        if (!match) throw new AppError('NOT_FOUND', 'not found')
        return upstreams.urlFor(match.policy.upstream)
      },
      rewriteRequestHeaders: (request, headers) => {
        const out: IncomingHttpHeaders = { ...(headers as IncomingHttpHeaders), 'x-request-id': request.id }
        delete out.authorization
        // Hop-by-hop headers (RFC 9110 7.6.1) end here: undici refuses `expect` and `keep-alive`
        // outright (curl sends `Expect: 100-continue` with any body over 1 MiB, which Node's
        // server has already answered), so the whole request would fail with 503.
        for (const name of HOP_BY_HOP) delete out[name]
        delete out[ABORT_KEY]
        const abortKey = abortKeys.get(request)
        if (abortKey !== undefined) out[ABORT_KEY] = abortKey
        if (request.contextToken) out[CONTEXT_HEADER] = request.contextToken
        // The client's address (after TRUSTED_PROXIES), for the audit log; a client-sent one was stripped.
        out['x-pm-client-ip'] = request.ip
        if (request.peekedLength !== null) out['content-length'] = String(request.peekedLength)
        // A client's trace context goes no further than the gateway: the services behind it
        // continue the gateway's trace, when it keeps one, and record nothing of a trace it did not.
        delete out.traceparent
        delete out.tracestate
        // A traced request: the upstream continues the gateway's server span, which names it.
        // One span a proxied request at the gateway, as Envoy and other proxies record it: the
        // upstream's own server span shows the time spent there (docs/decisions.md).
        const span = request.traceSpan
        if (span) {
          span.update(undefined, { 'pm.upstream': request.policyMatch?.policy.upstream ?? 'upstream' })
          Object.assign(out, span.headers())
        } else if (tracing) {
          // A request not traced goes on with a traceparent too, not sampled: the upstream's
          // header objects then have one shape whether or not a request is traced, which at a
          // ratio of 0.1 cost every request several per cent (docs/decisions.md, "A trace not
          // sampled is sent on").
          Object.assign(out, tracing.unsampled())
        }
        return out
      },
      rewriteHeaders: (headers, request) => {
        const out = { ...headers }
        delete out['content-length']
        delete out['transfer-encoding']
        // The upstream connection's own (`connection: keep-alive`, `keep-alive: timeout=72`):
        // passed on, they overrode a client's `Connection: close`, and its socket stayed open.
        for (const name of HOP_BY_HOP) delete out[name]
        // The refresh cookie is Secure; a browser on plain HTTP (development only) would drop it.
        if (out['set-cookie'] && config.NODE_ENV === 'development' && request?.protocol === 'http')
          out['set-cookie'] = [out['set-cookie']].flat().map((c) => c.replace(/;\s*Secure(?=;|$)/i, ''))
        return out
      },
      onResponse: (request, reply, res) => {
        envelope(reply, res as unknown as UpstreamResponse).catch((err: unknown) => {
          if (clientGone(request)) {
            logClientGone(request, err)
            return
          }
          request.log.error({ err }, 'reading upstream response failed')
          if (!reply.sent)
            reply.code(503).send(errorBody('SERVICE_UNAVAILABLE', 'upstream response failed', request.id))
        })
      },
      onError: (reply, { error }) => {
        // Nobody to answer (issue 14, finding 8): one info line, no stack.
        if (clientGone(reply.request)) {
          logClientGone(reply.request, error)
          reply.code(499).send()
          return
        }
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
}
