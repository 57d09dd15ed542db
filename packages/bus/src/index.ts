export * from './bus.ts'
export * from './memory.ts'
export * from './nats.ts'
export * from './traced.ts'

import { EVENTS_STREAM } from '@pm/contracts'
import type { EventBus } from './bus.ts'
import { MemoryBus } from './memory.ts'
import { NatsBus } from './nats.ts'

/** NATS JetStream when a URL is given, else the in-process bus. */
export async function createBus(natsUrl: string | undefined, name: string): Promise<EventBus> {
  if (!natsUrl) return new MemoryBus()
  return NatsBus.connect({ url: natsUrl, stream: EVENTS_STREAM, streamSubjects: ['pm.events.>'], name })
}

/** The bus's connection for pm_connection_up: NATS only (the in-process bus has none). */
export function busConnection(bus: EventBus): Record<string, () => boolean> {
  return bus.kind === 'nats' ? { nats: () => bus.connected() } : {}
}
