import type { EventBus } from './bus.ts'

/** What the traced bus needs of a tracer (the kit's Tracing has it). */
export interface BusTracer {
  start(
    name: string,
    opts?: {
      kind?: 'producer' | 'consumer'
      parent?: Record<string, string | undefined>
      attributes?: Record<string, string | number | boolean>
    },
  ): { run<T>(fn: () => T): T; headers(): Record<string, string>; end(error?: unknown): void }
}

/**
 * The same bus with a producer span per durable publish (its traceparent travels in the
 * message headers) and a consumer span per delivery, continuing the publisher's trace.
 * Used only when tracing is on. A publish given headers (the outbox row's, written by the
 * request that published) continues their trace, or none; otherwise the current one.
 */
export function tracedBus(bus: EventBus, tracer: BusTracer): EventBus {
  const system = bus.kind === 'nats' ? 'nats' : 'in-process'
  return {
    kind: bus.kind,
    publishDurable: async (subject, data, msgId, headers) => {
      // Given headers (an outbox row's; `{}` for a row written in no trace) say which trace the
      // publish is in; without them, the current one.
      const span = tracer.start(`publish ${subject}`, {
        kind: 'producer',
        ...(headers !== undefined ? { parent: headers } : {}),
        attributes: {
          'messaging.system': system,
          'messaging.destination.name': subject,
          'messaging.message.id': msgId,
        },
      })
      // The message carries this span's trace context, and no other: a given traceparent the
      // span did not continue (a trace not sampled here) goes no further.
      const { traceparent: _traceparent, tracestate: _tracestate, ...others } = headers ?? {}
      const sent = { ...others, ...span.headers() }
      try {
        await bus.publishDurable(subject, data, msgId, Object.keys(sent).length > 0 ? sent : undefined)
        span.end()
      } catch (err) {
        span.end(err)
        throw err
      }
    },
    consume: (subject, durable, handler) =>
      bus.consume(subject, durable, async (data, meta) => {
        const span = tracer.start(`consume ${subject}`, {
          kind: 'consumer',
          parent: meta.headers ?? {},
          attributes: {
            'messaging.system': system,
            'messaging.destination.name': subject,
            'messaging.message.id': meta.msgId,
            'messaging.consumer.group.name': durable,
          },
        })
        try {
          await span.run(() => handler(data, meta))
          span.end()
        } catch (err) {
          span.end(err)
          throw err
        }
      }),
    broadcast: (subject, data) => bus.broadcast(subject, data),
    onBroadcast: (subject, handler) => bus.onBroadcast(subject, handler),
    connected: () => bus.connected(),
    check: () => bus.check(),
    close: () => bus.close(),
  }
}
