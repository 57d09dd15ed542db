import type { FastifyInstance, FastifyRequest } from 'fastify'
import type { OtlpProtocol, TracesSampler } from './settings.ts'
import type { SpanHandle, Tracing } from './tracingTypes.ts'

/**
 * Tracing seam. Nothing of OpenTelemetry is imported here: `tracingFor` loads the SDK
 * (otel.ts) with a dynamic import only when OTEL_EXPORTER_OTLP_ENDPOINT is set, and returns
 * undefined otherwise, so that a process without tracing loads nothing and adds no hook.
 */

// The span types live in tracingTypes.ts, which otel.ts imports too: no import circle.
export type { Carrier, SpanAttributes, SpanHandle, SpanKind, SpanOptions, Tracing } from './tracingTypes.ts'

export interface TracingSettings {
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined
  OTEL_EXPORTER_OTLP_PROTOCOL?: OtlpProtocol | undefined
  OTEL_SERVICE_NAME?: string | undefined
  OTEL_TRACES_SAMPLER?: TracesSampler | undefined
  OTEL_TRACES_SAMPLER_ARG?: number | undefined
  OTEL_BSP_SCHEDULE_DELAY?: number | undefined
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE?: number | undefined
}

/** The process's tracing when OTEL_EXPORTER_OTLP_ENDPOINT is set (SDK loaded now), else undefined. */
export async function tracingFor(config: TracingSettings, serviceName: string): Promise<Tracing | undefined> {
  if (!config.OTEL_EXPORTER_OTLP_ENDPOINT) return undefined
  const { createOtelTracing } = await import('./otel.ts')
  return createOtelTracing({
    endpoint: config.OTEL_EXPORTER_OTLP_ENDPOINT,
    serviceName: config.OTEL_SERVICE_NAME ?? serviceName,
    ...(config.OTEL_EXPORTER_OTLP_PROTOCOL !== undefined
      ? { protocol: config.OTEL_EXPORTER_OTLP_PROTOCOL }
      : {}),
    sampler: config.OTEL_TRACES_SAMPLER ?? 'parentbased_always_on',
    ratio: config.OTEL_TRACES_SAMPLER_ARG ?? 1,
    ...(config.OTEL_BSP_SCHEDULE_DELAY !== undefined
      ? { scheduleDelayMs: config.OTEL_BSP_SCHEDULE_DELAY }
      : {}),
    ...(config.OTEL_BSP_MAX_EXPORT_BATCH_SIZE !== undefined
      ? { maxBatchSize: config.OTEL_BSP_MAX_EXPORT_BATCH_SIZE }
      : {}),
  })
}

declare module 'fastify' {
  interface FastifyRequest {
    /** The request's server span, when tracing is on. */
    traceSpan: SpanHandle | null
  }
}

/**
 * A server span per request, continuing the caller's `traceparent` where the sampler keeps it,
 * or at the service where requests come in from outside (`roots`: the gateway) starting a trace
 * as the sampler decides. A request not traced (the sampler dropped it, or a service behind the
 * gateway got no sampled traceparent) costs its service a look at the header's flags and, at the
 * gateway, the decision (and the unsampled header its proxy sends on): nothing is entered. For
 * a traced one, the rest of the request (hooks, handler, store calls, outgoing calls) runs with
 * its span as the current span. Body parsing can run from socket events, outside that
 * context, so it is entered again before the preHandler hooks and the handler (validation and
 * the routes' preValidation hooks, which start no span, are left out: one hook less a request);
 * a span's `run` enters only where its context is not already the current one, so where it
 * still is (on Node 24 a POST over a socket, a 200 KB body included, found it current) that
 * costs a look-up.
 */
export function traceRequests(
  app: FastifyInstance,
  tracing: Tracing,
  opts: { service: string; roots?: boolean; route?: (request: FastifyRequest) => string | undefined },
): void {
  const routeOf = opts.route ?? ((request: FastifyRequest) => request.routeOptions.url)
  const root = opts.roots === true
  app.decorateRequest('traceSpan', null)
  app.addHook('onRequest', (request, _reply, done) => {
    // Probes (kubelet, the gateway's readiness checks, load balancers) poll /health/* all day:
    // a root trace each would drown the real ones. One that carries a traceparent is traced.
    if (request.url.startsWith('/health/') && request.headers.traceparent === undefined) return done()
    const span = tracing.start(request.method, { kind: 'server', parent: request.headers, root })
    if (!span.recording) return done()
    // Named `<method> <route>` when it ends (onResponse): the route is read once, there.
    span.update(undefined, {
      'http.request.method': request.method,
      'url.path': request.url.split('?', 1)[0] ?? '',
      'pm.service': opts.service,
    })
    request.traceSpan = span
    span.run(done)
  })
  const reenter = (request: FastifyRequest, _reply: unknown, done: () => void) => {
    if (request.traceSpan) request.traceSpan.run(done)
    else done()
  }
  app.addHook('preHandler', reenter)
  app.addHook('onResponse', (request, reply, done) => {
    const span = request.traceSpan
    if (span) {
      const route = routeOf(request) ?? 'unmatched'
      span.update(`${request.method} ${route}`, {
        'http.route': route,
        'http.response.status_code': reply.statusCode,
      })
      span.end(reply.statusCode >= 500 ? new Error(`HTTP ${reply.statusCode}`) : undefined)
    }
    done()
  })
}

/**
 * The same object, with each method that returns a promise run in a span `<prefix>.<method>`
 * (store calls) inside a traced request. Methods run on the object itself, so its own inner
 * calls are not traced again. A call outside any traced span (a poller's, or in a request not
 * traced) is the call itself, its result unwrapped: an idle install's polls start no traces.
 */
export function traceMethods<T extends object>(target: T, tracing: Tracing, prefix: string): T {
  // One wrapper per method, made on first use (not one closure per property read).
  const wrappers = new Map<
    string,
    { value: (...a: unknown[]) => unknown; wrapper: (...a: unknown[]) => unknown }
  >()
  const wrap = (obj: T, prop: string, value: (...a: unknown[]) => unknown) => {
    const name = `${prefix}.${prop}`
    return (...args: unknown[]) => {
      const span = tracing.start(name, { kind: 'internal' })
      if (!span.recording) return value.apply(obj, args)
      let result: unknown
      try {
        result = span.run(() => value.apply(obj, args))
      } catch (err) {
        span.end(err)
        throw err
      }
      if (result && typeof (result as Promise<unknown>).then === 'function') {
        return (result as Promise<unknown>).then(
          (v) => {
            span.end()
            return v
          },
          (err: unknown) => {
            span.end(err)
            throw err
          },
        )
      }
      span.end()
      return result
    }
  }
  return new Proxy(target, {
    get(obj, prop, receiver) {
      const value = Reflect.get(obj, prop, receiver)
      if (typeof value !== 'function' || typeof prop !== 'string') return value
      const known = wrappers.get(prop)
      if (known?.value === value) return known.wrapper
      const wrapper = wrap(obj, prop, value as (...a: unknown[]) => unknown)
      wrappers.set(prop, { value: value as (...a: unknown[]) => unknown, wrapper })
      return wrapper
    },
  })
}
