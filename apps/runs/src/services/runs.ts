import {
  AppError,
  type CallerContext,
  type RenderedMessage,
  type RunList,
  type RunParams,
  type RunRecord,
  type RunRequest,
  type RunResult,
  pagination,
} from '@pm/contracts'
import { type Deadline, deadline, newId } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { answerTooLong as tooLong, providerFailure } from '../domain/failure.ts'
import { chooseModel, mergeParams } from '../domain/params.ts'
import type { RunStore } from '../store/types.ts'
import type { Connections, OpenConnection } from './connections.ts'
import { boundedFetch } from './bounded.ts'
import type { Egress } from './egress.ts'
import type { OrgLimiter } from './limiter.ts'
import type { Completion, OnDelta, ProviderAdapter, ProviderTarget } from './providers/types.ts'
import { TOOL_CALL_BYTES } from './providers/types.ts'
import type { PromptRef, RenderClient, Rendered } from './render.ts'

/** Who runs: the verified caller, and its signed context as it arrived (forwarded to render). */
export interface RunCaller {
  caller: CallerContext
  organizationId: string
  contextHeader: string
  requestId: string
}

/** A run ready to call its model: rendered, parameters chosen, a slot of the organization taken. */
export interface PreparedRun {
  id: string
  who: RunCaller
  body: RunRequest
  rendered: Rendered
  connection: OpenConnection
  model: string
  params: RunParams
  messages: RenderedMessage[]
  release: () => void
}

export interface RunsDeps {
  store: RunStore
  connections: Connections
  render: RenderClient
  egress: Egress
  limiter: OrgLimiter
  timeoutMs: number
  /** RUN_MAX_OUTPUT_BYTES: the most an answer may hold. */
  maxOutputBytes: number
  log: FastifyBaseLogger
}

/**
 * The SDKs are loaded on the first run that needs them, not at start: together they add seconds
 * to the start of the embedded default on a slow disk, for a feature many never use.
 */
const loadOpenAI = () => import('./providers/openai.ts')
const loadAnthropic = () => import('./providers/anthropic.ts')

async function adapterFor(
  provider: OpenConnection['provider'],
  target: ProviderTarget,
): Promise<ProviderAdapter> {
  if (provider === 'anthropic') return new (await loadAnthropic()).AnthropicAdapter(target)
  return new (await loadOpenAI()).OpenAIAdapter(target)
}

/** Loads the SDKs in the background (on the service's first request), so that the first run does not wait. */
export function preloadProviders(): void {
  loadOpenAI().catch(() => {})
  loadAnthropic().catch(() => {})
}

const elapsed = (from: number): number => Math.max(0, Math.round(performance.now() - from))

/**
 * An answer's size as RUN_MAX_OUTPUT_BYTES counts it: its text and its tool calls (their ids,
 * names and arguments, as a stream counts them as they come).
 */
function outputBytes(completion: Completion): number {
  let n = Buffer.byteLength(completion.content)
  for (const t of completion.toolCalls)
    n +=
      TOOL_CALL_BYTES + Buffer.byteLength(t.id) + Buffer.byteLength(t.name) + Buffer.byteLength(t.arguments)
  return n
}

/** `wait` settled, or `signal` fired, whichever comes first. */
function untilAborted(wait: Promise<void>, signal: AbortSignal): Promise<void> {
  if (signal.aborted) return Promise.resolve()
  return new Promise((resolve, reject) => {
    const done = () => {
      signal.removeEventListener('abort', done)
      resolve()
    }
    signal.addEventListener('abort', done, { once: true })
    wait.then(done, (err: unknown) => {
      signal.removeEventListener('abort', done)
      reject(err)
    })
  })
}

/** SDK clients kept for connections whose calls share one dispatcher (building one per call costs). */
const CLIENT_CACHE_MAX = 256

export class Runs {
  private readonly deps: RunsDeps
  private readonly clients = new Map<string, ProviderAdapter>()

  constructor(deps: RunsDeps) {
    this.deps = deps
  }

  /**
   * Everything before the model call, each failure a plain HTTP error: access, the connection,
   * rendering (by render itself: invoke, or inject for the draft), model and parameters, and
   * a slot of the organization (429 RUNS_BUSY).
   */
  async prepare(who: RunCaller, prompt: PromptRef, body: RunRequest): Promise<PreparedRun> {
    const { caller } = who
    // The gateway checked runs:write; this service holds its own line too.
    if (!caller.scopes.includes('runs:write')) {
      throw new AppError('INSUFFICIENT_SCOPE', 'running a prompt needs the runs:write scope')
    }
    if (body.draft) {
      if (!caller.scopes.includes('prompts:write')) {
        throw new AppError(
          'INSUFFICIENT_SCOPE',
          'running the draft needs the prompts:write scope (as inject does)',
        )
      }
      if (body.version !== undefined || body.env !== undefined) {
        throw new AppError('VALIDATION_ERROR', 'give draft, version or env, not two of them', [
          { path: '/body/draft', message: 'cannot be combined with version or env' },
        ])
      }
    }
    if (body.version !== undefined && body.env !== undefined) {
      throw new AppError('VALIDATION_ERROR', 'give version or env, not both', [
        { path: '/body/env', message: 'cannot be combined with version' },
      ])
    }
    const connection = await this.deps.connections.open(who.organizationId, body.connectionId)
    const rendered = await this.deps.render.render(
      { contextHeader: who.contextHeader, requestId: who.requestId },
      prompt,
      {
        variables: body.variables ?? {},
        draft: body.draft === true,
        ...(body.version !== undefined ? { version: body.version } : {}),
        ...(body.env !== undefined ? { env: body.env } : {}),
      },
    )
    const params = mergeParams(rendered.config, body.params)
    const model = chooseModel(body.model, rendered.config, connection.models)
    // A text prompt is one user message; a chat prompt's messages go as they were rendered.
    const messages = rendered.renderedMessages ?? [
      { role: 'user' as const, content: rendered.renderedContent },
    ]
    const release = this.deps.limiter.acquire(who.organizationId)
    return { id: newId(), who, body, rendered, connection, model, params, messages, release }
  }

  /**
   * Calls the model (streamed when `onDelta` is given; the stream is read on when the promise it
   * answers settles), logs the run, answers its result. The call is aborted when `signal` fires
   * (the client left) or at the deadline (504).
   */
  async execute(run: PreparedRun, signal: AbortSignal, onDelta?: OnDelta): Promise<RunResult> {
    const { timeoutMs, maxOutputBytes } = this.deps
    // The client leaving or the deadline aborts the call; set once the client is ready (loading
    // an SDK is not the provider's time), cleared when the call ends.
    let limit: Deadline | undefined
    let started = performance.now()
    let firstToken: number | undefined
    // What a stream delivered, kept for the log of a run cut short.
    let streamed = ''
    let streamedBytes = 0
    let cutShort: Completion | undefined
    const { connection } = run
    let completion: Completion
    let release = () => {}
    try {
      const egress = await this.deps.egress.dispatcherFor(connection.baseUrl)
      release = egress.release
      const cacheKey = `${connection._id}:${connection.revision}`
      let adapter = egress.pinned ? undefined : this.clients.get(cacheKey)
      if (!adapter) {
        adapter = await adapterFor(connection.provider, {
          apiKey: connection.apiKey,
          baseUrl: connection.baseUrl,
          headers: connection.headers,
          // The provider's answer bounded as it is read, before the SDK holds it whole.
          fetch: boundedFetch(egress.fetch, maxOutputBytes),
          fetchOptions: egress.fetchOptions,
          timeoutMs: timeoutMs + 1_000,
        })
        if (!egress.pinned) {
          if (this.clients.size >= CLIENT_CACHE_MAX) {
            const oldest = this.clients.keys().next().value
            if (oldest !== undefined) this.clients.delete(oldest)
          }
          this.clients.set(cacheKey, adapter)
        }
      }
      limit = deadline(signal, timeoutMs)
      started = performance.now()
      const callSignal = limit.signal
      // A client gone already (while the prompt rendered, or the lookup ran) gets no provider call.
      if (callSignal.aborted) throw callSignal.reason
      // Thrown inside the adapter's read of the stream, which ends it (the SDK aborts the
      // request). A stream's text and its tool calls (ids, names, arguments) are held by the adapter (the
      // text here and in the SSE buffer too): without a bound a provider could fill the memory.
      const count = (piece: string | number) => {
        streamedBytes += typeof piece === 'number' ? piece : Buffer.byteLength(piece)
        if (streamedBytes > maxOutputBytes) throw tooLong(maxOutputBytes)
      }
      const call = {
        model: run.model,
        messages: run.messages,
        params: run.params,
        signal: callSignal,
        onToolCallPiece: count,
      }
      completion = onDelta
        ? await adapter.stream(call, (content) => {
            firstToken ??= elapsed(started)
            count(content)
            streamed += content
            // The provider's stream is read on once the client has taken this delta, or when the
            // call is aborted (a reader that stopped does not hold the call past its deadline).
            const taken = onDelta(content)
            return taken && untilAborted(taken, callSignal)
          })
        : await adapter.complete(call)
      // The SDKs end an aborted stream quietly, as if the answer were complete: a call cut
      // by the client or the deadline is never an answer (it was logged as a success once).
      if (callSignal.aborted) {
        cutShort = completion
        throw callSignal.reason
      }
      // Also an answer not streamed (read whole by the SDK), and streamed tool-call arguments.
      if (outputBytes(completion) > maxOutputBytes) throw tooLong(maxOutputBytes)
    } catch (err) {
      const timedOut = limit?.timedOut() === true
      const clientLeft = signal.aborted && !timedOut
      const latencyMs = elapsed(started)
      if (clientLeft) {
        const failure = new AppError(
          'PROVIDER_ERROR',
          'the client disconnected; the model call was cancelled',
          { providerStatus: null },
        )
        // What is known of the cut answer: the text streamed so far, and the tokens when the
        // provider reported them before the cut (Anthropic counts the input at the start).
        const usage = cutShort?.usage
        await this.log(run, {
          status: 'cancelled',
          output: streamed ? { role: 'assistant', content: streamed } : null,
          finishReason: null,
          usage: usage && usage.inputTokens + usage.outputTokens > 0 ? usage : null,
          latencyMs,
          timeToFirstTokenMs: firstToken ?? null,
          error: { code: 'CLIENT_CLOSED', message: failure.message },
        })
        this.deps.log.info(
          { runId: run.id, connectionId: connection._id, model: run.model },
          'run cancelled by the client',
        )
        throw failure
      }
      const failure = providerFailure(err, {
        timedOut,
        timeoutMs,
        secrets: [connection.apiKey, ...Object.values(connection.headers)],
      })
      await this.log(run, {
        status: 'failed',
        output: null,
        finishReason: null,
        usage: null,
        latencyMs,
        timeToFirstTokenMs: firstToken ?? null,
        error: {
          code: failure.code,
          message: failure.message,
          ...(failure.details !== undefined ? { details: failure.details } : {}),
        },
      })
      this.deps.log.warn(
        {
          runId: run.id,
          connectionId: connection._id,
          model: run.model,
          code: failure.code,
          details: failure.details,
        },
        'model call failed',
      )
      throw failure
    } finally {
      limit?.clear()
      release()
      run.release()
    }
    const latencyMs = elapsed(started)
    const output = {
      role: 'assistant' as const,
      content: completion.content,
      ...(completion.toolCalls.length > 0 ? { toolCalls: completion.toolCalls } : {}),
    }
    const result: RunResult = {
      runId: run.id,
      output,
      finishReason: completion.finishReason,
      usage: completion.usage,
      latencyMs,
      timeToFirstTokenMs: firstToken ?? latencyMs,
      model: run.model,
      connectionId: connection._id,
      prompt: {
        promptId: run.rendered.promptId,
        versionId: run.rendered.versionId,
        version: run.rendered.version,
        draft: run.rendered.draft,
      },
      references: run.rendered.references,
      renderedMessages: run.messages,
    }
    await this.log(run, {
      status: 'succeeded',
      output,
      finishReason: completion.finishReason,
      usage: completion.usage,
      latencyMs,
      timeToFirstTokenMs: result.timeToFirstTokenMs,
      error: null,
    })
    return result
  }

  /** Writes the run to the log. A failed write is logged, never the caller's failure: the answer stands. */
  private async log(
    run: PreparedRun,
    outcome: Pick<
      RunRecord,
      'status' | 'output' | 'finishReason' | 'usage' | 'latencyMs' | 'timeToFirstTokenMs' | 'error'
    >,
  ): Promise<void> {
    const { caller } = run.who
    const record: RunRecord = {
      _id: run.id,
      organizationId: run.who.organizationId,
      prompt: {
        promptId: run.rendered.promptId,
        versionId: run.rendered.versionId,
        version: run.rendered.version,
        draft: run.rendered.draft,
      },
      connectionId: run.connection._id,
      provider: run.connection.provider,
      model: run.model,
      params: run.params,
      variables: run.body.variables ?? {},
      renderedMessages: run.messages,
      stream: run.body.stream === true,
      ...outcome,
      actor: { kind: caller.kind, userId: caller.userId ?? null, apiKeyId: caller.apiKeyId ?? null },
      createdAt: new Date().toISOString(),
    }
    try {
      await this.deps.store.insertRun(record)
    } catch (err) {
      this.deps.log.error({ err, runId: run.id }, 'writing the run log failed')
    }
  }

  async list(organizationId: string, promptId: string, page: number, limit: number): Promise<RunList> {
    const { items, total } = await this.deps.store.listRuns(organizationId, promptId, page, limit)
    return { runs: items, pagination: pagination(page, limit, total) }
  }

  async get(organizationId: string, runId: string): Promise<RunRecord> {
    const run = await this.deps.store.getRun(organizationId, runId)
    if (!run) throw new AppError('NOT_FOUND', 'run not found')
    return run
  }

  /** Drops runs older than the retention; how many went. */
  async prune(retentionDays: number): Promise<number> {
    return this.deps.store.deleteRunsBefore(new Date(Date.now() - retentionDays * 86_400_000).toISOString())
  }
}
