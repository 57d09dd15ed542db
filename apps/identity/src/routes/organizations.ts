import {
  AppError,
  CreateApiKeyRequest,
  CreatedApiKey,
  CreateOrganizationRequest,
  IdParams,
  ObjectId,
  Organization,
  OrganizationList,
  ApiKeyList,
} from '@pm/contracts'
import { requireUser, type Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import { publicApiKey, publicOrganization } from '../domain/identity.ts'
import type { IdentityDeps } from '../app.ts'

/** The gateway has checked access to `:id` and put it in the context; anything else is 404. */
function orgInContext(request: FastifyRequest, id: string): string {
  if (request.caller.organizationId !== id) throw new AppError('NOT_FOUND', 'organization not found')
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

export function organizationRoutes(app: Service, deps: IdentityDeps): void {
  const { store, identity } = deps

  app.get('/api/v1/organizations', { schema: { response: { 200: OrganizationList } } }, async (request) => {
    const { caller } = request
    if (caller.kind === 'apiKey') {
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
      reply.code(201)
      return publicOrganization(org)
    },
  )

  app.get(
    '/api/v1/organizations/:id',
    { schema: { params: IdParams, response: { 200: Organization } } },
    async (request) => {
      const org = await store.getOrganization(orgInContext(request, request.params.id))
      if (!org) throw new AppError('NOT_FOUND', 'organization not found')
      return publicOrganization(org)
    },
  )

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
      request.log.info({ apiKeyId: created.apiKey._id }, 'api key created')
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
      return publicApiKey(key)
    },
  )
}
