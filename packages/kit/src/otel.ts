import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SamplingDecision,
  type SpanContext,
  SpanKind as OtelKind,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { isTracingSuppressed, W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  type IdGenerator,
  ParentBasedSampler,
  RandomIdGenerator,
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
  const sampler = samplerFor(opts.sampler, opts.ratio)
  const ids = new RandomIdGenerator()
  /**
   * The trace id `start` drew and sampled for a root span it then asks the SDK to start: the
   * SDK's next trace id (startSpan draws it synchronously, once, for a span without a valid
   * parent), so the span it records is in the trace the decision was made on.
   */
  let nextTraceId: string | undefined
  const idGenerator: IdGenerator = {
    generateTraceId: () => {
      const id = nextTraceId ?? ids.generateTraceId()
      nextTraceId = undefined
      return id
    },
    generateSpanId: () => ids.generateSpanId(),
  }
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': opts.serviceName }),
    sampler,
    idGenerator,
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
   * `fn` with `ctx` as the current context. A request's span is run from several of its hooks
   * (tracing.ts, traceRequests); from those that already run in it (a hook called back
   * synchronously by the one before), entering it again would change nothing and is skipped.
   */
  const enter = <T>(ctx: Context, fn: () => T): T =>
    contexts.active() === ctx ? fn() : contexts.with(ctx, fn)

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

  /** The root of a dropped trace: entered (its children and outgoing headers must see it), never recorded. */
  const droppedRoot = (ctx: Context): SpanHandle => ({
    ...dropped,
    run: (fn) => enter(ctx, fn),
    headers: () => headersOf(ctx),
  })

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
    const kind = KINDS[o.kind ?? 'internal']
    // The sampler asked here, before the SDK: every request's server span is a root (gateway) or
    // has a remote parent (the services behind it), and the SDK's startSpan of one it then drops
    // (attributes cleaned, ids drawn, a non-recording span made) was most of what tracing cost
    // at ratio 0.1. Same sampler, same inputs (its decision depends on the parent and the trace
    // id alone), so the same decision; a dropped span is what the SDK would have made of it: a
    // new span id in the parent's trace (or a new one), flags 00, the parent's tracestate.
    // Suppressed tracing (never set here) is left to the SDK.
    if (!isTracingSuppressed(parent)) {
      const parentContext = trace.getSpanContext(parent)
      const continues = parentContext !== undefined && trace.isSpanContextValid(parentContext)
      const traceId = continues ? parentContext.traceId : ids.generateTraceId()
      const decision = sampler.shouldSample(parent, traceId, name, kind, o.attributes ?? {}, [])
      if (decision.decision === SamplingDecision.NOT_RECORD) {
        const traceState = decision.traceState ?? (continues ? parentContext.traceState : undefined)
        const spanContext: SpanContext = {
          traceId,
          spanId: ids.generateSpanId(),
          traceFlags: TraceFlags.NONE,
          ...(traceState ? { traceState } : {}),
        }
        return droppedRoot(trace.setSpan(parent, trace.wrapSpanContext(spanContext)))
      }
      // Sampled: the SDK starts the span, in the trace decided on (it asks the sampler again,
      // which answers the same).
      if (!continues) nextTraceId = traceId
    }
    const span = tracer.startSpan(
      name,
      { kind, ...(o.attributes ? { attributes: o.attributes } : {}) },
      parent,
    )
    nextTraceId = undefined
    const ctx = trace.setSpan(parent, span)
    if (!span.isRecording()) return droppedRoot(ctx)
    let ended = false
    return {
      recording: true,
      run: (fn) => enter(ctx, fn),
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
