/** The tracing seam's types, shared by tracing.ts and the SDK behind it (otel.ts). */

export type SpanKind = 'server' | 'client' | 'producer' | 'consumer' | 'internal'
export type SpanAttributes = Record<string, string | number | boolean>
/** Headers (HTTP or NATS) that carry `traceparent` / `tracestate`. */
export type Carrier = Record<string, string | string[] | undefined>

export interface SpanHandle {
  /**
   * False for a span the sampler dropped (and every span under it): then `update` and `end` do
   * nothing, and callers skip their own span work (names, attributes, wrapping results).
   */
  readonly recording: boolean
  /** Runs `fn` with this span as the current one (children and outgoing headers follow it). */
  run<T>(fn: () => T): T
  /** traceparent / tracestate of this span, for an outgoing request or message. */
  headers(): Record<string, string>
  update(name?: string, attributes?: SpanAttributes): void
  end(error?: unknown): void
}

export interface SpanOptions {
  kind?: SpanKind
  /**
   * Incoming headers: the span continues their trace. Else: a child of the current span. A
   * `traceparent` whose flags say not sampled is not traced where the span is no root, whatever
   * the sampler: a trace is decided once, where it starts (the gateway).
   */
  parent?: Carrier
  /**
   * Where there is no trace to continue (no valid `traceparent` in `parent`, no current span):
   * start one, as the sampler decides (a request at the gateway, a webhook worker's delivery). Without it
   * such a span is not traced: the services behind the gateway record only the traces it
   * sampled, and work outside a traced request (a poller's store calls) starts none.
   */
  root?: boolean
  attributes?: SpanAttributes
}

export interface Tracing {
  start(name: string, opts?: SpanOptions): SpanHandle
  /** `fn` inside a new span, ended with its outcome. */
  span<T>(name: string, fn: () => Promise<T>, opts?: SpanOptions): Promise<T>
  /** traceparent / tracestate of the current span ({} outside any span). */
  headers(): Record<string, string>
  /**
   * A W3C `traceparent` of a trace not sampled (fresh ids, flags 00): what the gateway sends on
   * with a request it does not trace, so that the services behind it get the same headers with
   * every request; they trace none of them (SpanOptions.parent).
   */
  unsampled(): Record<string, string>
  /** Sends what is buffered and stops. */
  shutdown(): Promise<void>
}
