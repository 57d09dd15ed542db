import type { IncomingHttpHeaders } from 'node:http'
import type { FastifyHttpProxyOptions } from '@fastify/http-proxy'
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
): FastifyHttpProxyOptions {
  return {
    upstream: '',
    prefix: '/api/v1',
    // A run waits on a model: its routes get RUNS_UPSTREAM_TIMEOUT_MS instead of
    // UPSTREAM_TIMEOUT_MS (reply-from's per-request `timeout` sets undici's headers and body timeouts).
    handler: (request, reply, dest, options) =>
      reply.from(
        dest,
        request.policyMatch?.policy.upstream === 'runs'
          ? { ...options, timeout: config.RUNS_UPSTREAM_TIMEOUT_MS }
          : options,
      ),
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
        return upstreams.urlFor(match.policy.upstream)
      },
      rewriteRequestHeaders: (request, headers) => {
        const out: IncomingHttpHeaders = { ...(headers as IncomingHttpHeaders), 'x-request-id': request.id }
        delete out.authorization
        // Hop-by-hop headers (RFC 9110 7.6.1) end here: undici refuses `expect` and `keep-alive`
        // outright (curl sends `Expect: 100-continue` with any body over 1 MiB, which Node's
        // server has already answered), so the whole request would fail with 503.
        for (const name of HOP_BY_HOP) delete out[name]
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
