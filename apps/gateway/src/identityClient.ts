import {
  AppError,
  CONTEXT_HEADER,
  type ErrorCode,
  isErrorCode,
  type MembershipStatus,
  type ResolvedApiKey,
  type Role,
} from '@pm/contracts'
import { callInternal, closePool, InternalTimeoutError, internalPath, isId, signContext } from '@pm/kit'
import { Pool } from 'undici'

export interface MembershipInfo {
  role: Role
  status: MembershipStatus
  /** The user's display name (else the email): names the actor in the audit log. */
  name?: string
}

export interface IdentityClientOptions {
  /** Deadline of one call, connect to last byte. */
  timeoutMs?: number
  connections?: number
}

/**
 * The gateway's calls to identity's internal routes, signed as the 'service' caller. Ids are
 * checked before anything is sent and every path segment is encoded (no client input reaches
 * an internal URL as it is); see callInternal for why a failed call never leaks a connection.
 */
export class IdentityClient {
  private readonly pool: Pool
  private readonly secret: string
  private readonly timeoutMs: number

  constructor(baseUrl: string, secret: string, opts: IdentityClientOptions = {}) {
    this.pool = new Pool(baseUrl, { connections: opts.connections ?? 16, keepAliveTimeout: 30_000 })
    this.secret = secret
    this.timeoutMs = opts.timeoutMs ?? 5_000
  }

  private headers(requestId: string): Record<string, string> {
    return {
      [CONTEXT_HEADER]: signContext({ kind: 'service', scopes: [], requestId }, this.secret),
      'x-request-id': requestId,
      'content-type': 'application/json',
    }
  }

  private async call<T>(
    method: 'GET' | 'POST',
    path: string,
    requestId: string,
    body?: unknown,
  ): Promise<T | null> {
    let answer: Awaited<ReturnType<typeof callInternal>>
    try {
      answer = await callInternal(this.pool, {
        method,
        path,
        headers: this.headers(requestId),
        body: body === undefined ? undefined : JSON.stringify(body),
        timeoutMs: this.timeoutMs,
      })
    } catch (err) {
      if (err instanceof AppError) throw err
      if (err instanceof InternalTimeoutError)
        throw new AppError('UPSTREAM_TIMEOUT', 'the identity service did not answer in time')
      throw new AppError('SERVICE_UNAVAILABLE', 'the identity service is not reachable')
    }
    if (answer.statusCode === 404) return null
    if (answer.statusCode === 200 && answer.body !== null) return answer.body as T
    // Identity refusing what was asked (400 VALIDATION_ERROR, ...) is the caller's answer, not an
    // outage; a credential problem between us and identity is ours.
    const error = (answer.body as { error?: { code?: unknown; message?: unknown; details?: unknown } } | null)
      ?.error
    if (
      answer.statusCode >= 400 &&
      answer.statusCode < 500 &&
      isErrorCode(error?.code) &&
      error.code !== 'INVALID_CREDENTIALS'
    ) {
      throw new AppError(
        error.code as ErrorCode,
        typeof error.message === 'string' ? error.message : 'refused',
        error.details,
      )
    }
    throw new AppError('SERVICE_UNAVAILABLE', `the identity service answered ${answer.statusCode}`)
  }

  resolveKey(hash: string, requestId: string): Promise<ResolvedApiKey | null> {
    return this.call<ResolvedApiKey>('POST', '/internal/api-keys/resolve', requestId, { hash })
  }

  /** The membership, or null when there is none (an id that is not an id has none). */
  async membership(
    organizationId: string,
    userId: string,
    requestId: string,
  ): Promise<MembershipInfo | null> {
    if (!isId(organizationId) || !isId(userId)) return null
    return this.call<MembershipInfo>(
      'GET',
      internalPath('internal', 'memberships', organizationId, userId),
      requestId,
    )
  }

  async close(): Promise<void> {
    await closePool(this.pool)
  }
}
