import { performance } from 'node:perf_hooks'
import { deadline } from '@pm/kit'
import { request } from 'undici'
import { checkTargetUrl, type HostLookup, pinnedDispatcher, type ResolvedAddress, SsrfError } from './ssrf.ts'

export interface DeliveryRequest {
  url: string
  /** Sent byte for byte: it is what the signature headers were computed over. */
  body: string
  headers: Record<string, string>
  /**
   * Addresses to use for the URL's host name instead of asking DNS (a caller's earlier
   * `checkTargetUrl` result, or a test's). They are checked again all the same.
   */
  addresses?: ResolvedAddress[]
  /** Resolver for the URL's host name when `addresses` is not given (default: the system's). */
  lookup?: HostLookup
  allowPrivate: boolean
  /** Deadline for the whole attempt: the host's lookup, connect, headers and the (capped) body. */
  timeoutMs?: number
  /** Ends the attempt early (the worker's shutdown); the result then says `interrupted`. */
  signal?: AbortSignal
  /** Receivers' bodies are kept for debugging only; there is no reason to store more. */
  maxResponseBytes?: number
}

export interface DeliveryResult {
  /** null when no response status arrived: refused target, network error or timeout. */
  status: number | null
  responseBody: string
  error?: string
  durationMs: number
  /** `signal` ended the attempt before any status arrived; `error` is its reason. */
  interrupted?: boolean
}

function describeError(err: unknown, timeoutMs: number): string {
  if (err instanceof SsrfError) return `refused target (${err.reason}): ${err.message}`
  if (err instanceof Error) {
    if (err.name === 'TimeoutError') return `timed out after ${timeoutMs} ms`
    const code = (err as NodeJS.ErrnoException).code
    return code && !err.message.includes(code) ? `${code}: ${err.message}` : err.message
  }
  return String(err)
}

/**
 * Rejects with the signal's reason once it aborts; `done` detaches it (a race's loser must not
 * reject later with no one listening).
 */
function whenAborted(signal: AbortSignal): { aborted: Promise<never>; done(): void } {
  let done = () => {}
  const aborted = new Promise<never>((_, reject) => {
    const onAbort = () => reject(signal.reason)
    if (signal.aborted) return onAbort()
    signal.addEventListener('abort', onAbort, { once: true })
    done = () => signal.removeEventListener('abort', onAbort)
  })
  aborted.catch(() => {})
  return { aborted, done: () => done() }
}

/**
 * POSTs one delivery attempt and never throws: every failure comes back as a result the retry
 * logic can classify. The target is checked again at each attempt, since its DNS may now point
 * somewhere private, and the connection is pinned to the addresses that passed the check.
 * Redirects are not followed: undici's `request` only follows them through the redirect
 * interceptor, which is not installed, so a 3xx is returned as is (and retried as a failure);
 * following one would let a receiver steer us to an unchecked address.
 */
export async function sendDelivery(req: DeliveryRequest): Promise<DeliveryResult> {
  const timeoutMs = req.timeoutMs ?? 15_000
  const maxResponseBytes = req.maxResponseBytes ?? 4096
  const started = performance.now()
  const elapsed = () => Math.round(performance.now() - started)
  // One deadline for the whole attempt, the host's lookup included (a resolver that does not
  // answer would otherwise hold the attempt, and its lease, without limit).
  const attempt = deadline(req.signal ?? new AbortController().signal, timeoutMs)
  const { signal } = attempt
  const failed = (status: number | null, responseBody: string, err: unknown): DeliveryResult => {
    const interrupted = status === null && req.signal?.aborted === true
    return {
      status,
      responseBody,
      error: describeError(interrupted ? req.signal?.reason : err, timeoutMs),
      durationMs: elapsed(),
      ...(interrupted ? { interrupted } : {}),
    }
  }

  let target: Awaited<ReturnType<typeof checkTargetUrl>>
  const lookupEnds = whenAborted(signal)
  try {
    const fixed = req.addresses
    // A system lookup cannot be cancelled: one past the deadline finishes in the background, unused.
    target = await Promise.race([
      checkTargetUrl(req.url, {
        allowPrivate: req.allowPrivate,
        ...(fixed ? { lookup: async () => fixed } : req.lookup ? { lookup: req.lookup } : {}),
      }),
      lookupEnds.aborted,
    ])
  } catch (err) {
    attempt.clear()
    return failed(null, '', err)
  } finally {
    lookupEnds.done()
  }

  const dispatcher = pinnedDispatcher(target.addresses)
  let status: number | null = null
  const chunks: Buffer[] = []
  let received = 0
  try {
    const res = await request(target.url, {
      dispatcher,
      method: 'POST',
      headers: req.headers,
      body: req.body,
      // The signal bounds the total time; these stop undici's much longer defaults applying first.
      signal,
      headersTimeout: timeoutMs,
      bodyTimeout: timeoutMs,
    })
    status = res.statusCode
    for await (const chunk of res.body) {
      const buf = Buffer.isBuffer(chunk) ? chunk : Buffer.from(chunk as Uint8Array)
      chunks.push(buf.subarray(0, maxResponseBytes - received))
      received += buf.length
      // Leaving the loop destroys the stream, so the rest of a huge body is never downloaded.
      if (received >= maxResponseBytes) break
    }
    return { status, responseBody: Buffer.concat(chunks).toString('utf8'), durationMs: elapsed() }
  } catch (err) {
    // A status that did arrive is kept: the receiver answered, even if its body then stalled.
    return failed(status, Buffer.concat(chunks).toString('utf8'), err)
  } finally {
    // Destroy rather than close: the dispatcher is single-use and may hold a half-read response.
    await dispatcher.destroy().catch(() => {})
    attempt.clear()
  }
}
