import { AppError } from '@pm/contracts'
import type { FastifyInstance } from 'fastify'
import type { Pool } from 'undici'

/**
 * Calls from one of our processes to another's internal routes, made so that a failed call can
 * never leave a pooled connection unusable (issue 14, finding 1):
 * - every path segment is percent-encoded by `internalPath`, and a path that undici would refuse
 *   is refused here first: undici's pool marks a connection busy for good when it refuses a
 *   request's arguments (`InvalidArgumentError`), so after `connections` such requests every
 *   later call waits forever;
 * - one deadline covers the whole call (connect, headers, body): the request is aborted, which
 *   destroys its socket, and the caller gets an answer in time even if the pool is stuck;
 * - the response body is always read to the end or destroyed.
 */

/** `/a/b/c` from segments, each percent-encoded (a `/`, `?`, `#` or control character stays data). */
export function internalPath(...segments: readonly string[]): string {
  return `/${segments.map((s) => encodeURIComponent(s)).join('/')}`
}

// What undici accepts in a request path (lib/core/request.js): printable Latin-1, no space.
const SAFE_PATH = /^\/[\u0021-\u00ff]*$/

export interface InternalCall {
  method: 'GET' | 'POST'
  path: string
  headers: Record<string, string>
  body?: string
  /** The whole call's deadline in milliseconds. */
  timeoutMs: number
}

export interface InternalAnswer {
  statusCode: number
  /** The parsed JSON body, or null when there was none or it was not JSON. */
  body: unknown
}

/**
 * Where an internal call goes: an undici Pool (another process, or this one over loopback), or
 * a service of this very process (`inProcess`), which answers the same routes, hooks and
 * checks without an HTTP exchange.
 */
export interface InternalTarget {
  request(options: {
    method: 'GET' | 'POST'
    path: string
    headers: Record<string, string>
    body?: string | undefined
    signal: AbortSignal
  }): Promise<{ statusCode: number; body: { text(): Promise<string>; destroy(): unknown } }>
}

/**
 * A service of this process as an internal call's target (the embedded default): Fastify's
 * `inject` runs the request through the service's own routing, hooks (the signed caller context
 * checked as ever), validation and handler, without a socket, an HTTP parser or a client pool
 * on either side. Only for answers read whole (JSON), never for streams.
 */
export function inProcess(app: FastifyInstance): InternalTarget {
  return {
    async request({ method, path, headers, body }) {
      const res = await app.inject({
        method,
        url: path,
        headers,
        ...(body !== undefined ? { payload: body } : {}),
      })
      return { statusCode: res.statusCode, body: { text: async () => res.body, destroy: () => {} } }
    },
  }
}

/** Thrown when the call did not finish within its deadline. */
export class InternalTimeoutError extends Error {
  constructor() {
    super('internal call timed out')
    this.name = 'InternalTimeoutError'
  }
}

/**
 * Makes one call and reads its JSON answer. Network failures reject with the undici error;
 * a call past its deadline rejects with InternalTimeoutError.
 */
export async function callInternal(pool: InternalTarget, call: InternalCall): Promise<InternalAnswer> {
  if (!SAFE_PATH.test(call.path)) {
    // Never reaches undici (see above). A bug of ours, not the client's: callers validate first.
    throw new AppError('VALIDATION_ERROR', 'invalid identifier in request')
  }
  const controller = new AbortController()
  let timer: NodeJS.Timeout | undefined
  const deadline = new Promise<never>((_, reject) => {
    timer = setTimeout(() => {
      controller.abort()
      reject(new InternalTimeoutError())
    }, call.timeoutMs)
  })
  const work = (async (): Promise<InternalAnswer> => {
    const res = await pool.request({
      method: call.method,
      path: call.path,
      headers: call.headers,
      body: call.body,
      signal: controller.signal,
    })
    try {
      const text = await res.body.text()
      let body: unknown = null
      if (text) {
        try {
          body = JSON.parse(text)
        } catch {
          body = null
        }
      }
      return { statusCode: res.statusCode, body }
    } catch (err) {
      res.body.destroy()
      throw err
    }
  })()
  // The work's own rejection after the deadline won is expected: keep it from being unhandled.
  work.catch(() => {})
  try {
    return await Promise.race([work, deadline])
  } finally {
    clearTimeout(timer)
  }
}

/** Closes a pool, waiting at most `graceMs` for calls in flight, then destroys what is left. */
export async function closePool(pool: Pool, graceMs = 2_000): Promise<void> {
  let timer: NodeJS.Timeout | undefined
  const closed = await Promise.race([
    pool.close().then(() => true),
    new Promise<boolean>((resolve) => {
      timer = setTimeout(() => resolve(false), graceMs)
    }),
  ])
  clearTimeout(timer)
  if (!closed) await pool.destroy()
}
