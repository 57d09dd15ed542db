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
 * the ticks stayed on the fast path in every process probed, tracing on or off.
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
