import type { Member, Role } from '@pm/contracts'
import type { MembershipRecord, UserRecord } from '../store/types.ts'

/**
 * Who changes a membership. The gateway has already checked organization:write (a user's
 * role grants it to ADMIN and OWNER; an API key needs the scope).
 */
export type Actor = { kind: 'user'; userId: string; role: Role | undefined } | { kind: 'apiKey' }

/**
 * Only an OWNER makes or unmakes an OWNER: an ADMIN, or an API key, manages ADMINs and
 * MEMBERs. `from` is the member's role now (null when adding), `to` the role after
 * (null when removing).
 */
export function mayChangeRole(actor: Actor, from: Role | null, to: Role | null): boolean {
  const touchesOwner = from === 'OWNER' || to === 'OWNER'
  if (actor.kind === 'apiKey') return !touchesOwner
  if (actor.role === 'OWNER') return true
  return actor.role === 'ADMIN' && !touchesOwner
}

export function toMember(m: MembershipRecord, user: UserRecord | undefined): Member {
  return {
    organizationId: m.organizationId,
    userId: m.userId,
    email: user?.email ?? '',
    name: user?.name ?? '',
    role: m.role,
    status: m.status,
    createdAt: m.createdAt,
  }
}
