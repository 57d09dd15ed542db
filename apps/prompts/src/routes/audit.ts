import { API_ROUTES, AppError, type AuditEntry, pagination } from '@pm/contracts'
import { requireUser, route, type Service } from '@pm/kit'
import type { FastifyRequest } from 'fastify'
import type { PromptsDeps } from '../deps.ts'
import { csvHeader, csvLine, jsonLine } from '../domain/audit.ts'

/** The organization in the path, already checked by the gateway; OWNER/ADMIN only. */
function requireAuditor(request: FastifyRequest, id: string): string {
  requireUser(request)
  const { caller } = request
  if (caller.organizationId !== id) throw new AppError('NOT_FOUND', 'organization not found')
  if (caller.role !== 'OWNER' && caller.role !== 'ADMIN') {
    throw new AppError('FORBIDDEN', 'only an ADMIN or OWNER of the organization may read its audit log')
  }
  return id
}

function filterOf(
  organizationId: string,
  q: { actor?: string; action?: string; resourceId?: string; from?: string; to?: string },
) {
  return {
    organizationId,
    ...(q.actor !== undefined ? { actor: q.actor } : {}),
    ...(q.action !== undefined ? { action: q.action } : {}),
    ...(q.resourceId !== undefined ? { resourceId: q.resourceId } : {}),
    ...(q.from !== undefined ? { from: q.from } : {}),
    ...(q.to !== undefined ? { to: q.to } : {}),
  }
}

/** The audit log (DESIGN section 15): entries the outbox relay copied from each change's transaction. */
export function auditRoutes(app: Service, { service }: PromptsDeps): void {
  route(app, API_ROUTES.listAuditLog, async (request) => {
    const organizationId = requireAuditor(request, request.params.id)
    const { page, limit } = request.query
    const { entries, total } = await service.listAudit(filterOf(organizationId, request.query), {
      page,
      limit,
    })
    return { entries, pagination: pagination(page, limit, total) }
  })

  route(app, API_ROUTES.exportAuditLog, async (request, reply) => {
    const organizationId = requireAuditor(request, request.params.id)
    const filter = filterOf(organizationId, request.query)
    const csv = request.query.format === 'csv'
    const chunks: string[] = csv ? [csvHeader()] : []
    const line = (e: AuditEntry) => (csv ? csvLine(e) : jsonLine(e))
    for await (const entries of service.exportAudit(filter)) for (const e of entries) chunks.push(line(e))
    reply
      .header('content-type', csv ? 'text/csv; charset=utf-8' : 'application/x-ndjson; charset=utf-8')
      .header('content-disposition', `attachment; filename="audit-log.${csv ? 'csv' : 'jsonl'}"`)
    return reply.send(chunks.join(''))
  })
}
