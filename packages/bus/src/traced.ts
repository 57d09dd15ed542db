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
 * Used only when tracing is on. A publish given a traceparent (the outbox row's, written by the
 * request that published) continues that trace; otherwise the current one.
 */
export function tracedBus(bus: EventBus, tracer: BusTracer): EventBus {
  const system = bus.kind === 'nats' ? 'nats' : 'in-process'
  return {
    kind: bus.kind,
    publishDurable: async (subject, data, msgId, headers) => {
      const span = tracer.start(`publish ${subject}`, {
        kind: 'producer',
        ...(headers?.traceparent ? { parent: headers } : {}),
        attributes: {
          'messaging.system': system,
          'messaging.destination.name': subject,
          'messaging.message.id': msgId,
        },
      })
      try {
        await bus.publishDurable(subject, data, msgId, { ...headers, ...span.headers() })
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
