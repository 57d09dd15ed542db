export interface DeliveryMeta {
  /** The message id given at publish (the dedupe key, within its subject). */
  msgId: string
  /** 1 on first delivery, more on redelivery. */
  attempt: number
  /** Headers given at publish (trace context: traceparent, tracestate). */
  headers?: Record<string, string>
}

export type DurableHandler = (data: unknown, meta: DeliveryMeta) => Promise<void>
export type BroadcastHandler = (data: unknown) => void

/**
 * The events seam. Durable messages (JetStream in production) are stored by the server
 * and handed to each named consumer until it acknowledges; a message id published twice
 * is stored once. Broadcasts are best-effort fan-out to every live subscriber (cache
 * invalidation, key revocation).
 */
export interface EventBus {
  readonly kind: 'nats' | 'memory'
  /** Resolves once the server has stored the message (or recognised its id as a duplicate). */
  publishDurable(
    subject: string,
    data: unknown,
    msgId: string,
    headers?: Record<string, string>,
  ): Promise<void>
  /**
   * Starts a durable consumer: a handler that resolves acknowledges the message; one that
   * throws gets it again later.
   */
  consume(subject: string, durable: string, handler: DurableHandler): Promise<void>
  broadcast(subject: string, data: unknown): void
  onBroadcast(subject: string, handler: BroadcastHandler): void
  /** Whether the connection to the server is up now (metrics); the in-process bus: until closed. */
  connected(): boolean
  /** Throws when the bus cannot be used (readiness). */
  check(): Promise<void>
  /** Stops consumers (letting handlers in flight finish) and closes the connection. */
  close(): Promise<void>
}
