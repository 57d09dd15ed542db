import { API_ROUTES, AppError, type Scope } from '@pm/contracts'
import { auditContextOf, requireUser, route, type Service } from '@pm/kit'
import type { FastifyRequest } from 'fastify'
import type { IdentityDeps } from '../deps.ts'
import { publicOrganization } from '../domain/views.ts'
import type { Actor } from '../domain/members.ts'

/** The gateway has checked access to `:id` and put it in the context; anything else is 404. */
function orgInContext(request: FastifyRequest, id: string): string {
  if (request.caller.organizationId !== id) throw new AppError('NOT_FOUND', 'organization not found')
  return id
}

/**
 * The gateway applies the route table's scope; checking it again here keeps a service
 * reached with a context for another route from doing more than that context allows.
 */
function requireScope(request: FastifyRequest, id: string, scope: Scope): string {
  orgInContext(request, id)
  if (!request.caller.scopes.includes(scope)) {
    throw new AppError('INSUFFICIENT_SCOPE', `the ${scope} scope is required`)
  }
  return id
}

/** Key management needs a user who is ADMIN or OWNER of the organization. */
function requireAdmin(request: FastifyRequest, id: string): string {
  const userId = requireUser(request)
  orgInContext(request, id)
  if (request.caller.role !== 'OWNER' && request.caller.role !== 'ADMIN') {
    throw new AppError('FORBIDDEN', 'only an ADMIN or OWNER of the organization may do this')
  }
  return userId
}

function actorOf(request: FastifyRequest): Actor {
  const { caller } = request
  if (caller.kind === 'user' && caller.userId)
    return { kind: 'user', userId: caller.userId, role: caller.role }
  if (caller.kind === 'apiKey') return { kind: 'apiKey' }
  throw new AppError('AUTH_REQUIRED', 'credentials are required')
}

export function organizationRoutes(app: Service, deps: IdentityDeps): void {
  const { identity } = deps

  route(app, API_ROUTES.listOrganizations, async (request) => {
    const { caller } = request
    // A key belongs to exactly one workspace: that one is the whole list.
    const orgs =
      caller.kind === 'apiKey'
        ? await identity.organizationsOf({ organizationId: caller.organizationId })
        : await identity.organizationsOf({ userId: requireUser(request) })
    return { organizations: orgs.map(publicOrganization) }
  })

  route(app, API_ROUTES.createOrganization, async (request, reply) => {
    const userId = requireUser(request)
    const org = await identity.createOrganization(request.body.name, userId, auditContextOf(request))
    request.log.info({ organizationId: org._id, userId }, 'organization created')
    reply.code(201)
    return publicOrganization(org)
  })

  route(app, API_ROUTES.getOrganization, async (request) => {
    const id = requireScope(request, request.params.id, 'organization:read')
    return publicOrganization(await identity.getOrganization(id))
  })

  route(app, API_ROUTES.updateOrganization, async (request) => {
    const id = requireScope(request, request.params.id, 'organization:write')
    // Who may move production is an OWNER's or ADMIN's decision (DESIGN section 15): not a key's.
    if (request.body.protectedEnvironments !== undefined) requireAdmin(request, id)
    return publicOrganization(await identity.updateOrganization(id, request.body, auditContextOf(request)))
  })

  // Members
  route(app, API_ROUTES.listMembers, async (request) => {
    const id = requireScope(request, request.params.id, 'organization:read')
    return { members: await identity.listMembers(id) }
  })

  route(app, API_ROUTES.addMember, async (request, reply) => {
    const id = requireScope(request, request.params.id, 'organization:write')
    const member = await identity.addMember(id, actorOf(request), request.body, auditContextOf(request))
    request.log.info({ organizationId: id, userId: member.userId, role: member.role }, 'member added')
    reply.code(201)
    return member
  })

  route(app, API_ROUTES.updateMember, async (request) => {
    const id = requireScope(request, request.params.id, 'organization:write')
    const member = await identity.updateMember(
      id,
      actorOf(request),
      request.params.userId,
      request.body,
      auditContextOf(request),
    )
    request.log.info(
      { organizationId: id, userId: member.userId, role: member.role, status: member.status },
      'member changed',
    )
    return member
  })

  route(app, API_ROUTES.removeMember, async (request) => {
    const id = requireScope(request, request.params.id, 'organization:write')
    const member = await identity.removeMember(
      id,
      actorOf(request),
      request.params.userId,
      auditContextOf(request),
    )
    request.log.info({ organizationId: id, userId: member.userId }, 'member removed')
    return member
  })

  // API keys (a user who is ADMIN or OWNER; never an API key)
  route(app, API_ROUTES.listApiKeys, async (request) => {
    requireAdmin(request, request.params.id)
    return { apiKeys: await identity.listApiKeys(request.params.id) }
  })

  route(app, API_ROUTES.createApiKey, async (request, reply) => {
    const userId = requireAdmin(request, request.params.id)
    const created = await identity.createApiKey(
      request.params.id,
      userId,
      request.body,
      auditContextOf(request),
    )
    request.log.info({ apiKeyId: created.apiKey._id, scopes: created.apiKey.scopes }, 'api key created')
    reply.code(201)
    return created
  })

  route(app, API_ROUTES.renameApiKey, async (request) => {
    requireAdmin(request, request.params.id)
    const key = await identity.renameApiKey(
      request.params.id,
      request.params.keyId,
      request.body.name,
      auditContextOf(request),
    )
    request.log.info({ apiKeyId: key._id }, 'api key renamed')
    return key
  })

  route(app, API_ROUTES.revokeApiKey, async (request) => {
    requireAdmin(request, request.params.id)
    const key = await identity.revokeApiKey(request.params.id, request.params.keyId, auditContextOf(request))
    request.log.info({ apiKeyId: key._id }, 'api key revoked')
    return key
  })
}
