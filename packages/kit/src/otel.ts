import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind as OtelKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type Sampler,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace'
import type { TracesSampler } from './settings.ts'
import type { Carrier, SpanHandle, SpanKind, SpanOptions, Tracing } from './tracingTypes.ts'

/**
 * The OpenTelemetry SDK behind the Tracing seam; imported only by `tracingFor` when an OTLP
 * endpoint is set. Nothing is registered globally: this object owns its provider, its
 * AsyncLocalStorage context manager and its W3C propagator, so two of them (tests) never meet.
 */

const KINDS: Record<SpanKind, OtelKind> = {
  server: OtelKind.SERVER,
  client: OtelKind.CLIENT,
  producer: OtelKind.PRODUCER,
  consumer: OtelKind.CONSUMER,
  internal: OtelKind.INTERNAL,
}

const getter = {
  ...defaultTextMapGetter,
  get(carrier: Carrier, key: string) {
    return carrier[key] ?? carrier[key.toLowerCase()]
  },
}

/** The sampler OTEL_TRACES_SAMPLER names (OTEL_TRACES_SAMPLER_ARG: the ratio). */
export function samplerFor(name: TracesSampler, ratio: number): Sampler {
  const root = name.endsWith('always_on')
    ? new AlwaysOnSampler()
    : name.endsWith('always_off')
      ? new AlwaysOffSampler()
      : new TraceIdRatioBasedSampler(ratio)
  return name.startsWith('parentbased_') ? new ParentBasedSampler({ root }) : root
}

export function createOtelTracing(opts: {
  endpoint: string
  serviceName: string
  sampler: TracesSampler
  ratio: number
}): Tracing {
  const exporter = new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/+$/, '')}/v1/traces` })
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': opts.serviceName }),
    sampler: samplerFor(opts.sampler, opts.ratio),
    // Exported within a second: a trace is in the backend while the request is still in mind.
    spanProcessors: [new BatchSpanProcessor({ exporter, scheduledDelayMillis: 1_000 })],
  })
  const tracer = provider.getTracer('prompt-service')
  const contexts = new AsyncLocalStorageContextManager()
  contexts.enable()
  const propagator = new W3CTraceContextPropagator()

  const headersOf = (ctx: Context): Record<string, string> => {
    const out: Record<string, string> = {}
    propagator.inject(ctx, out, defaultTextMapSetter)
    return out
  }

  const start = (name: string, o: SpanOptions = {}): SpanHandle => {
    const parent = o.parent ? propagator.extract(ROOT_CONTEXT, o.parent, getter) : contexts.active()
    const span = tracer.startSpan(
      name,
      { kind: KINDS[o.kind ?? 'internal'], ...(o.attributes ? { attributes: o.attributes } : {}) },
      parent,
    )
    const ctx = trace.setSpan(parent, span)
    let ended = false
    return {
      run: (fn) => contexts.with(ctx, fn),
      headers: () => headersOf(ctx),
      update: (newName, attributes) => {
        if (newName) span.updateName(newName)
        if (attributes) span.setAttributes(attributes)
      },
      end: (error) => {
        if (ended) return
        ended = true
        if (error !== undefined) {
          span.recordException(error instanceof Error ? error : String(error))
          span.setStatus({ code: SpanStatusCode.ERROR, message: (error as Error)?.message ?? String(error) })
        }
        span.end()
      },
    }
  }

  return {
    start,
    span: async (name, fn, o) => {
      const handle = start(name, o)
      try {
        const result = await handle.run(fn)
        handle.end()
        return result
      } catch (err) {
        handle.end(err)
        throw err
      }
    },
    headers: () => headersOf(contexts.active()),
    shutdown: async () => {
      await provider.shutdown()
      contexts.disable()
    },
  }
}
