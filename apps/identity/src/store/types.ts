import type { MembershipStatus, RateLimitSetting, Role, Scope } from '@pm/contracts'

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
  createdAt: string
  updatedAt: string
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

/**
 * Identity's data. Every method is atomic on its own; `createOrganization` writes the
 * organization and its OWNER membership together.
 */
export interface IdentityStore {
  createUser(user: UserRecord): Promise<void>
  findUserByEmail(email: string): Promise<UserRecord | null>
  findUserById(id: string): Promise<UserRecord | null>

  createOrganization(org: OrganizationRecord, owner: MembershipRecord): Promise<void>
  getOrganization(id: string): Promise<OrganizationRecord | null>
  /** Organizations where the user holds an ACTIVE membership, oldest first. */
  listOrganizationsForUser(userId: string): Promise<OrganizationRecord[]>
  getMembership(organizationId: string, userId: string): Promise<MembershipRecord | null>
  isSlugTaken(slug: string): Promise<boolean>

  createApiKey(key: ApiKeyRecord): Promise<void>
  findApiKeyByHash(hash: string): Promise<ApiKeyRecord | null>
  listApiKeys(organizationId: string): Promise<ApiKeyRecord[]>
  /** Sets revokedAt once; returns the key (null when it is not in that organization). */
  revokeApiKey(organizationId: string, keyId: string, at: string): Promise<ApiKeyRecord | null>
  touchApiKey(keyId: string, at: string): Promise<void>

  /** The newest signing key, if any. */
  latestSigningKey(): Promise<SigningKeyRecord | null>
  listSigningKeys(): Promise<SigningKeyRecord[]>
  /** Inserts unless a key already exists; returns the key in force (races settle on one). */
  ensureSigningKey(key: SigningKeyRecord): Promise<SigningKeyRecord>

  check(): Promise<void>
  close(): Promise<void>
}
