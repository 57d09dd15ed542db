import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SamplingDecision,
  SpanKind as OtelKind,
  SpanStatusCode,
  trace,
} from '@opentelemetry/api'
import { AsyncLocalStorageContextManager } from '@opentelemetry/context-async-hooks'
import { isTracingSuppressed, W3CTraceContextPropagator } from '@opentelemetry/core'
import { OTLPTraceExporter as JsonTraceExporter } from '@opentelemetry/exporter-trace-otlp-http'
import { OTLPTraceExporter as ProtobufTraceExporter } from '@opentelemetry/exporter-trace-otlp-proto'
import { resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  type IdGenerator,
  ParentBasedSampler,
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace'
import { randomHex } from './ids.ts'
import type { OtlpProtocol, TracesSampler } from './settings.ts'
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

const ZERO_TRACE = '0'.repeat(32)
const ZERO_SPAN = '0'.repeat(16)
/** Random ids (W3C: not all zeros), from kit's pool of CSPRNG bytes. */
const traceIdNew = (): string => {
  const id = randomHex(16)
  return id === ZERO_TRACE ? traceIdNew() : id
}
const spanIdNew = (): string => {
  const id = randomHex(8)
  return id === ZERO_SPAN ? spanIdNew() : id
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
  /** The most an ended span waits before its batch is sent (OTEL_BSP_SCHEDULE_DELAY; default 1 s). */
  scheduleDelayMs?: number
  /** The most spans a batch sends (OTEL_BSP_MAX_EXPORT_BATCH_SIZE; default 512). */
  maxBatchSize?: number
  /** OTLP's encoding over HTTP (OTEL_EXPORTER_OTLP_PROTOCOL; default http/protobuf, OTLP's own default). */
  protocol?: OtlpProtocol
  /** Instead of OTLP over HTTP to `endpoint` (tests). */
  exporter?: SpanExporter
}): Tracing {
  const url = `${opts.endpoint.replace(/\/+$/, '')}/v1/traces`
  const exporter =
    opts.exporter ??
    (opts.protocol === 'http/json' ? new JsonTraceExporter({ url }) : new ProtobufTraceExporter({ url }))
  const sampler = samplerFor(opts.sampler, opts.ratio)
  /**
   * The trace id `start` drew and sampled for a root span it then asks the SDK to start: the
   * SDK's next trace id (startSpan draws it synchronously, once, for a span without a valid
   * parent), so the span it records is in the trace the decision was made on.
   */
  let nextTraceId: string | undefined
  const idGenerator: IdGenerator = {
    generateTraceId: () => {
      const id = nextTraceId ?? traceIdNew()
      nextTraceId = undefined
      return id
    },
    generateSpanId: spanIdNew,
  }
  const provider = new TracerProvider({
    resource: resourceFromAttributes({ 'service.name': opts.serviceName }),
    sampler,
    idGenerator,
    // Exported within a second by default: a trace is in the backend while the request is still in mind.
    spanProcessors: [
      new BatchSpanProcessor({
        exporter,
        scheduledDelayMillis: opts.scheduleDelayMs ?? 1_000,
        ...(opts.maxBatchSize !== undefined ? { maxExportBatchSize: opts.maxBatchSize } : {}),
      }),
    ],
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
   * Every span this process does not trace: a trace the sampler dropped, and anything outside a
   * traced request that is not a root of its own (SpanOptions.root). Nothing is started, entered,
   * recorded or sent on: a dropped trace is not propagated, and the services behind the gateway
   * trace only what comes with a sampled `traceparent`, so that no service downstream starts a
   * trace of its own for it either (docs/decisions.md, "Traces start at the gateway").
   */
  const untraced: SpanHandle = {
    recording: false,
    run: (fn) => fn(),
    headers: () => ({}),
    update: () => {},
    end: () => {},
  }

  const start = (name: string, o: SpanOptions = {}): SpanHandle => {
    let parent: Context
    if (o.parent) {
      const traceparent = getter.get(o.parent, 'traceparent')
      parent = traceparent === undefined ? ROOT_CONTEXT : propagator.extract(ROOT_CONTEXT, o.parent, getter)
    } else {
      parent = contexts.active()
    }
    // Only a traced span is ever entered: a current span is a sampled one, and its children are
    // sampled under every sampler here (the parent-based ones follow the parent, traceidratio
    // decides by the same trace id, the always_* ones decide alike).
    const parentContext = trace.getSpanContext(parent)
    const continues = parentContext !== undefined && trace.isSpanContextValid(parentContext)
    // No trace to continue (no current span, no valid traceparent): a trace of its own only where
    // asked for (a request at the gateway, a webhook worker's delivery), not in a trace dropped upstream.
    if (!continues && !o.root) return untraced
    const kind = KINDS[o.kind ?? 'internal']
    // The sampler asked here, before the SDK: its startSpan of a span it then drops (attributes
    // cleaned, ids drawn, a non-recording span made) was most of what tracing cost at ratio 0.1.
    // Same sampler, same inputs (its decision depends on the parent and the trace id alone), so
    // the same decision. Suppressed tracing (never set here) is left to the SDK.
    if (!isTracingSuppressed(parent)) {
      const traceId = continues ? parentContext.traceId : traceIdNew()
      const decision = sampler.shouldSample(parent, traceId, name, kind, o.attributes ?? {}, [])
      if (decision.decision === SamplingDecision.NOT_RECORD) return untraced
      // Sampled: the SDK starts the span, in the trace decided on (it asks the sampler again,
      // which answers the same).
      if (!continues) nextTraceId = traceId
    }
    let span: ReturnType<typeof tracer.startSpan>
    try {
      span = tracer.startSpan(name, { kind, ...(o.attributes ? { attributes: o.attributes } : {}) }, parent)
    } finally {
      // Used once, by this startSpan: never by a later span, even if this one threw.
      nextTraceId = undefined
    }
    const ctx = trace.setSpan(parent, span)
    if (!span.isRecording()) return untraced
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
