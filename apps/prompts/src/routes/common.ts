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
