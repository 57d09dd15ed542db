import type { FastifyRequest } from 'fastify'
import type { AuditContext } from '../domain/audit.ts'

/**
 * Who makes this change, for its audit entry. The gateway forwards the client's address as
 * `x-pm-client-ip` (a client cannot set it: the gateway strips `x-pm-*`). The caller context
 * carries ids only, so the actor's name is its id here (names are identity's).
 */
export function auditContextOf(request: FastifyRequest): AuditContext | undefined {
  const { caller } = request
  const id = caller.kind === 'apiKey' ? caller.apiKeyId : caller.userId
  if (!id || (caller.kind !== 'user' && caller.kind !== 'apiKey')) return undefined
  const ip = request.headers['x-pm-client-ip']
  return {
    actor: { type: caller.kind, id, name: id },
    requestId: request.id,
    ip: typeof ip === 'string' ? ip : request.ip,
  }
}

/**
 * Query and body of routes that take nothing but the workspace, and the path parameters:
 * the same schemas the route catalogue (and so the OpenAPI document) uses.
 */
export {
  OrganizationBody as OrgBody,
  OrganizationQuery as OrgQuery,
  VariableParams,
  VersionParams,
} from '@pm/contracts'

/**
 * For routes whose body is optional (publish, save-and-publish, restore): a request sent
 * without any body is validated as `{}` instead of failing "body must be object".
 */
export async function emptyBodyAsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined) request.body = {}
}
