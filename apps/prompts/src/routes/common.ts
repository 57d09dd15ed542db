import type { FastifyRequest } from 'fastify'

/** Who makes this change, for its audit entry (the actor named as the gateway named it). */
export { auditContextOf } from '@pm/kit'

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
