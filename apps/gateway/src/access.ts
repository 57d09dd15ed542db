import { AppError, type CallerContext, type ResolvedApiKey, type Role } from '@pm/contracts'
import { workspaceIdInput } from './inputs.ts'
import { type RoutePolicy, scopesForRole } from './policy.ts'

/** Who sent the request, as verified by the Authenticator (auth.ts); none on public routes. */
export type Credential =
  | { kind: 'apiKey'; key: ResolvedApiKey }
  | { kind: 'user'; userId: string; org: string | undefined }

export interface ActiveMember {
  role: Role
  name?: string
}

/** The request fields access depends on: `organizationId` and the fork target. */
export interface AccessFields {
  /** `organizationId` from the query string, as parsed (an array when repeated). */
  queryOrganizationId?: unknown
  /** String fields of the JSON body the gateway peeked at (organizationId, targetOrganizationId). */
  body?: Readonly<Record<string, unknown>> | null
}

/** What access needs from outside: membership lookups, and the API key's rate limit. */
export interface AccessPorts {
  /**
   * The user's role in an organization when the membership is ACTIVE, else null; with the
   * user's name (display name or email), which names the actor in the audit log.
   */
  activeMember(organizationId: string, userId: string): Promise<ActiveMember | null>
  /**
   * Takes a point from the key's rate limit (throws RATE_LIMITED): after the credential kind
   * and scope are checked, before the workspace is.
   */
  limitApiKey?(key: ResolvedApiKey): Promise<void>
}

/** A workspace id named in the body: absent, or checked (400 unless a 24-hex id). */
function bodyId(fields: AccessFields, name: string): string | undefined {
  return workspaceIdInput(fields.body?.[name], `/body/${name}`)
}

/**
 * What an API key may not do on a route whatever the request holds: a user-only route, a scope
 * it lacks. Checked before the gateway reads a body too (app.ts), so a key is answered 403 for
 * these, not 400 or 413 for a body it had no business sending.
 */
export function checkKeyAllowed(policy: RoutePolicy, key: ResolvedApiKey): void {
  if (policy.auth === 'user')
    throw new AppError('USER_TOKEN_REQUIRED', 'this operation needs a user access token')
  if (policy.scope && !key.scopes.includes(policy.scope)) {
    throw new AppError('INSUFFICIENT_SCOPE', `the API key lacks the ${policy.scope} scope`)
  }
}

/**
 * Who the caller is and which workspace it acts in, decided from the route's policy, its
 * path parameters, the verified credential and the request's fields. No Fastify: every rule
 * of the gateway's access line is here, and test/access.test.ts holds it as a table.
 */
export async function resolveCaller(
  policy: RoutePolicy,
  params: Readonly<Record<string, string | undefined>>,
  credential: Credential | null,
  fields: AccessFields,
  ports: AccessPorts,
  requestId: string,
): Promise<CallerContext> {
  const caller: CallerContext = { kind: 'anonymous', scopes: [], requestId }
  if (policy.auth !== 'public') {
    if (!credential) throw new AppError('AUTH_REQUIRED', 'credentials are required')
    const asked = () =>
      workspaceIdInput(fields.queryOrganizationId, '/query/organizationId') ??
      bodyId(fields, 'organizationId')
    if (credential.kind === 'apiKey') {
      const { key } = credential
      checkKeyAllowed(policy, key)
      await ports.limitApiKey?.(key)
      caller.kind = 'apiKey'
      caller.apiKeyId = key._id
      caller.scopes = key.scopes
      caller.organizationId = key.organizationId
      if (key.name) caller.actorName = key.name
      if (policy.org === 'path' && params.id !== key.organizationId)
        throw new AppError('NOT_FOUND', 'organization not found')
      if (policy.org === 'context') {
        const organizationId = asked()
        if (organizationId !== undefined && organizationId !== key.organizationId)
          throw new AppError('NOT_FOUND', 'organization not found')
      }
    } else {
      caller.kind = 'user'
      caller.userId = credential.userId
      let organizationId: string | undefined
      if (policy.org === 'path') organizationId = params.id
      else if (policy.org === 'context') {
        organizationId = asked() ?? credential.org
        if (!organizationId) {
          throw new AppError('VALIDATION_ERROR', 'organizationId is required with an access token', [
            { path: '/query/organizationId', message: 'is required' },
          ])
        }
      }
      if (organizationId) {
        const member = await ports.activeMember(organizationId, credential.userId)
        if (!member) throw new AppError('NOT_FOUND', 'organization not found')
        const { role } = member
        if (member.name) caller.actorName = member.name
        caller.organizationId = organizationId
        caller.role = role
        caller.scopes = scopesForRole(role)
        if (policy.scope && !caller.scopes.includes(policy.scope)) {
          throw new AppError('INSUFFICIENT_SCOPE', `your role does not allow ${policy.scope}`)
        }
      }
    }
  }
  if (policy.target) {
    const target =
      bodyId(fields, policy.target) ??
      (policy.target === 'targetOrganizationId' ? caller.organizationId : undefined)
    if (target && caller.userId) {
      const member = await ports.activeMember(target, caller.userId)
      if (!member)
        throw new AppError(
          'MEMBERSHIP_REQUIRED',
          'an ACTIVE membership in the target organization is required',
        )
      caller.targetOrganizationId = target
    }
  }
  return caller
}
