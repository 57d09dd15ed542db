import type { Role, Scope } from './identity.ts'

/** Header that carries the signed caller context from the gateway to a service. */
export const CONTEXT_HEADER = 'x-pm-context'
/** Every client-sent header with this prefix is stripped by the gateway. */
export const INTERNAL_HEADER_PREFIX = 'x-pm-'

/**
 * The verified caller, as the gateway forwards it. `organizationId` is the workspace the
 * request acts in, already checked: the key's own workspace, or one where the user holds
 * an ACTIVE membership.
 */
export interface CallerContext {
  kind: 'user' | 'apiKey' | 'anonymous' | 'service'
  userId?: string
  apiKeyId?: string
  organizationId?: string
  role?: Role
  /** Fork target, already checked for an ACTIVE membership by the gateway. */
  targetOrganizationId?: string
  scopes: Scope[]
  /**
   * Who the actor is, for the audit log (DESIGN section 15): the user's display name (else the
   * email) from the membership the gateway looked up, or the API key's name. Absent when the
   * gateway looked up no membership (a user's request that names no workspace).
   */
  actorName?: string
  requestId: string
}
