import type { FastifyRequest } from 'fastify'
import { ObjectId } from '@pm/contracts'
import { Type } from '@sinclair/typebox'

/**
 * Query and body of routes that take nothing but the workspace: with a user token the
 * gateway reads `organizationId` from either; anything else is a 400.
 */
export const OrgQuery = Type.Object(
  { organizationId: Type.Optional(ObjectId) },
  { additionalProperties: false },
)
export const OrgBody = Type.Object(
  { organizationId: Type.Optional(ObjectId) },
  { additionalProperties: false },
)

export const VersionParams = Type.Object(
  { id: ObjectId, versionId: ObjectId },
  { additionalProperties: false },
)

export const VariableParams = Type.Object(
  { id: ObjectId, name: Type.String({ minLength: 1, maxLength: 200 }) },
  { additionalProperties: false },
)

/**
 * For routes whose body is optional (publish, save-and-publish, restore): a request sent
 * without any body is validated as `{}` instead of failing "body must be object".
 */
export async function emptyBodyAsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined) request.body = {}
}
