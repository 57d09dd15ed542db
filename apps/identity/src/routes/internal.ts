import { AppError, ObjectId, ResolvedApiKey } from '@pm/contracts'
import type { Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { IdentityDeps } from '../app.ts'

const TOUCH_INTERVAL_MS = 60_000

function requireService(request: FastifyRequest): void {
  if (request.caller.kind !== 'service') throw new AppError('NOT_FOUND', 'not found')
}

/** Routes for the gateway only (it signs a 'service' context); never proxied. */
export function internalRoutes(app: Service, deps: IdentityDeps): void {
  const { store } = deps

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
      const key = await store.findApiKeyByHash(request.body.hash)
      if (!key) throw new AppError('NOT_FOUND', 'api key not found')
      const now = Date.now()
      if (!key.lastUsedAt || now - Date.parse(key.lastUsedAt) > TOUCH_INTERVAL_MS) {
        await store.touchApiKey(key._id, new Date(now).toISOString())
      }
      return {
        _id: key._id,
        organizationId: key.organizationId,
        scopes: key.scopes,
        expiresAt: key.expiresAt,
        revokedAt: key.revokedAt,
        rateLimit: key.rateLimit,
      }
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
      const m = await store.getMembership(request.params.organizationId, request.params.userId)
      if (!m) throw new AppError('NOT_FOUND', 'membership not found')
      return m
    },
  )
}
