import type {
  AuditEntry,
  EnvironmentName,
  MembershipStatus,
  RateLimitSetting,
  Role,
  Scope,
} from '@pm/contracts'
import type { AuditOutbox } from '@pm/kit'

export interface UserRecord {
  _id: string
  email: string
  name: string
  passwordHash: string
  createdAt: string
}

export interface OrganizationRecord {
  _id: string
  name: string
  slug: string
  /** Environments whose promotes need an OWNER/ADMIN or the environments:promote-protected scope (absent: none). */
  protectedEnvironments?: EnvironmentName[]
  createdAt: string
  updatedAt: string
}

export interface OrganizationChange {
  name?: string
  protectedEnvironments?: EnvironmentName[]
}

export interface MembershipRecord {
  organizationId: string
  userId: string
  role: Role
  status: MembershipStatus
  createdAt: string
}

export interface ApiKeyRecord {
  _id: string
  organizationId: string
  name: string
  prefix: string
  hash: string
  scopes: Scope[]
  expiresAt: string | null
  rateLimit: RateLimitSetting | null
  createdBy: string
  createdAt: string
  lastUsedAt: string | null
  revokedAt: string | null
}

/**
 * One refresh token of a login session. Every rotation adds a token to the family and
 * marks the presented one used; presenting a used token again revokes the family.
 */
export interface RefreshTokenRecord {
  _id: string
  familyId: string
  userId: string
  /** The current organization the family's access tokens carry. */
  organizationId: string | null
  /** SHA-256 of the token, hex. The token itself is never stored. */
  hash: string
  createdAt: string
  expiresAt: string
  usedAt: string | null
  revokedAt: string | null
}

export type MembershipChange = { role?: Role; status?: MembershipStatus } | 'remove'

/** Outcome of a membership change; 'last-owner' when it would leave no ACTIVE OWNER. */
export type MembershipChangeResult =
  | { outcome: 'changed'; membership: MembershipRecord }
  | { outcome: 'removed'; membership: MembershipRecord }
  | { outcome: 'not-found' }
  | { outcome: 'last-owner' }
  /** `allowed` said no to the membership as the transaction read it. */
  | { outcome: 'forbidden' }

export interface SigningKeyRecord {
  kid: string
  alg: string
  privateJwk: Record<string, unknown>
  publicJwk: Record<string, unknown>
  createdAt: string
}

/** Thrown by a store when a unique field is taken. */
export class DuplicateError extends Error {
  constructor(what: string) {
    super(`${what} already exists`)
    this.name = 'DuplicateError'
  }
}

/** The audit entries of a membership change, built from the membership before and after (null: removed). */
export type MembershipAudit = (before: MembershipRecord, after: MembershipRecord | null) => AuditEntry[]

/** How many usable API keys an organization may hold, as of `now`. */
export interface ApiKeyLimit {
  max: number
  now: string
}

/**
 * Identity's data. Every method is atomic on its own; `createOrganization` writes the
 * organization and its OWNER membership together. A method given `audit` entries writes them
 * into the audit outbox in the same transaction as its change, and only when the change is made
 * (DESIGN section 15); the AuditRelay publishes them.
 */
export interface IdentityStore extends AuditOutbox {
  createUser(user: UserRecord): Promise<void>
  findUserByEmail(email: string): Promise<UserRecord | null>
  findUserById(id: string): Promise<UserRecord | null>

  createOrganization(org: OrganizationRecord, owner: MembershipRecord, audit?: AuditEntry[]): Promise<void>
  getOrganization(id: string): Promise<OrganizationRecord | null>
  findOrganizationBySlug(slug: string): Promise<OrganizationRecord | null>
  /** Organizations where the user holds an ACTIVE membership, oldest first. */
  listOrganizationsForUser(userId: string): Promise<OrganizationRecord[]>
  getMembership(organizationId: string, userId: string): Promise<MembershipRecord | null>
  isSlugTaken(slug: string): Promise<boolean>
  /** Renames; the slug stays. Null when the organization does not exist. */
  updateOrganization(
    id: string,
    change: OrganizationChange,
    at: string,
    audit?: AuditEntry[],
  ): Promise<OrganizationRecord | null>
  findUsersByIds(ids: string[]): Promise<UserRecord[]>
  /** Every membership of the organization (any status), oldest first. */
  listMemberships(organizationId: string): Promise<MembershipRecord[]>
  /** Throws DuplicateError when the user is already a member. */
  addMembership(membership: MembershipRecord, audit?: AuditEntry[]): Promise<void>
  /**
   * Changes or removes a membership atomically, refusing ('last-owner') when the
   * organization would be left without an ACTIVE OWNER.
   */
  changeMembership(
    organizationId: string,
    userId: string,
    change: MembershipChange,
    audit?: MembershipAudit,
    allowed?: (current: MembershipRecord) => boolean,
  ): Promise<MembershipChangeResult>

  /**
   * Inserts the key with its audit entries; with `limit`, only while the organization holds
   * fewer than `limit.max` keys that are neither revoked nor expired at `limit.now` (counted in
   * the insert's own transaction, so creates at once do not pass it together): false otherwise.
   */
  createApiKey(key: ApiKeyRecord, audit?: AuditEntry[], limit?: ApiKeyLimit): Promise<boolean>
  findApiKeyByHash(hash: string): Promise<ApiKeyRecord | null>
  listApiKeys(organizationId: string): Promise<ApiKeyRecord[]>
  /**
   * Sets revokedAt once; returns the key (null when it is not in that organization). The `audit`
   * entries (built from the revoked key) are written only by the call that revokes it: a
   * repeated revoke changes nothing.
   */
  revokeApiKey(
    organizationId: string,
    keyId: string,
    at: string,
    audit?: (key: ApiKeyRecord) => AuditEntry[],
  ): Promise<ApiKeyRecord | null>
  /**
   * Sets the key's name; returns the key as it was before (null when it is not in that
   * organization). The `audit` entries (built from the key before and the new name) are written
   * with the change, only when the name changes.
   */
  renameApiKey(
    organizationId: string,
    keyId: string,
    name: string,
    audit?: (before: ApiKeyRecord) => AuditEntry[],
  ): Promise<ApiKeyRecord | null>
  touchApiKey(keyId: string, at: string): Promise<void>

  /** With `audit`: the sign-in's entries, written with the session. */
  createRefreshToken(token: RefreshTokenRecord, audit?: AuditEntry[]): Promise<void>
  /** Audit entries of something that changes nothing else (a failed sign-in). */
  recordAudit(entries: AuditEntry[]): Promise<void>
  /**
   * Marks the token used if it is neither used nor revoked. Returns the token as stored
   * before the call and whether this call was the one that used it; null when unknown.
   */
  useRefreshToken(hash: string, at: string): Promise<{ token: RefreshTokenRecord; used: boolean } | null>
  findRefreshToken(hash: string): Promise<RefreshTokenRecord | null>
  /** Revokes every token of the family not yet revoked. */
  revokeRefreshFamily(familyId: string, at: string): Promise<void>

  /** The newest signing key, if any. */
  latestSigningKey(): Promise<SigningKeyRecord | null>
  listSigningKeys(): Promise<SigningKeyRecord[]>
  /** Inserts unless a key already exists; returns the key in force (races settle on one). */
  ensureSigningKey(key: SigningKeyRecord): Promise<SigningKeyRecord>

  check(): Promise<void>
  close(): Promise<void>
}
