import { NatsBus } from '@pm/bus'
import { EVENTS_STREAM } from '@pm/contracts'
import { newId } from '@pm/kit'
import { natsUrl } from '@pm/testkit'
import { expect } from 'vitest'
import { call, type Reply } from './client.ts'
import { ADMIN } from './slice.ts'

/** Helpers for the prompts e2e tests: sign-in, a typed caller, uploads, a JetStream tap. */

export interface ErrorReply {
  error: { code: string; message: string; details?: unknown; requestId: string }
}

export interface Session {
  token: string
  organizationId: string
  userId: string
}

export async function login(base: string, email = ADMIN.email, password = ADMIN.password): Promise<Session> {
  const res = await call<{ data: { accessToken: string; organizationId: string; user: { _id: string } } }>(
    base,
    'POST',
    '/api/v1/auth/login',
    { body: { email, password } },
  )
  if (res.status !== 200) throw new Error(`login failed: ${res.status} ${JSON.stringify(res.body)}`)
  return {
    token: res.body.data.accessToken,
    organizationId: res.body.data.organizationId,
    userId: res.body.data.user._id,
  }
}

/** A new user with their own workspace (the stack runs with AUTH_ALLOW_SIGNUP=true). */
export async function register(base: string, name: string): Promise<Session> {
  const email = `${name.toLowerCase()}-${newId()}@example.com`
  const res = await call<{ data: { accessToken: string; organizationId: string; user: { _id: string } } }>(
    base,
    'POST',
    '/api/v1/auth/register',
    { body: { email, password: 'a long enough password', name } },
  )
  expect(res.status).toBe(201)
  return {
    token: res.body.data.accessToken,
    organizationId: res.body.data.organizationId,
    userId: res.body.data.user._id,
  }
}

export async function apiKey(
  base: string,
  session: Session,
  scopes: string[],
  rateLimit?: { points: number; durationSeconds: number },
): Promise<string> {
  const res = await call<{ data: { key: string } }>(
    base,
    'POST',
    `/api/v1/organizations/${session.organizationId}/api-keys`,
    { token: session.token, body: { name: `key-${newId()}`, scopes, ...(rateLimit ? { rateLimit } : {}) } },
  )
  expect(res.status).toBe(201)
  return res.body.data.key
}

export type Caller = <T = unknown>(method: string, path: string, body?: unknown) => Promise<Reply<T>>

/** Calls the gateway with one credential (or none). */
export function caller(base: string, token?: string): Caller {
  return (method, path, body) => call(base, method, path, { token, body })
}

/** The payload of a success, after checking the status. */
export function data<T>(reply: Reply<unknown>, status = 200): T {
  if (reply.status !== status) {
    throw new Error(`expected ${status}, got ${reply.status}: ${JSON.stringify(reply.body)}`)
  }
  return (reply.body as { data: T }).data
}

/** The error code of a failure, after checking the status. */
export function failure(reply: Reply<unknown>, status: number): string {
  if (reply.status !== status) {
    throw new Error(`expected ${status}, got ${reply.status}: ${JSON.stringify(reply.body)}`)
  }
  return (reply.body as ErrorReply).error.code
}

/** A multipart upload of `content` as field `field`. */
export async function upload(
  base: string,
  token: string,
  content: string | Uint8Array,
  opts: { field?: string; query?: string; headers?: Record<string, string> } = {},
): Promise<Reply<unknown>> {
  const form = new FormData()
  form.append(opts.field ?? 'file', new Blob([content], { type: 'text/csv' }), 'prompts.csv')
  const res = await fetch(`${base}/api/v1/prompts/import${opts.query ?? ''}`, {
    method: 'POST',
    headers: { ...opts.headers, authorization: `Bearer ${token}` },
    body: form,
  })
  const text = await res.text()
  let body: unknown = text
  try {
    body = text ? JSON.parse(text) : null
  } catch {
    // not JSON: keep the text
  }
  return { status: res.status, body, headers: res.headers }
}

export interface Tapped {
  msgId: string
  data: unknown
}

/**
 * A durable JetStream consumer over every `pm.events.>` subject, from the start of the
 * stream, recording what it receives (with each message's id).
 */
export async function tapEvents(): Promise<{ received: Tapped[]; bus: NatsBus }> {
  const bus = await NatsBus.connect({
    url: await natsUrl(),
    stream: EVENTS_STREAM,
    streamSubjects: ['pm.events.>'],
    name: `e2e-tap-${newId()}`,
  })
  const received: Tapped[] = []
  await bus.consume('pm.events.>', `e2e-tap-${newId()}`, async (payload, meta) => {
    received.push({ msgId: meta.msgId, data: payload })
  })
  return { received, bus }
}
