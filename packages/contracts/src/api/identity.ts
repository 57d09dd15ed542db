import { type Static, Type } from '@sinclair/typebox'
import { ObjectId, Timestamp } from '../common.ts'
import { Email, MEMBERSHIP_STATUSES, ROLES } from '../identity.ts'

/**
 * Identity shapes of the public surface that DESIGN section 4 gives and `identity.ts` does not
 * hold yet (refresh, logout, organization update, members). Kept apart from `identity.ts` so
 * that the identity branch can add its own without a clash; the lead keeps one of each.
 */

const Role = Type.Union(ROLES.map((r) => Type.Literal(r)))
const MembershipStatus = Type.Union(MEMBERSHIP_STATUSES.map((s) => Type.Literal(s)))

export const RefreshRequest = Type.Object(
  { refreshToken: Type.String({ minLength: 1, maxLength: 1024 }) },
  { $id: 'RefreshRequest', additionalProperties: false },
)
export type RefreshRequest = Static<typeof RefreshRequest>

export const LogoutRequest = Type.Object(
  { refreshToken: Type.String({ minLength: 1, maxLength: 1024 }) },
  { $id: 'LogoutRequest', additionalProperties: false },
)
export type LogoutRequest = Static<typeof LogoutRequest>

export const UpdateOrganizationRequest = Type.Object(
  { name: Type.Optional(Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' })) },
  { $id: 'UpdateOrganizationRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateOrganizationRequest = Static<typeof UpdateOrganizationRequest>

/** A membership with the member's user record, as the members routes show it. */
export const Member = Type.Object(
  {
    userId: ObjectId,
    organizationId: ObjectId,
    email: Type.String(),
    name: Type.String(),
    role: Role,
    status: MembershipStatus,
    createdAt: Timestamp,
  },
  { $id: 'Member' },
)
export type Member = Static<typeof Member>

export const MemberList = Type.Object({ members: Type.Array(Type.Ref(Member)) }, { $id: 'MemberList' })
export type MemberList = Static<typeof MemberList>

export const AddMemberRequest = Type.Object(
  { email: Email, role: Role },
  { $id: 'AddMemberRequest', additionalProperties: false },
)
export type AddMemberRequest = Static<typeof AddMemberRequest>

export const UpdateMemberRequest = Type.Object(
  { role: Type.Optional(Role), status: Type.Optional(MembershipStatus) },
  { $id: 'UpdateMemberRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateMemberRequest = Static<typeof UpdateMemberRequest>

export const OrganizationParams = Type.Object({ id: ObjectId }, { additionalProperties: false })
export const MemberParams = Type.Object({ id: ObjectId, userId: ObjectId }, { additionalProperties: false })
export const ApiKeyParams = Type.Object({ id: ObjectId, keyId: ObjectId }, { additionalProperties: false })
