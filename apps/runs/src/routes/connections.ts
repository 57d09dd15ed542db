import { API_ROUTES, AppError } from '@pm/contracts'
import { auditContextOf, route, type Service } from '@pm/kit'
import type { FastifyRequest } from 'fastify'
import type { RunsDeps } from '../deps.ts'

/**
 * Connections are managed by an ADMIN or OWNER of the organization, or an API key with
 * organization:write. The gateway has checked that the caller acts in `:id` (and the key's
 * scope); this repeats what it can, so the service holds its own line.
 */
function requireManager(request: FastifyRequest, organizationId: string): string {
  const { caller } = request
  if (caller.organizationId !== organizationId) throw new AppError('NOT_FOUND', 'organization not found')
  if (caller.kind === 'user') {
    if (caller.role !== 'OWNER' && caller.role !== 'ADMIN') {
      throw new AppError(
        'FORBIDDEN',
        'only an ADMIN or OWNER of the organization may manage provider connections',
      )
    }
    return organizationId
  }
  if (caller.kind === 'apiKey') {
    if (!caller.scopes.includes('organization:write')) {
      throw new AppError('INSUFFICIENT_SCOPE', 'this API key needs the organization:write scope')
    }
    return organizationId
  }
  throw new AppError('FORBIDDEN', 'provider connections are managed by organization admins and API keys')
}

export function connectionRoutes(app: Service, { connections }: Pick<RunsDeps, 'connections'>): void {
  route(app, API_ROUTES.listConnections, async (request) => {
    const org = requireManager(request, request.params.id)
    return { connections: await connections.list(org) }
  })

  route(app, API_ROUTES.createConnection, async (request, reply) => {
    const org = requireManager(request, request.params.id)
    const created = await connections.create(org, request.body, auditContextOf(request))
    reply.code(201)
    return created
  })

  route(app, API_ROUTES.updateConnection, async (request) => {
    const org = requireManager(request, request.params.id)
    return connections.update(org, request.params.connectionId, request.body, auditContextOf(request))
  })

  route(app, API_ROUTES.deleteConnection, async (request) => {
    const org = requireManager(request, request.params.id)
    return connections.remove(org, request.params.connectionId, auditContextOf(request))
  })
}
