import { Readable } from 'node:stream'
import { AppError, DEFAULT_BODY_LIMIT } from '@pm/contracts'
import { isJsonMediaType, parseJsonBody } from '@pm/kit'
import type { FastifyRequest } from 'fastify'
import type { RoutePolicy } from './policy.ts'

/** Reads a streamed request body into memory, refusing more than `limit` bytes. */
export function readBody(stream: Readable, limit: number): Promise<Buffer> {
  // Events rather than an async iterator: this runs on every invoke, and the body is small.
  if (stream.readableEnded) return Promise.resolve(Buffer.alloc(0))
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    let size = 0
    const onData = (chunk: Buffer | string) => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
      size += buf.length
      if (size > limit) {
        cleanup()
        stream.resume()
        reject(new AppError('PAYLOAD_TOO_LARGE', 'request body is too large'))
        return
      }
      chunks.push(buf)
    }
    const onEnd = () => {
      cleanup()
      resolve(chunks.length === 1 ? (chunks[0] as Buffer) : Buffer.concat(chunks, size))
    }
    const onError = (err: Error) => {
      cleanup()
      reject(err)
    }
    const cleanup = () => {
      stream.off('data', onData)
      stream.off('end', onEnd)
      stream.off('error', onError)
    }
    stream.on('data', onData)
    stream.on('end', onEnd)
    stream.on('error', onError)
  })
}

/**
 * The largest body an API key's request streams through unread: invoke bodies are a few hundred
 * bytes. A larger one (or one of unknown length) is read here as before, so that the gateway
 * itself refuses an oversized or unreadable body, and never streams a large body into a service
 * that may answer before reading it all (the client would see the connection cut, not the 413).
 */
export const UNREAD_BODY_MAX = 64 * 1024

/**
 * Whether the gateway must read the body before deciding: a login (the email's budget), a
 * fork target, or the workspace of a route a user token calls (organizationId may be in it).
 * With an API key the workspace is the key's own: a small body of declared length is streamed
 * through unread, and the service refuses a body `organizationId` naming another workspace
 * (kit's route(), 404), by the same parser the gateway would have used. That saves the invoke
 * hot path a read, a parse and a re-stream of every body.
 */
export function needsBody(
  policy: RoutePolicy,
  credential: 'apiKey' | 'user' | null,
  contentLength?: string | undefined,
): boolean {
  if (policy.limit === 'login' || policy.target !== undefined) return true
  const length = contentLength === undefined ? Number.NaN : Number(contentLength)
  // On every route, not only a workspace's: a service that answers 413 before reading an
  // oversized body (identity's organization create, a public invoke) broke the proxy's upload,
  // and the client saw an empty 499 or no answer at all.
  if (!(Number.isSafeInteger(length) && length <= UNREAD_BODY_MAX)) return true
  if (policy.org !== 'context' || policy.auth === 'public') return false
  return credential !== 'apiKey'
}

/**
 * Reads the body once when the route needs a field of it, keeps the parsed fields and the
 * length on the request, and puts the very same bytes back for the proxy to forward. It is read
 * by the services' own rule (kit's parseJsonBody), and a body the gateway cannot read is refused
 * here rather than passed on, so that a service never acts on fields the gateway did not see
 * (issue 14, finding 4): malformed JSON is a 400, another media type a 415. A multipart route
 * (CSV import) is streamed through unread: its workspace comes from the query.
 */
export async function peekBody(
  request: FastifyRequest,
  policy: RoutePolicy,
  credential: 'apiKey' | 'user' | null,
): Promise<void> {
  if (
    !(request.body instanceof Readable) ||
    !needsBody(policy, credential, request.headers['content-length']) ||
    policy.bodyType === 'multipart'
  )
    return
  const raw = await readBody(request.body, policy.bodyLimit ?? DEFAULT_BODY_LIMIT)
  request.peekedLength = raw.length
  request.body = Readable.from([raw])
  if (raw.length === 0) return
  if (!isJsonMediaType(request.headers['content-type'])) {
    throw new AppError(
      'UNSUPPORTED_MEDIA_TYPE',
      'unsupported content type: send the body as JSON with "content-type: application/json"',
    )
  }
  const parsed = parseJsonBody(raw)
  request.peekedBody =
    parsed !== null && typeof parsed === 'object' && !Array.isArray(parsed)
      ? (parsed as Record<string, unknown>)
      : null
}

export function bodyField(request: FastifyRequest, field: string): string | undefined {
  const value = request.peekedBody?.[field]
  return typeof value === 'string' ? value : undefined
}

export function queryField(request: FastifyRequest, field: string): string | undefined {
  const value = (request.query as Record<string, unknown> | undefined)?.[field]
  return typeof value === 'string' ? value : undefined
}
