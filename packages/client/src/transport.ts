import { API_ROUTES, type OperationId, type RouteSpec } from '@pm/contracts'
import { codeForStatus, PromptServiceError } from './errors.ts'
import type { RawInput, UploadFile } from './types.ts'

export interface RetryOptions {
  /** Retries after the first attempt (0 turns retrying off). */
  retries: number
  /** First backoff step; each further retry doubles it, with jitter. */
  baseDelayMs: number
  /** Ceiling of one backoff step. */
  maxDelayMs: number
  /**
   * The longest Retry-After the client waits for. When the service asks for more, the client
   * does not retry early (it would only be refused again): it fails at once, and the error's
   * `retryAfterMs` says how long the service asked for.
   */
  maxRetryAfterMs: number
}

export const DEFAULT_RETRY: RetryOptions = {
  retries: 3,
  baseDelayMs: 250,
  maxDelayMs: 8_000,
  maxRetryAfterMs: 30_000,
}

export interface RetryInfo {
  operationId: OperationId
  /** 1 for the first retry. */
  attempt: number
  delayMs: number
  error: PromptServiceError
}

export interface TransportOptions {
  baseUrl: string
  credential: () => { token: string; kind: 'apiKey' | 'user' } | undefined
  organizationId: () => string | undefined
  retry: RetryOptions
  timeoutMs: number
  fetch: typeof fetch
  sleep: (ms: number, signal?: AbortSignal) => Promise<void>
  random: () => number
  now: () => number
  onRetry?: (info: RetryInfo) => void
  /** A 401 to a user token: answers a new token to send the request once more with. */
  refreshAccessToken?: () => Promise<string | undefined>
  userAgent?: string
}

/**
 * Render routes are POSTs without side effects: safe to send again. Other POSTs (create,
 * publish, fork, import) are only retried when the service certainly did not act on them (429).
 */
const SAFE_POSTS = new Set<OperationId>([
  'invokePrompt',
  'invokePromptBySlug',
  'injectPrompt',
  'invokePublicPrompt',
])

export function isRetrySafe(operationId: OperationId, route: RouteSpec): boolean {
  return route.method !== 'POST' || SAFE_POSTS.has(operationId)
}

/** Exponential backoff with "equal jitter": half the step fixed, half random. */
export function backoffDelay(attempt: number, retry: RetryOptions, random: () => number): number {
  const step = Math.min(retry.maxDelayMs, retry.baseDelayMs * 2 ** (attempt - 1))
  return Math.round(step / 2 + random() * (step / 2))
}

const MONTHS = ['Jan', 'Feb', 'Mar', 'Apr', 'May', 'Jun', 'Jul', 'Aug', 'Sep', 'Oct', 'Nov', 'Dec']
const MONTH = MONTHS.join('|')
/** The three HTTP-date forms a recipient must accept (RFC 9110 section 5.6.7), all in GMT. */
const IMF_FIXDATE = new RegExp(`^[A-Z][a-z]{2}, (\\d{2}) (${MONTH}) (\\d{4}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`)
const RFC850_DATE = new RegExp(
  `^[A-Z][a-z]{5,8}, (\\d{2})-(${MONTH})-(\\d{2}) (\\d{2}):(\\d{2}):(\\d{2}) GMT$`,
)
const ASCTIME_DATE = new RegExp(`^[A-Z][a-z]{2} (${MONTH}) ([ \\d]\\d) (\\d{2}):(\\d{2}):(\\d{2}) (\\d{4})$`)

/** An HTTP-date in ms since the epoch; undefined for anything else (Date.parse reads "1.5" as a date). */
function parseHttpDate(value: string, now: number): number | undefined {
  const at = (year: number, month = '', day = '', h = '', m = '', sec = ''): number =>
    Date.UTC(year, MONTHS.indexOf(month), Number(day), Number(h), Number(m), Number(sec))
  const imf = IMF_FIXDATE.exec(value)
  if (imf) return at(Number(imf[3]), imf[2], imf[1], imf[4], imf[5], imf[6])
  const rfc850 = RFC850_DATE.exec(value)
  if (rfc850) {
    // A two-digit year that would be more than 50 years ahead is in the past century (RFC 9110).
    const thisYear = new Date(now).getUTCFullYear()
    const year = Math.floor(thisYear / 100) * 100 + Number(rfc850[3])
    return at(year > thisYear + 50 ? year - 100 : year, rfc850[2], rfc850[1], rfc850[4], rfc850[5], rfc850[6])
  }
  const asctime = ASCTIME_DATE.exec(value)
  if (asctime) return at(Number(asctime[6]), asctime[1], asctime[2], asctime[3], asctime[4], asctime[5])
  return undefined
}

/**
 * Retry-After in ms: delta-seconds (a non-negative integer) or an HTTP-date (RFC 9110 section
 * 10.2.3); undefined when absent or anything else ("1.5", "-1"), so that the backoff applies.
 */
export function parseRetryAfter(value: string | null, now: number): number | undefined {
  if (!value) return undefined
  const trimmed = value.trim()
  if (/^\d+$/.test(trimmed)) return Number(trimmed) * 1000
  const at = parseHttpDate(trimmed, now)
  return at === undefined ? undefined : Math.max(0, at - now)
}

export function abortableSleep(ms: number, signal?: AbortSignal): Promise<void> {
  return new Promise((resolve, reject) => {
    if (signal?.aborted) {
      reject(signal.reason)
      return
    }
    const timer = setTimeout(() => {
      signal?.removeEventListener('abort', onAbort)
      resolve()
    }, ms)
    const onAbort = () => {
      clearTimeout(timer)
      reject(signal?.reason)
    }
    signal?.addEventListener('abort', onAbort, { once: true })
  })
}

/** Routes that act in "the current workspace": a user token names it with `organizationId`. */
function usesWorkspaceContext(route: RouteSpec): boolean {
  return route.auth !== 'public' && route.path.startsWith('/api/v1/prompts')
}

function fill(path: string, params: Record<string, unknown> | undefined, operationId: string): string {
  return path.replace(/:([A-Za-z_][A-Za-z0-9_]*)/g, (_m, name: string) => {
    const value = params?.[name]
    if (value === undefined || value === null || value === '') {
      throw new TypeError(`${operationId}: path parameter "${name}" is required`)
    }
    return encodeURIComponent(String(value))
  })
}

function toBytes(file: Uint8Array | string): Uint8Array<ArrayBuffer> {
  return typeof file === 'string' ? new TextEncoder().encode(file) : new Uint8Array(file)
}

function multipart(upload: UploadFile): FormData {
  const form = new FormData()
  const blob =
    upload.file instanceof Blob
      ? upload.file
      : new Blob([typeof upload.file === 'string' ? upload.file : new Uint8Array(upload.file)], {
          type: 'text/csv',
        })
  form.append('file', blob, upload.filename ?? 'prompts.csv')
  // More files in the same field, and plain fields (prompt file import).
  for (const more of upload.more ?? []) {
    const part = more.file instanceof Blob ? more.file : new Blob([toBytes(more.file)])
    form.append('file', part, more.filename ?? 'file')
  }
  for (const [name, value] of Object.entries(upload.fields ?? {})) form.append(name, value)
  return form
}

async function readError(res: Response, operationId: OperationId, now: number): Promise<PromptServiceError> {
  const text = await res.text().catch(() => '')
  let parsed: unknown
  try {
    parsed = text ? JSON.parse(text) : undefined
  } catch {
    parsed = undefined
  }
  const body = (parsed as { error?: Record<string, unknown> } | undefined)?.error
  const retryAfterMs = parseRetryAfter(res.headers.get('retry-after'), now)
  const requestId =
    (typeof body?.requestId === 'string' ? body.requestId : undefined) ??
    res.headers.get('x-request-id') ??
    undefined
  const code =
    typeof body?.code === 'string' ? (body.code as PromptServiceError['code']) : codeForStatus(res.status)
  return new PromptServiceError({
    status: res.status,
    code,
    message:
      typeof body?.message === 'string' ? body.message : `${operationId} failed with HTTP ${res.status}`,
    details: body?.details,
    requestId,
    retryAfterMs,
    operationId,
  })
}

/** fetch's "fetch failed" says little: the cause (ECONNREFUSED, ENOTFOUND, ...) says what went wrong. */
function describeCause(err: unknown): string {
  const cause = (err as { cause?: { code?: unknown; message?: unknown } } | undefined)?.cause
  if (typeof cause?.code === 'string') return cause.code
  if (typeof cause?.message === 'string') return cause.message
  return err instanceof Error ? err.message : String(err)
}

/** One HTTP exchange per attempt, retried per the options; answers the payload. */
export class Transport {
  private readonly opts: TransportOptions

  constructor(opts: TransportOptions) {
    this.opts = opts
  }

  async call(operationId: OperationId, input: RawInput = {}): Promise<unknown> {
    const route = API_ROUTES[operationId] as RouteSpec
    const url = new URL(fill(route.path, input.params, operationId), this.opts.baseUrl)
    const credential = this.opts.credential()
    const query: Record<string, unknown> = { ...input.query }
    const org = this.opts.organizationId()
    if (
      credential?.kind === 'user' &&
      org &&
      usesWorkspaceContext(route) &&
      query.organizationId === undefined
    ) {
      query.organizationId = org
    }
    for (const [name, value] of Object.entries(query)) {
      if (value !== undefined && value !== null) url.searchParams.set(name, String(value))
    }
    const headers: Record<string, string> = { accept: 'application/json', ...input.headers }
    if (this.opts.userAgent) headers['user-agent'] = this.opts.userAgent
    let token = credential && route.auth !== 'public' ? credential.token : undefined
    let refreshed = false

    const retrySafe = isRetrySafe(operationId, route)
    for (let attempt = 0; ; attempt++) {
      if (token) headers.authorization = `Bearer ${token}`
      let body: string | FormData | undefined
      if (input.body !== undefined) {
        if (route.bodyType === 'multipart') body = multipart(input.body as UploadFile)
        else {
          body = JSON.stringify(input.body)
          headers['content-type'] = 'application/json'
        }
      } else if (route.body && route.bodyOptional !== true && route.bodyType !== 'multipart') {
        body = '{}'
        headers['content-type'] = 'application/json'
      }
      let error: PromptServiceError
      try {
        return await this.once(operationId, route, url, headers, body, input.signal)
      } catch (err) {
        if (!(err instanceof PromptServiceError)) throw err
        error = err
      }
      // An expired user token: a 401 means the service did not act, so the request goes once
      // more with a fresh token (not counted as a retry).
      if (
        error.status === 401 &&
        credential?.kind === 'user' &&
        token &&
        !refreshed &&
        this.opts.refreshAccessToken
      ) {
        refreshed = true
        const fresh = await this.opts.refreshAccessToken()
        if (fresh && fresh !== token) {
          token = fresh
          attempt--
          continue
        }
      }
      const canRetry =
        attempt < this.opts.retry.retries &&
        (error.status === 429 || ((error.status === 0 || error.status >= 500) && retrySafe))
      if (!canRetry) throw error
      let delayMs = backoffDelay(attempt + 1, this.opts.retry, this.opts.random)
      if (error.retryAfterMs !== undefined) {
        if (error.retryAfterMs > this.opts.retry.maxRetryAfterMs) throw error
        delayMs = error.retryAfterMs
      }
      this.opts.onRetry?.({ operationId, attempt: attempt + 1, delayMs, error })
      await this.opts.sleep(delayMs, input.signal)
    }
  }

  private async once(
    operationId: OperationId,
    route: RouteSpec,
    url: URL,
    headers: Record<string, string>,
    body: string | FormData | undefined,
    signal: AbortSignal | undefined,
  ): Promise<unknown> {
    // The timeout covers the whole exchange: the body is read under the same signal.
    const timeout = AbortSignal.timeout(this.opts.timeoutMs)
    const where = `${route.method} ${url.origin}${url.pathname}`
    let res: Response
    let text: string
    try {
      res = await this.opts.fetch(url, {
        method: route.method,
        headers,
        body,
        signal: signal ? AbortSignal.any([signal, timeout]) : timeout,
      })
      if (!res.ok) throw await readError(res, operationId, this.opts.now())
      if (res.status === 204) return undefined
      if (route.produces === 'application/gzip') return new Uint8Array(await res.arrayBuffer())
      text = await res.text()
    } catch (err) {
      if (err instanceof PromptServiceError || signal?.aborted) throw err // the caller gave up: not the service's failure
      // No answer, or one cut off (a stalled or truncated body): the service cannot be reached.
      const timedOut = timeout.aborted
      throw new PromptServiceError({
        status: 0,
        code: timedOut ? 'TIMEOUT' : 'NETWORK_ERROR',
        message: timedOut
          ? `${operationId}: no answer from ${where} within ${this.opts.timeoutMs} ms`
          : `${operationId}: the service cannot be reached at ${where} (${describeCause(err)})`,
        operationId,
        cause: err,
      })
    }
    // Text answers (a page, a file, an export as CSV or JSON Lines) are returned as they came.
    if (route.produces === 'text/html' || route.produces === 'text/plain' || route.produces === 'text/csv')
      return text
    let json: unknown
    try {
      json = text ? JSON.parse(text) : undefined
    } catch (err) {
      // Not the service's answer (a proxy's or portal's page): a bad gateway, so unavailable.
      throw new PromptServiceError({
        status: 502,
        code: codeForStatus(502),
        message: `${operationId}: ${where} answered HTTP ${res.status} with a body that is not JSON (${res.headers.get('content-type') ?? 'no content-type'})`,
        requestId: res.headers.get('x-request-id') ?? undefined,
        operationId,
        cause: err,
      })
    }
    return route.envelope === false ? json : (json as { data?: unknown } | undefined)?.data
  }
}
