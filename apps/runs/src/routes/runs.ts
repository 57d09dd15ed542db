import { PassThrough } from 'node:stream'
import { API_ROUTES, AppError, CONTEXT_HEADER, type RunRequest, type RunResult } from '@pm/contracts'
import { requireOrganization, route, type Service } from '@pm/kit'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { RunsDeps } from '../deps.ts'
import type { PromptRef } from '../services/render.ts'

function wantsStream(request: FastifyRequest, body: RunRequest): boolean {
  if (body.stream !== undefined) return body.stream
  return String(request.headers.accept ?? '').includes('text/event-stream')
}

/** Aborted when the client goes away before its answer is complete (the provider call stops). */
function clientSignal(reply: FastifyReply): AbortSignal {
  const controller = new AbortController()
  reply.raw.once('close', () => {
    if (!reply.raw.writableFinished) controller.abort()
  })
  return controller.signal
}

const event = (name: string, data: unknown): string => `event: ${name}\ndata: ${JSON.stringify(data)}\n\n`

/** What a streamed run's `execute` is given: each delta, and a promise while the client is behind. */
export type StreamExecute = (onDelta: (content: string) => Promise<void> | undefined) => Promise<RunResult>

/**
 * A streamed run's answer into `out`, as SSE: `delta` events as they come, then `done` with the
 * same object as the JSON answer, or `error` (`failure` says what). A comment line goes out on
 * long silences. Deltas are written at the end of the event-loop turn they arrive in: those a
 * provider sent together (one read of its socket, often dozens under load) go out as one write
 * instead of one each, through this service and the gateway alike; a lone delta waits for
 * nothing. While `out` is over its high-water mark (the client reads slower than the provider
 * writes), `onDelta` answers a promise that settles when it has drained: the provider's stream is
 * not read meanwhile, so what waits here is bounded by the buffers, not by the answer's length.
 */
export function writeSse(
  out: PassThrough,
  heartbeatMs: number,
  execute: StreamExecute,
  failure: (err: unknown) => Record<string, unknown>,
): Promise<void> {
  let last = Date.now()
  const heartbeat = setInterval(() => {
    // Nothing is added while the client is behind: it has bytes to read already.
    if (Date.now() - last >= heartbeatMs && !out.writableNeedDrain) {
      out.write(': keep-alive\n\n')
      last = Date.now()
    }
  }, heartbeatMs)
  heartbeat.unref()
  let pending = ''
  let drained: Promise<void> | undefined
  const flush = () => {
    if (pending && !out.write(pending)) {
      drained ??= new Promise<void>((resolve) => {
        const done = () => {
          out.off('drain', done)
          out.off('close', done)
          drained = undefined
          resolve()
        }
        out.on('drain', done)
        out.on('close', done)
      })
    }
    pending = ''
  }
  return execute((content) => {
    last = Date.now()
    if (!pending) setImmediate(flush)
    pending += event('delta', { content })
    return drained
  })
    .then(
      (result) => {
        flush()
        out.end(event('done', result))
      },
      (err: unknown) => {
        flush()
        out.end(event('error', failure(err)))
      },
    )
    .finally(() => clearInterval(heartbeat))
}

/**
 * One run: rendered and checked first (any failure there is a plain HTTP error), then the
 * model call, answered as JSON or, streamed, as SSE (`writeSse`).
 */
async function run(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: RunsDeps,
  prompt: PromptRef,
  body: RunRequest,
): Promise<RunResult | FastifyReply> {
  const organizationId = requireOrganization(request)
  // Watched from the start: a client that leaves while the prompt renders is noticed too, and
  // `execute` then calls no provider.
  const signal = clientSignal(reply)
  const prepared = await deps.runs.prepare(
    {
      caller: request.caller,
      organizationId,
      contextHeader: String(request.headers[CONTEXT_HEADER]),
      requestId: request.id,
    },
    prompt,
    body,
  )
  if (!wantsStream(request, body)) return deps.runs.execute(prepared, signal)

  const out = new PassThrough()
  reply
    .header('content-type', 'text/event-stream; charset=utf-8')
    .header('cache-control', 'no-cache, no-transform')
    .header('x-accel-buffering', 'no')
  void writeSse(
    out,
    deps.heartbeatMs,
    (onDelta) => deps.runs.execute(prepared, signal, onDelta),
    (err) => {
      const e = err instanceof AppError ? err : new AppError('INTERNAL_ERROR', 'internal error')
      if (!(err instanceof AppError)) request.log.error({ err }, 'run failed')
      return {
        code: e.code,
        message: e.message,
        ...(e.details !== undefined ? { details: e.details } : {}),
        requestId: request.id,
      }
    },
  )
  return reply.send(out)
}

export function runRoutes(app: Service, deps: RunsDeps): void {
  route(app, API_ROUTES.runPrompt, async (request, reply) =>
    run(request, reply, deps, { id: request.params.id }, request.body),
  )
  route(app, API_ROUTES.runPromptBySlug, async (request, reply) =>
    run(request, reply, deps, { slug: request.params.slug }, request.body),
  )

  route(app, API_ROUTES.listPromptRuns, async (request) => {
    const org = requireOrganization(request)
    return deps.runs.list(org, request.params.id, request.query.page, request.query.limit)
  })

  route(app, API_ROUTES.getRun, async (request) => {
    const org = requireOrganization(request)
    return deps.runs.get(org, request.params.runId)
  })
}
