import {
  type Context,
  defaultTextMapGetter,
  defaultTextMapSetter,
  ROOT_CONTEXT,
  SamplingDecision,
  type Span,
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
  type Sampler,
  type SpanExporter,
  TraceIdRatioBasedSampler,
  TracerProvider,
} from '@opentelemetry/sdk-trace'
import { randomHex } from './ids.ts'
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

/** A caller's `traceparent` as the W3C propagator accepts it (version 00, ids not zero), in parts. */
const TRACEPARENT = /^00-((?!0{32})[0-9a-f]{32})-((?!0{16})[0-9a-f]{16})-([0-9a-f]{2})$/

/**
 * A span this process does not record: its ids for the children and the outgoing headers,
 * its `traceparent` (flags 00) written once. What `trace.wrapSpanContext` makes, with the
 * header kept.
 */
export class DroppedSpan implements Span {
  private readonly context: SpanContext
  private traceparent: string | undefined
  constructor(context: SpanContext) {
    this.context = context
  }
  spanContext(): SpanContext {
    return this.context
  }
  headers(): Record<string, string> {
    this.traceparent ??= `00-${this.context.traceId}-${this.context.spanId}-00`
    const state = this.context.traceState?.serialize()
    return state ? { traceparent: this.traceparent, tracestate: state } : { traceparent: this.traceparent }
  }
  setAttribute(): this {
    return this
  }
  setAttributes(): this {
    return this
  }
  addEvent(): this {
    return this
  }
  addLink(): this {
    return this
  }
  addLinks(): this {
    return this
  }
  setStatus(): this {
    return this
  }
  updateName(): this {
    return this
  }
  end(): void {}
  isRecording(): boolean {
    return false
  }
  recordException(): void {}
}

/** The key the API keeps a context's span under: `createContextKey` is `Symbol.for` (checked below). */
const SPAN_KEY = Symbol.for('OpenTelemetry Context Key SPAN')

/**
 * The context of a dropped span: its parent's values and the span, read through without copying
 * the parent's (the API's context copies its parent's map and makes three closures, for each
 * request). A value set on it or deleted from it gives the API's own context, as
 * `trace.setSpan(parent, span)` would have.
 */
class DroppedContext implements Context {
  private readonly parent: Context
  private readonly span: DroppedSpan
  constructor(parent: Context, span: DroppedSpan) {
    this.parent = parent
    this.span = span
  }
  getValue(key: symbol): unknown {
    return key === SPAN_KEY ? this.span : this.parent.getValue(key)
  }
  setValue(key: symbol, value: unknown): Context {
    return trace.setSpan(this.parent, this.span).setValue(key, value)
  }
  deleteValue(key: symbol): Context {
    return trace.setSpan(this.parent, this.span).deleteValue(key)
  }
}

/**
 * `parent` with `span` as its span: a DroppedContext where the API reads a context's span by
 * SPAN_KEY (every version so far; checked once here), else the API's own.
 */
export const withDropped: (parent: Context, span: DroppedSpan) => Context = (() => {
  const probe = new DroppedSpan({
    traceId: '1'.repeat(32),
    spanId: '1'.repeat(16),
    traceFlags: TraceFlags.NONE,
  })
  return trace.getSpan(new DroppedContext(ROOT_CONTEXT, probe)) === probe
    ? (parent, span) => new DroppedContext(parent, span)
    : (parent, span) => trace.setSpan(parent, span)
})()

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
  /** Instead of OTLP over HTTP to `endpoint` (tests). */
  exporter?: SpanExporter
}): Tracing {
  const exporter =
    opts.exporter ?? new OTLPTraceExporter({ url: `${opts.endpoint.replace(/\/+$/, '')}/v1/traces` })
  const sampler = samplerFor(opts.sampler, opts.ratio)
  // A caller's unsampled traceparent is dropped by a parent-based sampler whatever its root.
  const parentBased = opts.sampler.startsWith('parentbased_')
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
    const span = trace.getSpan(ctx)
    if (span instanceof DroppedSpan) return span.headers()
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
    recording: false,
    run: (fn) => enter(ctx, fn),
    headers: () => headersOf(ctx),
    update: dropped.update,
    end: dropped.end,
  })

  /** A dropped span in `parent`'s trace (or a new one), flags 00, entered by its handle. */
  const droppedIn = (parent: Context, traceId: string, traceState: SpanContext['traceState']): SpanHandle => {
    const spanContext: SpanContext = {
      traceId,
      spanId: spanIdNew(),
      traceFlags: TraceFlags.NONE,
      ...(traceState ? { traceState } : {}),
    }
    return droppedRoot(withDropped(parent, new DroppedSpan(spanContext)))
  }

  const start = (name: string, o: SpanOptions = {}): SpanHandle => {
    let parent: Context
    if (o.parent) {
      const traceparent = getter.get(o.parent, 'traceparent')
      if (traceparent === undefined) {
        parent = ROOT_CONTEXT
      } else {
        // The commonest case of a service behind the gateway, decided without the propagator:
        // a parent-based sampler drops a caller's unsampled trace (no tracestate to carry on).
        if (parentBased && getter.get(o.parent, 'tracestate') === undefined) {
          const [, traceId, , flags] = TRACEPARENT.exec(String(traceparent)) ?? []
          if (traceId && flags && (Number.parseInt(flags, 16) & TraceFlags.SAMPLED) === 0)
            return droppedIn(ROOT_CONTEXT, traceId, undefined)
        }
        parent = propagator.extract(ROOT_CONTEXT, o.parent, getter)
      }
    } else {
      parent = contexts.active()
      const current = trace.getSpan(parent)
      // A span this process dropped: its children are dropped too.
      if (current instanceof DroppedSpan) return dropped
      // A child of a span this process started unsampled is unsampled under every sampler here
      // (the parent-based ones follow the parent, traceidratio decides by the same trace id, the
      // always_* ones decide alike): no need to ask the sampler again. The flag, not
      // isRecording(): a sampled span that has ended still has recorded children.
      const context = current?.spanContext()
      if (context && !context.isRemote && (context.traceFlags & TraceFlags.SAMPLED) === 0) return dropped
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
      const traceId = continues ? parentContext.traceId : traceIdNew()
      const decision = sampler.shouldSample(parent, traceId, name, kind, o.attributes ?? {}, [])
      if (decision.decision === SamplingDecision.NOT_RECORD)
        return droppedIn(
          parent,
          traceId,
          decision.traceState ?? (continues ? parentContext.traceState : undefined),
        )
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
