import { OrganizationParams } from '../api/index.ts'
import { AuditExportQuery, AuditList, AuditQuery } from '../audit.ts'
import { ORG_PREFIX, type RouteSpec } from './spec.ts'

/** The audit log of an organization (DESIGN section 15), kept by the prompts service. */
export const AUDIT_ROUTES = {
  listAuditLog: {
    method: 'GET',
    path: `${ORG_PREFIX}/audit-log`,
    tag: 'organizations',
    summary: 'The audit log, newest first',
    description:
      'OWNER/ADMIN only. One entry per committed change (actor, action, resource, request id, ' +
      'IP, summary). Filters: `actor` (user or key id), `action`, `resourceId`, `from`, `to`.',
    auth: 'user',
    upstream: 'prompts',
    workspace: 'path',
    params: OrganizationParams,
    query: AuditQuery,
    status: 200,
    response: AuditList,
    errors: ['FORBIDDEN'],
  },
  exportAuditLog: {
    method: 'GET',
    path: `${ORG_PREFIX}/audit-log/export`,
    tag: 'organizations',
    summary: 'The audit log as JSON Lines or CSV',
    description:
      'OWNER/ADMIN only; the same filters as the list. CSV cells that a spreadsheet would read as ' +
      "a formula (starting with `=`, `+`, `-`, `@`, tab or carriage return) are prefixed with `'`.",
    auth: 'user',
    upstream: 'prompts',
    workspace: 'path',
    params: OrganizationParams,
    query: AuditExportQuery,
    status: 200,
    envelope: false,
    produces: 'text/csv',
    errors: ['FORBIDDEN'],
  },
} as const satisfies Record<string, RouteSpec>
