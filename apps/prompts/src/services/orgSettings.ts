import { AppError, CONTEXT_HEADER } from '@pm/contracts'
import { callInternal, closePool, InternalTimeoutError, internalPath, isId, signContext } from '@pm/kit'
import { Pool } from 'undici'

/** Where a promote learns which environments the organization protects. */
export interface OrgSettings {
  protectedEnvironments(organizationId: string, requestId: string): Promise<string[]>
  close(): Promise<void>
}

/**
 * Asks identity (which owns organizations) on each promote: promotes are rare and a protection
 * just switched on must hold at once, so nothing is cached. Signed as the 'service' caller.
 * Identity unreachable: the promote fails (503) rather than skip the check.
 */
export class IdentityOrgSettings implements OrgSettings {
  private readonly pool: Pool
  private readonly secret: string

  constructor(baseUrl: string, secret: string) {
    this.pool = new Pool(baseUrl, { connections: 4, keepAliveTimeout: 30_000 })
    this.secret = secret
  }

  async protectedEnvironments(organizationId: string, requestId: string): Promise<string[]> {
    if (!isId(organizationId)) throw new AppError('NOT_FOUND', 'organization not found')
    let answer: Awaited<ReturnType<typeof callInternal>>
    try {
      answer = await callInternal(this.pool, {
        method: 'GET',
        path: internalPath('internal', 'organizations', organizationId, 'protected-environments'),
        headers: {
          [CONTEXT_HEADER]: signContext({ kind: 'service', scopes: [], requestId }, this.secret),
          'x-request-id': requestId,
        },
        timeoutMs: 5_000,
      })
    } catch (err) {
      if (err instanceof InternalTimeoutError)
        throw new AppError('UPSTREAM_TIMEOUT', 'the identity service did not answer in time')
      throw new AppError('SERVICE_UNAVAILABLE', 'the identity service is not reachable')
    }
    const body = answer.body as { protectedEnvironments?: unknown } | null
    if (answer.statusCode === 200 && Array.isArray(body?.protectedEnvironments)) {
      return body.protectedEnvironments.filter((e): e is string => typeof e === 'string')
    }
    if (answer.statusCode === 404) throw new AppError('NOT_FOUND', 'organization not found')
    throw new AppError('SERVICE_UNAVAILABLE', `the identity service answered ${answer.statusCode}`)
  }

  async close(): Promise<void> {
    await closePool(this.pool)
  }
}

/** For tests and a prompts service run alone: a fixed list per organization. */
export class StaticOrgSettings implements OrgSettings {
  private readonly byOrg = new Map<string, string[]>()
  async protectedEnvironments(organizationId: string): Promise<string[]> {
    return this.byOrg.get(organizationId) ?? []
  }
  set(organizationId: string, envs: string[]): void {
    this.byOrg.set(organizationId, envs)
  }
  async close(): Promise<void> {}
}
