import {
  AddMemberRequest,
  ApiKeyList,
  AppError,
  CreateApiKeyRequest,
  CreatedApiKey,
  CreateOrganizationRequest,
  IdParams,
  Member,
  MemberList,
  ObjectId,
  Organization,
  OrganizationList,
  type Scope,
  UpdateMemberRequest,
  UpdateOrganizationRequest,
} from '@pm/contracts'
import { requireUser, type Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { IdentityDeps } from '../app.ts'
import { publicApiKey, publicOrganization } from '../domain/identity.ts'
import type { Actor } from '../domain/members.ts'

const MemberParams = Type.Object({ id: ObjectId, userId: ObjectId }, { additionalProperties: false })

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
  const { store, identity } = deps

  app.get('/api/v1/organizations', { schema: { response: { 200: OrganizationList } } }, async (request) => {
    const { caller } = request
    if (caller.kind === 'apiKey') {
      // A key belongs to exactly one workspace: that one is the whole list.
      const org = caller.organizationId ? await store.getOrganization(caller.organizationId) : null
      return { organizations: org ? [publicOrganization(org)] : [] }
    }
    const userId = requireUser(request)
    return { organizations: (await store.listOrganizationsForUser(userId)).map(publicOrganization) }
  })

  app.post(
    '/api/v1/organizations',
    { schema: { body: CreateOrganizationRequest, response: { 201: Organization } } },
    async (request, reply) => {
      const userId = requireUser(request)
      const org = await identity.createOrganization(request.body.name, userId)
      request.log.info({ organizationId: org._id, userId }, 'organization created')
      reply.code(201)
      return publicOrganization(org)
    },
  )

  app.get(
    '/api/v1/organizations/:id',
    { schema: { params: IdParams, response: { 200: Organization } } },
    async (request) => {
      const org = await store.getOrganization(requireScope(request, request.params.id, 'organization:read'))
      if (!org) throw new AppError('NOT_FOUND', 'organization not found')
      return publicOrganization(org)
    },
  )

  app.patch(
    '/api/v1/organizations/:id',
    { schema: { params: IdParams, body: UpdateOrganizationRequest, response: { 200: Organization } } },
    async (request) => {
      const id = requireScope(request, request.params.id, 'organization:write')
      return publicOrganization(await identity.updateOrganization(id, request.body.name))
    },
  )

  // Members
  app.get(
    '/api/v1/organizations/:id/members',
    { schema: { params: IdParams, response: { 200: MemberList } } },
    async (request) => {
      const id = requireScope(request, request.params.id, 'organization:read')
      return { members: await identity.listMembers(id) }
    },
  )

  app.post(
    '/api/v1/organizations/:id/members',
    { schema: { params: IdParams, body: AddMemberRequest, response: { 201: Member } } },
    async (request, reply) => {
      const id = requireScope(request, request.params.id, 'organization:write')
      const member = await identity.addMember(id, actorOf(request), request.body)
      deps.onMembershipChanged(id, member.userId)
      request.log.info({ organizationId: id, userId: member.userId, role: member.role }, 'member added')
      reply.code(201)
      return member
    },
  )

  app.patch(
    '/api/v1/organizations/:id/members/:userId',
    { schema: { params: MemberParams, body: UpdateMemberRequest, response: { 200: Member } } },
    async (request) => {
      const id = requireScope(request, request.params.id, 'organization:write')
      const member = await identity.updateMember(id, actorOf(request), request.params.userId, request.body)
      deps.onMembershipChanged(id, member.userId)
      request.log.info(
        { organizationId: id, userId: member.userId, role: member.role, status: member.status },
        'member changed',
      )
      return member
    },
  )

  app.delete(
    '/api/v1/organizations/:id/members/:userId',
    { schema: { params: MemberParams, response: { 200: Member } } },
    async (request) => {
      const id = requireScope(request, request.params.id, 'organization:write')
      const member = await identity.removeMember(id, actorOf(request), request.params.userId)
      deps.onMembershipChanged(id, member.userId)
      request.log.info({ organizationId: id, userId: member.userId }, 'member removed')
      return member
    },
  )

  // API keys (a user who is ADMIN or OWNER; never an API key)
  app.get(
    '/api/v1/organizations/:id/api-keys',
    { schema: { params: IdParams, response: { 200: ApiKeyList } } },
    async (request) => {
      requireAdmin(request, request.params.id)
      return { apiKeys: (await store.listApiKeys(request.params.id)).map(publicApiKey) }
    },
  )

  app.post(
    '/api/v1/organizations/:id/api-keys',
    { schema: { params: IdParams, body: CreateApiKeyRequest, response: { 201: CreatedApiKey } } },
    async (request, reply) => {
      const userId = requireAdmin(request, request.params.id)
      const created = await identity.createApiKey(request.params.id, userId, request.body)
      request.log.info({ apiKeyId: created.apiKey._id, scopes: created.apiKey.scopes }, 'api key created')
      reply.code(201)
      return created
    },
  )

  app.delete(
    '/api/v1/organizations/:id/api-keys/:keyId',
    {
      schema: {
        params: Type.Object({ id: ObjectId, keyId: ObjectId }, { additionalProperties: false }),
      },
    },
    async (request) => {
      requireAdmin(request, request.params.id)
      const key = await store.revokeApiKey(request.params.id, request.params.keyId, new Date().toISOString())
      if (!key) throw new AppError('NOT_FOUND', 'api key not found')
      deps.onRevoked(key)
      request.log.info({ apiKeyId: key._id }, 'api key revoked')
      return publicApiKey(key)
    },
  )
}
