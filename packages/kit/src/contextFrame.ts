import { AsyncLocalStorage } from 'node:async_hooks'

/**
 * One async context frame held for the process's life, entered by `main` before a service
 * starts.
 *
 * On Node 24 every `process.nextTick` stores the current async context frame in the tick it
 * queues (an object literal with computed keys). In a process where that frame is sometimes
 * `undefined` (nothing entered yet, or a callback of a resource made then) and sometimes an
 * object (inside an AsyncLocalStorage's `run`, which tracing enters for every request), V8 has
 * been seen to compile `nextTick` so that it defines the tick's last three fields through the
 * runtime: about 250 ns a tick instead of 23-43, some twenty ticks a proxied request, in five of
 * the nine traced processes probed, never in an untraced one (bench/README.md, "nextTick and
 * the context frame"). With this store entered first, every frame after it is an object, and
 * the ticks stayed on the fast path in every process probed, tracing on or off. Later, with
 * tracing on, they were slow again in every process: the cause then was Node's `process.stdin`,
 * which `main` now replaces (server.ts, emptyStdin).
 */
const held = new AsyncLocalStorage<true>()

/** Enters the process's frame: everything started after this, synchronously or not, runs in it. */
export function holdContextFrame(): void {
  if (held.getStore() !== true) held.enterWith(true)
}

/** Whether the code calling this runs in the frame `holdContextFrame` entered (tests). */
export function contextFrameHeld(): boolean {
  return held.getStore() === true
}

/**
 * A runner for a background loop (an outbox relay, a delivery worker): each function given to it
 * runs in the async context current when the runner was made (the service's start), not its
 * caller's. A loop kicked from a request would otherwise run on in that request's context, and
 * every timer and promise it makes would carry it: its later passes, long after the request,
 * would be spans of the request's trace, and an event it publishes without a trace of its own
 * would be published in that one. `AsyncLocalStorage.snapshot()`.
 */
export function backgroundRunner(): <T>(fn: () => T) => T {
  return AsyncLocalStorage.snapshot()
}
