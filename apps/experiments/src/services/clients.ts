import { AppError, CONTEXT_HEADER, type ErrorCode, ERROR_STATUS, type ExperimentVariant } from '@pm/contracts'
import {
  callInternal,
  closePool,
  type Deadline,
  deadline,
  InternalTimeoutError,
  internalPath,
  signContext,
  type VerifiedContext,
} from '@pm/kit'
import { Pool } from 'undici'

const isErrorCode = (c: unknown): c is ErrorCode => typeof c === 'string' && c in ERROR_STATUS

interface ErrorAnswer {
  error?: { code?: unknown; message?: unknown; details?: unknown }
}

/** The prompts service, asked whether a variant names content the caller's workspace has. */
export class PromptsClient {
  private readonly pool: Pool
  private readonly secret: string

  constructor(url: string, secret: string) {
    this.pool = new Pool(url, { connections: 8, pipelining: 1, keepAliveTimeout: 30_000 })
    this.secret = secret
  }

  /**
   * Resolves the variant as a run would (the draft, a version, an environment's pin or the
   * latest version), in the caller's workspace: a prompt of another workspace is a 404, a
   * version or environment it lacks the prompts service's own 404 or 400.
   */
  async checkVariant(
    caller: VerifiedContext,
    requestId: string,
    v: ExperimentVariant,
    index: number,
  ): Promise<void> {
    const query = new URLSearchParams()
    if (v.version !== undefined) query.set('version', String(v.version))
    if (v.env !== undefined) query.set('env', v.env)
    const path = v.draft
      ? internalPath('internal', 'prompts', v.promptId, 'draft')
      : `${internalPath('internal', 'prompts', v.promptId, 'resolve')}${query.size > 0 ? `?${query}` : ''}`
    let answer: { statusCode: number; body: unknown }
    try {
      answer = await callInternal(this.pool, {
        method: 'GET',
        path,
        headers: { [CONTEXT_HEADER]: signContext(caller, this.secret), 'x-request-id': requestId },
        timeoutMs: 10_000,
      })
    } catch (err) {
      if (err instanceof InternalTimeoutError)
        throw new AppError('UPSTREAM_TIMEOUT', 'the prompts service did not answer in time')
      throw new AppError('SERVICE_UNAVAILABLE', 'the prompts service is not reachable')
    }
    if (answer.statusCode === 200) return
    const code = (answer.body as ErrorAnswer | null)?.error?.code
    if (
      isErrorCode(code) &&
      answer.statusCode >= 400 &&
      answer.statusCode < 500 &&
      code !== 'INVALID_CREDENTIALS'
    ) {
      const message = (answer.body as ErrorAnswer).error?.message
      throw new AppError(
        code,
        `variants[${index}]: ${typeof message === 'string' ? message : 'not usable'}`,
        {
          errors: [
            { path: `/body/variants/${index}`, message: typeof message === 'string' ? message : code },
          ],
        },
      )
    }
    throw new AppError('SERVICE_UNAVAILABLE', 'the prompts service failed')
  }

  close(): Promise<void> {
    return closePool(this.pool)
  }
}

/** One run: a prompt (by id, or a rubric by slug) rendered with variables and sent to a model. */
export interface RunRequest {
  promptId?: string
  slug?: string
  version?: number
  env?: string
  draft?: true
  variables: Record<string, unknown>
  connectionId: string
  model?: string
  params?: Record<string, unknown>
}

export interface RunAnswer {
  output: string
  latencyMs: number
  inputTokens: number
  outputTokens: number
}

/** The provider answered 429: wait `retryAfterMs` and try the unit again; nothing is recorded. */
export class RateLimitedError extends Error {
  readonly retryAfterMs: number
  readonly backoff = true
  constructor(retryAfterMs: number) {
    super(`rate limited by the provider; retrying in ${retryAfterMs} ms`)
    this.name = 'RateLimitedError'
    this.retryAfterMs = retryAfterMs
  }
}

/** Where each unit's model call is made. */
export interface UnitExecutor {
  run(caller: VerifiedContext, request: RunRequest, signal: AbortSignal): Promise<RunAnswer>
  close(): Promise<void>
}

/** Retry-After as milliseconds: delta-seconds or an HTTP date; `fallback` when absent or unreadable. */
export function retryAfterMs(value: unknown, fallback: number, now = Date.now()): number {
  if (typeof value === 'number' && Number.isFinite(value) && value >= 0) return Math.ceil(value * 1000)
  if (typeof value !== 'string' || value.trim() === '') return fallback
  const seconds = Number(value)
  if (Number.isFinite(seconds) && seconds >= 0) return Math.ceil(seconds * 1000)
  const at = Date.parse(value)
  return Number.isNaN(at) ? fallback : Math.max(0, at - now)
}

interface RunBody {
  output?: { content?: unknown } | string
  usage?: { inputTokens?: unknown; outputTokens?: unknown }
  latencyMs?: unknown
}

const int = (x: unknown): number =>
  typeof x === 'number' && Number.isFinite(x) ? Math.max(0, Math.round(x)) : 0

/**
 * Each unit is one `POST /api/v1/prompts/:id/run` (a rubric: `/api/v1/prompts/slug/:slug/run`)
 * on the runs service, with the experiment creator's signed caller context, the way the gateway
 * calls a service: rendering, the provider call, its timeouts and its run log stay there.
 */
export class RunsExecutor implements UnitExecutor {
  private readonly pool: Pool
  private readonly secret: string
  private readonly timeoutMs: number

  constructor(url: string, secret: string, timeoutMs: number, connections = 64) {
    this.pool = new Pool(url, { connections, pipelining: 1, keepAliveTimeout: 30_000 })
    this.secret = secret
    this.timeoutMs = timeoutMs
  }

  async run(caller: VerifiedContext, r: RunRequest, signal: AbortSignal): Promise<RunAnswer> {
    const path =
      r.slug !== undefined
        ? `${internalPath('api', 'v1', 'prompts', 'slug', r.slug, 'run')}`
        : `${internalPath('api', 'v1', 'prompts', r.promptId ?? '', 'run')}`
    const body = {
      variables: r.variables,
      connectionId: r.connectionId,
      ...(r.version !== undefined ? { version: r.version } : {}),
      ...(r.env !== undefined ? { env: r.env } : {}),
      ...(r.draft ? { draft: true } : {}),
      ...(r.model !== undefined ? { model: r.model } : {}),
      ...(r.params !== undefined ? { params: r.params } : {}),
    }
    const limit = deadline(signal, this.timeoutMs)
    try {
      return await this.call(path, caller, body, limit)
    } finally {
      limit.clear()
    }
  }

  /** The unit's request and its answer, within `limit` (the caller's signal and the deadline). */
  private async call(
    path: string,
    caller: VerifiedContext,
    body: Record<string, unknown>,
    limit: Deadline,
  ): Promise<RunAnswer> {
    const started = performance.now()
    let res: Awaited<ReturnType<Pool['request']>>
    try {
      res = await this.pool.request({
        method: 'POST',
        path,
        headers: {
          'content-type': 'application/json',
          [CONTEXT_HEADER]: signContext(caller, this.secret),
          'x-request-id': `exp-${Date.now().toString(36)}`,
        },
        body: JSON.stringify(body),
        signal: limit.signal,
      })
    } catch (err) {
      if (limit.timedOut()) throw new Error('the run did not answer in time')
      if (limit.signal.aborted) throw err
      throw new Error(`the runs service is not reachable: ${(err as Error).message}`)
    }
    let parsed: unknown = null
    try {
      parsed = await res.body.json()
    } catch {
      parsed = null
    }
    const wall = performance.now() - started
    if (res.statusCode === 200 || res.statusCode === 201) {
      // A service answers the bare object; through the gateway it would be inside {data}.
      const b = ((parsed as { data?: unknown } | null)?.data ?? parsed) as RunBody | null
      const out = typeof b?.output === 'string' ? b.output : b?.output?.content
      return {
        output: typeof out === 'string' ? out : JSON.stringify(out ?? ''),
        latencyMs: typeof b?.latencyMs === 'number' ? b.latencyMs : Math.round(wall),
        inputTokens: int(b?.usage?.inputTokens),
        outputTokens: int(b?.usage?.outputTokens),
      }
    }
    const error = (parsed as ErrorAnswer | null)?.error
    const details = (error?.details ?? {}) as {
      providerStatus?: unknown
      retryAfter?: unknown
      retryAfterSeconds?: unknown
    }
    const header = res.headers['retry-after']
    if (res.statusCode === 429 || details.providerStatus === 429) {
      const given =
        details.retryAfter ?? details.retryAfterSeconds ?? (Array.isArray(header) ? header[0] : header)
      throw new RateLimitedError(retryAfterMs(given, 1_000))
    }
    const code = typeof error?.code === 'string' ? error.code : `HTTP ${res.statusCode}`
    const message = typeof error?.message === 'string' ? error.message : 'the run failed'
    throw new Error(`${code}: ${message}`)
  }

  close(): Promise<void> {
    return closePool(this.pool)
  }
}
