import { AsyncLocalStorage } from 'node:async_hooks'
import {
  type Attributes,
  defaultTextMapGetter,
  type HrTime,
  ROOT_CONTEXT,
  SamplingDecision,
  SpanKind as OtelKind,
  type SpanContext,
  type SpanStatus,
  SpanStatusCode,
  TraceFlags,
  trace,
} from '@opentelemetry/api'
import { addHrTimes, hrTimeDuration, millisToHrTime, W3CTraceContextPropagator } from '@opentelemetry/core'
import { type Resource, resourceFromAttributes } from '@opentelemetry/resources'
import {
  AlwaysOffSampler,
  AlwaysOnSampler,
  BatchSpanProcessor,
  ParentBasedSampler,
  type ReadableSpan,
  type Sampler,
  type SpanExporter,
  type TimedEvent,
  TraceIdRatioBasedSampler,
} from '@opentelemetry/sdk-trace'
import { randomDraw, randomHex, randomHexAt, randomHexSlice, randomPool } from './ids.ts'
import { otlpTraceExporter } from './otlpExport.ts'
import type { OtlpProtocol, TracesSampler } from './settings.ts'
import type { Carrier, SpanAttributes, SpanHandle, SpanKind, SpanOptions, Tracing } from './tracingTypes.ts'

/**
 * OpenTelemetry behind the Tracing seam; imported only by `tracingFor` when an OTLP endpoint is
 * set. The SDK's samplers decide, its batch span processor batches and OTLP's serializers encode
 * for otlpExport.ts's transport, which sends through undici; a sampled span itself is this file's
 * `Recorded`, a small ReadableSpan of its own, current through one AsyncLocalStorage: the SDK's
 * span, context manager and propagator ran several times the code a span needs, and code that
 * runs for one request in ten is code the CPU has cold
 * (docs/decisions.md, "A span recorder of our own"). Nothing is registered globally: this object
 * owns its store, processor and exporter, so two of them (tests) never meet.
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
/** A random id of `zero`'s length in hex, from `draw`, drawn again while all zeros (W3C: no such id is valid). */
const nonZero = (draw: (bytes: number) => string, zero: string): string => {
  for (;;) {
    const id = draw(zero.length / 2)
    if (id !== zero) return id
  }
}
/** Random ids (W3C: not all zeros), from kit's pool of CSPRNG bytes, each a string of its own. */
const traceIdNew = (): string => nonZero(randomHex, ZERO_TRACE)
const spanIdNew = (): string => nonZero(randomHex, ZERO_SPAN)

/**
 * traceidratio's decision on a new trace id, made on its 16 bytes before any hex string is: what
 * the SDK's TraceIdRatioBasedSampler decides from the hex (the XOR of the id's four 32-bit words
 * kept below ratio × (2^32 − 1); every id at ratio 1, none at 0 or below). The gateway makes this
 * decision for every request, so it is made without the hex string, the sampler's checks and
 * the parent-based wrapper a dropped request would otherwise pay for (otel.test.ts holds it to
 * the SDK's answer).
 */
export function ratioKeeps(ratio: number): (id: Readonly<Buffer>, at?: number) => boolean {
  const r = Number.isNaN(ratio) ? 0 : Math.min(1, Math.max(0, ratio))
  const bound = r === 1 ? 2 ** 32 : Math.floor(r * 0xffffffff)
  // The 16 bytes at `at` of `id` (kit's random pool, where the gateway's decision reads them).
  return (id, at = 0) =>
    (id.readUInt32BE(at) ^ id.readUInt32BE(at + 4) ^ id.readUInt32BE(at + 8) ^ id.readUInt32BE(at + 12)) >>>
      0 <
    bound
}

/**
 * A version-00 `traceparent` (55 characters) whose flags say not sampled. Only the flags are
 * read: whatever else is wrong with it, such a header starts no trace behind the gateway either.
 */
export function notSampled(traceparent: string | string[] | undefined): boolean {
  return (
    typeof traceparent === 'string' &&
    traceparent.length === 55 &&
    traceparent.startsWith('00-') &&
    (Number.parseInt(traceparent.slice(53), 16) & 1) === 0
  )
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
  const exporter = opts.exporter ?? otlpTraceExporter(url, opts.protocol)
  const sampler = samplerFor(opts.sampler, opts.ratio)
  // A new trace's decision under traceidratio, with or without parentbased_ (a root has no parent).
  const keeps =
    opts.sampler === 'traceidratio' || opts.sampler === 'parentbased_traceidratio'
      ? ratioKeeps(opts.ratio)
      : undefined
  // Exported within a second by default: a trace is in the backend while the request is still in mind.
  const processor = new BatchSpanProcessor({
    exporter,
    scheduledDelayMillis: opts.scheduleDelayMs ?? 1_000,
    ...(opts.maxBatchSize !== undefined ? { maxExportBatchSize: opts.maxBatchSize } : {}),
  })
  const scope: Scope = {
    resource: resourceFromAttributes({ 'service.name': opts.serviceName }),
    instrumentationScope: { name: 'prompt-service' },
    processor,
    current: new AsyncLocalStorage<Recorded>(),
  }
  const { current } = scope
  const propagator = new W3CTraceContextPropagator()

  /**
   * Every span this process does not trace: a trace the sampler dropped, and anything outside a
   * traced request that is not a root of its own (SpanOptions.root). Nothing is started, entered,
   * recorded or sent on by it (the gateway's proxy sends `unsampled()` instead), and the services
   * behind the gateway trace only what comes with a sampled `traceparent`, so that no service
   * downstream starts a trace of its own for it either (docs/decisions.md, "Traces start at the
   * gateway", "A trace not sampled is sent on").
   */
  const untraced: SpanHandle = {
    recording: false,
    run: (fn) => fn(),
    headers: () => ({}),
    update: () => {},
    end: () => {},
  }

  const start = (name: string, o: SpanOptions = {}): SpanHandle => {
    const kind = KINDS[o.kind ?? 'internal']
    const attributes = o.attributes ?? NO_ATTRIBUTES
    if (!o.parent) {
      // A child of the current span, which is a sampled one: its children are sampled under every
      // sampler here (the parent-based ones follow the parent, traceidratio decides by the same
      // trace id, the always_* ones decide alike).
      const parent = current.getStore()
      if (parent) return new Recorded(scope, name, kind, attributes, parent.context.traceId, parent.context)
      if (!o.root) return untraced
      return rootSpan(name, kind, attributes)
    }
    const traceparent = getter.get(o.parent, 'traceparent')
    // A trace not sampled where it started (the gateway sends one with each request it does not
    // trace, Tracing.unsampled): nothing to read or decide behind it.
    if (!o.root && notSampled(traceparent)) return untraced
    if (traceparent !== undefined) {
      // Only where a caller sent one (a traced request's hops, a traced message): read by the W3C
      // propagator, decided by the sampler (the parent-based ones follow the caller's flags).
      const parent = trace.getSpanContext(propagator.extract(ROOT_CONTEXT, o.parent, getter))
      if (parent && trace.isSpanContextValid(parent)) {
        const decision = sampler.shouldSample(
          trace.setSpanContext(ROOT_CONTEXT, parent),
          parent.traceId,
          name,
          kind,
          attributes,
          [],
        )
        if (decision.decision === SamplingDecision.NOT_RECORD) return untraced
        return new Recorded(scope, name, kind, attributes, parent.traceId, parent)
      }
    }
    // No trace to continue (no valid traceparent): a trace of its own only where asked for (a
    // request at the gateway, a webhook worker's delivery), not in a trace dropped upstream.
    return o.root ? rootSpan(name, kind, attributes) : untraced
  }

  /** A new trace, as the sampler decides on a new trace id. */
  const rootSpan = (name: string, kind: OtelKind, attributes: SpanAttributes): SpanHandle => {
    if (keeps) {
      const at = randomDraw(16)
      if (!keeps(randomPool, at)) return untraced
      const traceId = randomHexAt(at, 16)
      // All zeros is no valid trace id, which the SDK's sampler drops too (odds 2^-128).
      if (traceId === ZERO_TRACE) return untraced
      return new Recorded(scope, name, kind, attributes, traceId, undefined)
    }
    const traceId = traceIdNew()
    const decision = sampler.shouldSample(ROOT_CONTEXT, traceId, name, kind, attributes, [])
    if (decision.decision === SamplingDecision.NOT_RECORD) return untraced
    return new Recorded(scope, name, kind, attributes, traceId, undefined)
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
    headers: () => current.getStore()?.headers() ?? {},
    // Sent on and dropped at once: slices of kit's pool of random hex (not all zeros, as W3C asks).
    unsampled: () => ({
      traceparent: `00-${nonZero(randomHexSlice, ZERO_TRACE)}-${nonZero(randomHexSlice, ZERO_SPAN)}-00`,
    }),
    shutdown: async () => {
      await processor.shutdown()
      current.disable()
    },
  }
}

/** What every span of one tracing shares. */
interface Scope {
  resource: Resource
  instrumentationScope: { name: string }
  processor: BatchSpanProcessor
  /** The current span: only a sampled one is ever entered. */
  current: AsyncLocalStorage<Recorded>
}

const NO_LINKS: ReadableSpan['links'] = []
const NO_ATTRIBUTES: SpanAttributes = Object.freeze({})
const timeOrigin = millisToHrTime(performance.timeOrigin)
const hrTimeAt = (performanceNow: number): HrTime => addHrTimes(timeOrigin, millisToHrTime(performanceNow))

/**
 * A sampled span: the handle the services hold and, once ended, the ReadableSpan the batch
 * processor and OTLP's exporters read. Its times are `performance.now()` readings, made HrTime
 * only when its batch is encoded; its attributes are the services' own (typed, a handful).
 */
class Recorded implements SpanHandle, ReadableSpan {
  readonly recording = true
  readonly links = NO_LINKS
  readonly droppedAttributesCount = 0
  readonly droppedEventsCount = 0
  readonly droppedLinksCount = 0
  events: TimedEvent[] = []
  status: SpanStatus = { code: SpanStatusCode.UNSET }
  readonly context: SpanContext
  readonly parentSpanContext: SpanContext | undefined
  name: string
  readonly kind: OtelKind
  readonly attributes: SpanAttributes
  private readonly scope: Scope
  private readonly started = performance.now()
  private ended_: number | undefined
  private traceparent_: string | undefined

  /** In `traceId`, under `parent` (a caller's span, or the current one; none for a root), whose tracestate it carries on. */
  constructor(
    scope: Scope,
    name: string,
    kind: OtelKind,
    attributes: SpanAttributes,
    traceId: string,
    parent: SpanContext | undefined,
  ) {
    this.scope = scope
    this.name = name
    this.kind = kind
    // Its own copy: update() adds to it.
    this.attributes = { ...attributes }
    this.parentSpanContext = parent
    const traceState = parent?.traceState
    this.context = {
      traceId,
      spanId: spanIdNew(),
      traceFlags: TraceFlags.SAMPLED,
      ...(traceState ? { traceState } : {}),
    }
  }

  run<T>(fn: () => T): T {
    // A request's span is run from several of its hooks (tracing.ts, traceRequests); from those
    // that already run in it (a hook called back synchronously by the one before), entering it
    // again would change nothing and is skipped.
    const { current } = this.scope
    return current.getStore() === this ? fn() : current.run(this, fn)
  }

  headers(): Record<string, string> {
    const { traceId, spanId, traceState } = this.context
    this.traceparent_ ??= `00-${traceId}-${spanId}-01`
    return traceState
      ? { traceparent: this.traceparent_, tracestate: traceState.serialize() }
      : { traceparent: this.traceparent_ }
  }

  update(name?: string, attributes?: SpanAttributes): void {
    if (this.ended_ !== undefined) return
    if (name) this.name = name
    if (attributes) Object.assign(this.attributes, attributes)
  }

  end(error?: unknown): void {
    if (this.ended_ !== undefined) return
    this.ended_ = performance.now()
    if (error !== undefined) {
      const err = error instanceof Error ? error : undefined
      const message = err ? err.message : String(error)
      const attributes: Attributes = { 'exception.message': message }
      if (err) {
        attributes['exception.type'] = (err as { code?: unknown }).code?.toString() ?? err.name
        if (err.stack) attributes['exception.stacktrace'] = err.stack
      }
      this.events.push({ name: 'exception', time: hrTimeAt(this.ended_), attributes })
      this.status = { code: SpanStatusCode.ERROR, message }
    }
    this.scope.processor.onEnd(this)
  }

  spanContext(): SpanContext {
    return this.context
  }

  get startTime(): HrTime {
    return hrTimeAt(this.started)
  }

  get endTime(): HrTime {
    return hrTimeAt(this.ended_ ?? this.started)
  }

  get duration(): HrTime {
    return hrTimeDuration(this.startTime, this.endTime)
  }

  get ended(): boolean {
    return this.ended_ !== undefined
  }

  get resource(): Resource {
    return this.scope.resource
  }

  get instrumentationScope(): { name: string } {
    return this.scope.instrumentationScope
  }
}
