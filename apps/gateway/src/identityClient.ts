import {
  AppError,
  CONTEXT_HEADER,
  type MembershipStatus,
  type ResolvedApiKey,
  type Role,
} from '@pm/contracts'
import { signContext } from '@pm/kit'
import { Pool } from 'undici'

export interface MembershipInfo {
  role: Role
  status: MembershipStatus
}

/** The gateway's calls to identity's internal routes, signed as the 'service' caller. */
export class IdentityClient {
  private readonly pool: Pool
  private readonly secret: string

  constructor(baseUrl: string, secret: string) {
    this.pool = new Pool(baseUrl, { connections: 16, keepAliveTimeout: 30_000 })
    this.secret = secret
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
    let res: Awaited<ReturnType<Pool['request']>>
    try {
      res = await this.pool.request({
        method,
        path,
        headers: this.headers(requestId),
        body: body === undefined ? undefined : JSON.stringify(body),
        headersTimeout: 5_000,
        bodyTimeout: 5_000,
      })
    } catch {
      throw new AppError('SERVICE_UNAVAILABLE', 'the identity service is not reachable')
    }
    if (res.statusCode === 404) {
      await res.body.dump()
      return null
    }
    if (res.statusCode !== 200) {
      await res.body.dump()
      throw new AppError('SERVICE_UNAVAILABLE', `the identity service answered ${res.statusCode}`)
    }
    return (await res.body.json()) as T
  }

  resolveKey(hash: string, requestId: string): Promise<ResolvedApiKey | null> {
    return this.call<ResolvedApiKey>('POST', '/internal/api-keys/resolve', requestId, { hash })
  }

  membership(organizationId: string, userId: string, requestId: string): Promise<MembershipInfo | null> {
    return this.call<MembershipInfo>('GET', `/internal/memberships/${organizationId}/${userId}`, requestId)
  }

  async close(): Promise<void> {
    await this.pool.close()
  }
}
