import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SpanKind as OtelKind,
  SpanStatusCode,
  TraceFlags,
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
  type SpanExporter,
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
  /** Instead of OTLP over HTTP to `endpoint` (tests). */
  exporter?: SpanExporter
}): Tracing {
  const exporter =
    opts.exporter ?? new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/+$/, '')}/v1/traces` })
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

  /**
   * Every span of a trace this process does not record, once its root was dropped: no span is
   * started, no context entered, nothing recorded. The current context already holds the dropped
   * root, so children get this handle too and outgoing headers carry its traceparent (flags 00),
   * so the next service drops the trace as well.
   */
  const dropped: SpanHandle = {
    recording: false,
    run: (fn) => fn(),
    headers: () => headersOf(contexts.active()),
    update: () => {},
    end: () => {},
  }

  const start = (name: string, o: SpanOptions = {}): SpanHandle => {
    let parent: Context
    if (o.parent) {
      parent =
        getter.get(o.parent, 'traceparent') === undefined
          ? ROOT_CONTEXT
          : propagator.extract(ROOT_CONTEXT, o.parent, getter)
    } else {
      parent = contexts.active()
      // A child of a span this process started unsampled is unsampled under every sampler here
      // (the parent-based ones follow the parent, traceidratio decides by the same trace id, the
      // always_* ones decide alike): no need to ask the sampler again. The flag, not
      // isRecording(): a sampled span that has ended still has recorded children.
      const current = trace.getSpan(parent)?.spanContext()
      if (current && !current.isRemote && (current.traceFlags & TraceFlags.SAMPLED) === 0) return dropped
    }
    const span = tracer.startSpan(
      name,
      { kind: KINDS[o.kind ?? 'internal'], ...(o.attributes ? { attributes: o.attributes } : {}) },
      parent,
    )
    const ctx = trace.setSpan(parent, span)
    if (!span.isRecording()) {
      // The root of a dropped trace: entered (its children and outgoing headers must see it), never recorded.
      return { ...dropped, run: (fn) => contexts.with(ctx, fn), headers: () => headersOf(ctx) }
    }
    let ended = false
    return {
      recording: true,
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
      if (!handle.recording) return handle.run(fn)
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
