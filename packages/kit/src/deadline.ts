/** A call's abort signal: the caller's, and a deadline the call clears when it ends. */
export interface Deadline {
  /** Aborted when the caller's signal aborts (with its reason) or at the deadline (a TimeoutError). */
  readonly signal: AbortSignal
  /** Whether the deadline, and not the caller, aborted the call. */
  timedOut(): boolean
  /** The call ended: its timer and its listener on the caller's signal go. */
  clear(): void
}

/**
 * `AbortSignal.any([parent, AbortSignal.timeout(ms)])`, for a call that ends before its
 * deadline as most do: `AbortSignal.timeout`'s timer cannot be cleared, so each call left one
 * behind for the whole delay (a model call's 120 s by default), with a WeakRef and a finalizer,
 * and `AbortSignal.any` adds weak links of its own. Here the timer (unreferenced: it keeps no
 * process alive) and the listener go when `clear()` is called. The timeout's reason is the same
 * DOMException `AbortSignal.timeout` gives.
 */
export function deadline(parent: AbortSignal, ms: number): Deadline {
  const controller = new AbortController()
  let timedOut = false
  const onAbort = () => controller.abort(parent.reason)
  if (parent.aborted) controller.abort(parent.reason)
  else parent.addEventListener('abort', onAbort, { once: true })
  const timer = setTimeout(() => {
    // A call the caller already aborted, not yet cleared, did not time out.
    if (controller.signal.aborted) return
    timedOut = true
    controller.abort(new DOMException('The operation was aborted due to timeout', 'TimeoutError'))
  }, ms)
  timer.unref()
  return {
    signal: controller.signal,
    timedOut: () => timedOut,
    clear: () => {
      clearTimeout(timer)
      parent.removeEventListener('abort', onAbort)
    },
  }
}
