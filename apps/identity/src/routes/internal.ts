import { AppError, ObjectId, ResolvedApiKey } from '@pm/contracts'
import type { Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { IdentityDeps } from '../deps.ts'

function requireService(request: FastifyRequest): void {
  if (request.caller.kind !== 'service') throw new AppError('NOT_FOUND', 'not found')
}

/** Routes for the gateway only (it signs a 'service' context); never proxied. */
export function internalRoutes(app: Service, deps: IdentityDeps): void {
  const { identity } = deps

  app.post(
    '/internal/api-keys/resolve',
    {
      schema: {
        body: Type.Object(
          { hash: Type.String({ pattern: '^[0-9a-f]{64}$' }) },
          { additionalProperties: false },
        ),
        response: { 200: ResolvedApiKey },
      },
    },
    async (request) => {
      requireService(request)
      return identity.resolveApiKey(request.body.hash)
    },
  )

  // The prompts service asks before a promote (DESIGN section 15).
  app.get(
    '/internal/organizations/:organizationId/protected-environments',
    {
      schema: {
        params: Type.Object({ organizationId: ObjectId }, { additionalProperties: false }),
      },
    },
    async (request) => {
      requireService(request)
      const org = await identity.getOrganization(request.params.organizationId)
      return { protectedEnvironments: org.protectedEnvironments ?? [] }
    },
  )

  app.get(
    '/internal/memberships/:organizationId/:userId',
    {
      schema: {
        params: Type.Object({ organizationId: ObjectId, userId: ObjectId }, { additionalProperties: false }),
      },
    },
    async (request) => {
      requireService(request)
      return identity.getMembership(request.params.organizationId, request.params.userId)
    },
  )
}
