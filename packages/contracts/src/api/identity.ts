import { Type } from '@sinclair/typebox'
import { ObjectId } from '../common.ts'

/**
 * Path parameters of the organization routes, as the route catalogue names them. The request
 * and response schemas are the identity service's own (`identity.ts`).
 */

export const OrganizationParams = Type.Object({ id: ObjectId }, { additionalProperties: false })
export const MemberParams = Type.Object({ id: ObjectId, userId: ObjectId }, { additionalProperties: false })
export const ApiKeyParams = Type.Object({ id: ObjectId, keyId: ObjectId }, { additionalProperties: false })
