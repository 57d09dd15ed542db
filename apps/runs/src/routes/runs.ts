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

/**
 * One run: rendered and checked first (any failure there is a plain HTTP error), then the
 * model call, answered as JSON or, streamed, as SSE: `delta` events as they come, then `done`
 * with the same object as the JSON answer, or `error`. A comment line goes out on long silences.
 * Deltas are written at the end of the event-loop turn they arrive in: those a provider sent
 * together (one read of its socket, often dozens under load) go out as one write instead of one
 * each, through this service and the gateway alike; a lone delta waits for nothing.
 */
async function run(
  request: FastifyRequest,
  reply: FastifyReply,
  deps: RunsDeps,
  prompt: PromptRef,
  body: RunRequest,
): Promise<RunResult | FastifyReply> {
  const organizationId = requireOrganization(request)
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
  const signal = clientSignal(reply)
  if (!wantsStream(request, body)) return deps.runs.execute(prepared, signal)

  const out = new PassThrough()
  reply
    .header('content-type', 'text/event-stream; charset=utf-8')
    .header('cache-control', 'no-cache, no-transform')
    .header('x-accel-buffering', 'no')
  let last = Date.now()
  const heartbeat = setInterval(() => {
    if (Date.now() - last >= deps.heartbeatMs) {
      out.write(': keep-alive\n\n')
      last = Date.now()
    }
  }, deps.heartbeatMs)
  heartbeat.unref()
  let pending = ''
  const flush = () => {
    if (pending) out.write(pending)
    pending = ''
  }
  deps.runs
    .execute(prepared, signal, (content) => {
      last = Date.now()
      if (!pending) setImmediate(flush)
      pending += event('delta', { content })
    })
    .then(
      (result) => {
        flush()
        out.end(event('done', result))
      },
      (err: unknown) => {
        flush()
        const e = err instanceof AppError ? err : new AppError('INTERNAL_ERROR', 'internal error')
        if (!(err instanceof AppError)) request.log.error({ err }, 'run failed')
        out.end(
          event('error', {
            code: e.code,
            message: e.message,
            ...(e.details !== undefined ? { details: e.details } : {}),
            requestId: request.id,
          }),
        )
      },
    )
    .finally(() => clearInterval(heartbeat))
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
