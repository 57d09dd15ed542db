import {
  type AddMemberRequest,
  type ApiKeyRevokedEvent,
  type ApiKey,
  AppError,
  type AuditAction,
  type AuditEntry,
  type CreateApiKeyRequest,
  type Member,
  type MembershipChangedEvent,
  type ResolvedApiKey,
  type Scope,
  type EnvironmentName,
  SUBJECTS,
  type UpdateMemberRequest,
} from '@pm/contracts'
import type { EventBus } from '@pm/bus'
import { type AuditContext, apiKeyPrefix, auditEntry, generateApiKey, hashApiKey, newId } from '@pm/kit'
import {
  type ApiKeyRecord,
  DuplicateError,
  type IdentityStore,
  type MembershipChangeResult,
  type MembershipRecord,
  type OrganizationRecord,
  type UserRecord,
} from '../store/types.ts'
import { normaliseEmail, orgSlug, publicApiKey } from '../domain/views.ts'
import { type Actor, mayChangeRole, toMember } from '../domain/members.ts'
import { DEFAULT_PASSWORD_COST, dummyHash, hashPassword, verifyPassword } from '../domain/passwords.ts'

/** How identity tells every gateway replica to drop a cached key or membership now. */
export type Broadcaster = Pick<EventBus, 'broadcast'>

/** For tools that change nothing a gateway caches (bootstrap, create-user): announcing is a bug. */
export const NO_BROADCAST: Broadcaster = {
  broadcast(subject) {
    throw new Error(`nothing may be announced here (${subject})`)
  },
}

/** How a user is named in the audit log and to the gateway: the display name, else the email. */
export function displayName(user: Pick<UserRecord, 'name' | 'email'>): string {
  return user.name.trim() || user.email
}

/** Where a request came from (its id and the client's address), for the audit log. */
export interface RequestOrigin {
  requestId: string
  ip: string
}

/** A key's `lastUsedAt` is written at most this often (every resolve would be a write). */
const TOUCH_INTERVAL_MS = 60_000

/** API_KEY_MAX_PER_ORG's default: keys neither revoked nor expired an organization may hold. */
export const DEFAULT_MAX_API_KEYS = 200

/**
 * Users, organizations, memberships and API keys. It owns its side effects: a membership
 * change or a revocation is announced to the gateways here, whoever asked (route or CLI).
 */
export class IdentityService {
  private readonly store: IdentityStore
  private readonly bus: Broadcaster
  private readonly onAudit: () => void

  /**
   * `onAudit` is told when audit entries were written (the relay publishes them at once);
   * changes made without an AuditContext (the operator's CLI, bootstrap) write none.
   */
  /** log2 of scrypt's N for new password hashes (PASSWORD_HASH_COST). */
  private readonly passwordCost: number
  /** Usable API keys an organization may hold (API_KEY_MAX_PER_ORG). */
  private readonly maxApiKeys: number
  private readonly dummy: string

  constructor(
    store: IdentityStore,
    bus: Broadcaster,
    onAudit: () => void = () => {},
    opts: { passwordCost?: number; maxApiKeysPerOrganization?: number } = {},
  ) {
    this.store = store
    this.bus = bus
    this.onAudit = onAudit
    this.passwordCost = opts.passwordCost ?? DEFAULT_PASSWORD_COST
    this.maxApiKeys = opts.maxApiKeysPerOrganization ?? DEFAULT_MAX_API_KEYS
    this.dummy = dummyHash(this.passwordCost)
  }

  /**
   * The entry of a change, or none without a context. The gateway names the actor (the
   * membership or key it looked up); a request it named nobody for (creating an organization)
   * is named here, from the user record.
   */
  private async entries(
    ctx: AuditContext | undefined,
    organizationId: string,
    action: AuditAction,
    resource: { type: string; id: string },
    summary: string,
  ): Promise<AuditEntry[]> {
    if (!ctx) return []
    let named = ctx
    if (ctx.actor.type === 'user' && ctx.actor.name === ctx.actor.id) {
      const user = await this.store.findUserById(ctx.actor.id)
      if (user) named = { ...ctx, actor: { ...ctx.actor, name: displayName(user) } }
    }
    return [auditEntry(named, organizationId, action, resource, summary)]
  }

  /**
   * A sign-in attempt (DESIGN section 15): the user when the password matches, with the entries
   * the session is to be written with (`user.signed_in`, in each organization the user is an
   * ACTIVE member of); null otherwise, after writing `user.sign_in_failed` entries there. An
   * unknown email belongs to no organization and is recorded nowhere (the same work is done,
   * so the answer takes as long).
   */
  async signIn(
    email: string,
    password: string,
    origin: RequestOrigin,
  ): Promise<{ user: UserRecord; organizations: OrganizationRecord[]; audit: AuditEntry[] } | null> {
    const user = await this.store.findUserByEmail(normaliseEmail(email))
    const ok = await verifyPassword(password, user?.passwordHash ?? this.dummy)
    if (!user) return null
    const organizations = await this.store.listOrganizationsForUser(user._id)
    const ctx: AuditContext = { actor: { type: 'user', id: user._id, name: displayName(user) }, ...origin }
    const resource = { type: 'user', id: user._id }
    if (!ok) {
      const failed = organizations.map((o) =>
        auditEntry(ctx, o._id, 'user.sign_in_failed', resource, `failed sign-in as ${user.email}`),
      )
      if (failed.length > 0) {
        await this.store.recordAudit(failed)
        this.onAudit()
      }
      return null
    }
    const audit = organizations.map((o) =>
      auditEntry(ctx, o._id, 'user.signed_in', resource, `${user.email} signed in`),
    )
    return { user, organizations, audit }
  }

  /** The organizations a user belongs to (an API key's is its own one). */
  async organizationsOf(caller: { userId?: string; organizationId?: string }): Promise<OrganizationRecord[]> {
    if (caller.userId) return this.store.listOrganizationsForUser(caller.userId)
    const org = caller.organizationId ? await this.store.getOrganization(caller.organizationId) : null
    return org ? [org] : []
  }

  async getOrganization(id: string): Promise<OrganizationRecord> {
    const org = await this.store.getOrganization(id)
    if (!org) throw new AppError('NOT_FOUND', 'organization not found')
    return org
  }

  async listApiKeys(organizationId: string): Promise<ApiKey[]> {
    return (await this.store.listApiKeys(organizationId)).map(publicApiKey)
  }

  /**
   * The audit entry of a change to a key, summarised from the key as the store reads it in the
   * change's transaction (`build`, undefined without a context: nothing recorded); `done` tells
   * the relay when the store wrote it (a change that changed nothing builds none).
   */
  private async keyAudit(
    audit: AuditContext | undefined,
    organizationId: string,
    action: 'apiKey.revoked' | 'apiKey.renamed',
    keyId: string,
    summary: (key: ApiKeyRecord) => string,
  ): Promise<{ build: ((key: ApiKeyRecord) => AuditEntry[]) | undefined; done: () => void }> {
    // Built before the transaction (naming the actor may read the store).
    const [template] = await this.entries(audit, organizationId, action, { type: 'apiKey', id: keyId }, '')
    let built = false
    return {
      build: template
        ? (key) => {
            built = true
            return [{ ...template, summary: summary(key).slice(0, 500) }]
          }
        : undefined,
      done: () => {
        if (built) this.onAudit()
      },
    }
  }

  /** Revokes a key and tells every gateway replica to drop it now (its cache would keep it a while). */
  async revokeApiKey(organizationId: string, keyId: string, audit?: AuditContext): Promise<ApiKey> {
    const entry = await this.keyAudit(
      audit,
      organizationId,
      'apiKey.revoked',
      keyId,
      (k) => `revoked API key "${k.name}" (${k.prefix}…)`,
    )
    const key = await this.store.revokeApiKey(organizationId, keyId, new Date().toISOString(), entry.build)
    entry.done()
    if (!key) throw new AppError('NOT_FOUND', 'api key not found')
    const event: ApiKeyRevokedEvent = { keyId: key._id, hash: key.hash, organizationId: key.organizationId }
    this.bus.broadcast(SUBJECTS.apiKeyRevoked, event)
    return publicApiKey(key)
  }

  /**
   * A key's new name, in lists and (for what the key does from now on) in the audit log; the
   * key, its scopes and limits stay. A gateway that holds the key in its cache names it as
   * before until the entry runs out (API_KEY_CACHE_TTL_MS, 30 s by default).
   */
  async renameApiKey(
    organizationId: string,
    keyId: string,
    name: string,
    audit?: AuditContext,
  ): Promise<ApiKey> {
    const entry = await this.keyAudit(
      audit,
      organizationId,
      'apiKey.renamed',
      keyId,
      (k) => `renamed API key "${k.name}" (${k.prefix}…) to "${name}"`,
    )
    const before = await this.store.renameApiKey(organizationId, keyId, name, entry.build)
    entry.done()
    if (!before) throw new AppError('NOT_FOUND', 'api key not found')
    return publicApiKey({ ...before, name })
  }

  /** The gateway's lookup of a key by its hash; records when it was last used. */
  async resolveApiKey(hash: string): Promise<ResolvedApiKey> {
    const key = await this.store.findApiKeyByHash(hash)
    if (!key) throw new AppError('NOT_FOUND', 'api key not found')
    const now = Date.now()
    if (!key.lastUsedAt || now - Date.parse(key.lastUsedAt) > TOUCH_INTERVAL_MS) {
      await this.store.touchApiKey(key._id, new Date(now).toISOString())
    }
    return {
      _id: key._id,
      organizationId: key.organizationId,
      scopes: key.scopes,
      expiresAt: key.expiresAt,
      revokedAt: key.revokedAt,
      rateLimit: key.rateLimit,
      name: key.name,
    }
  }

  /** The gateway's lookup of a membership, with the user's name (the actor's name in the audit log). */
  async getMembership(organizationId: string, userId: string): Promise<MembershipRecord & { name: string }> {
    const m = await this.store.getMembership(organizationId, userId)
    if (!m) throw new AppError('NOT_FOUND', 'membership not found')
    const user = await this.store.findUserById(userId)
    return { ...m, name: user ? displayName(user) : userId }
  }

  /** Tells every gateway replica to drop its cached copy of this membership. */
  private membershipChanged(organizationId: string, userId: string): void {
    const event: MembershipChangedEvent = { organizationId, userId }
    this.bus.broadcast(SUBJECTS.membershipChanged, event)
  }

  async createUser(input: { email: string; password: string; name: string }): Promise<UserRecord> {
    const user: UserRecord = {
      _id: newId(),
      email: normaliseEmail(input.email),
      name: input.name.trim(),
      passwordHash: await hashPassword(input.password, this.passwordCost),
      createdAt: new Date().toISOString(),
    }
    try {
      await this.store.createUser(user)
    } catch (err) {
      if (err instanceof DuplicateError)
        throw new AppError('CONFLICT', 'a user with this email already exists')
      throw err
    }
    return user
  }

  /** The user when the password matches; null otherwise (same work either way). */
  async authenticate(email: string, password: string): Promise<UserRecord | null> {
    const user = await this.store.findUserByEmail(normaliseEmail(email))
    const ok = await verifyPassword(password, user?.passwordHash ?? this.dummy)
    return user && ok ? user : null
  }

  async createOrganization(name: string, ownerId: string, audit?: AuditContext): Promise<OrganizationRecord> {
    const base = orgSlug(name)
    for (let n = 1; n < 1000; n++) {
      const slug = n === 1 ? base : `${base}-${n}`
      if (await this.store.isSlugTaken(slug)) continue
      const now = new Date().toISOString()
      const org: OrganizationRecord = {
        _id: newId(),
        name: name.trim(),
        slug,
        createdAt: now,
        updatedAt: now,
      }
      const entries = await this.entries(
        audit,
        org._id,
        'organization.created',
        { type: 'organization', id: org._id },
        `created the organization ${org.name} (${slug})`,
      )
      try {
        await this.store.createOrganization(
          org,
          { organizationId: org._id, userId: ownerId, role: 'OWNER', status: 'ACTIVE', createdAt: now },
          entries,
        )
        if (entries.length > 0) this.onAudit()
        return org
      } catch (err) {
        if (!(err instanceof DuplicateError)) throw err
      }
    }
    throw new AppError('CONFLICT', 'could not allocate an organization slug')
  }

  async updateOrganization(
    id: string,
    change: { name?: string; protectedEnvironments?: EnvironmentName[] },
    audit?: AuditContext,
  ): Promise<OrganizationRecord> {
    const normalised = {
      ...(change.name !== undefined ? { name: change.name.trim() } : {}),
      ...(change.protectedEnvironments !== undefined
        ? { protectedEnvironments: [...change.protectedEnvironments].sort() }
        : {}),
    }
    const said: string[] = []
    if (normalised.name !== undefined) said.push(`renamed to ${normalised.name}`)
    if (normalised.protectedEnvironments !== undefined) {
      const list = normalised.protectedEnvironments
      said.push(`protected environments: ${list.length > 0 ? list.join(', ') : 'none'}`)
    }
    const entries = await this.entries(
      audit,
      id,
      'organization.updated',
      { type: 'organization', id },
      said.join('; ') || 'updated the organization',
    )
    const org = await this.store.updateOrganization(id, normalised, new Date().toISOString(), entries)
    if (!org) throw new AppError('NOT_FOUND', 'organization not found')
    if (entries.length > 0) this.onAudit()
    return org
  }

  async listMembers(organizationId: string): Promise<Member[]> {
    const memberships = await this.store.listMemberships(organizationId)
    const users = new Map(
      (await this.store.findUsersByIds(memberships.map((m) => m.userId))).map((u) => [u._id, u]),
    )
    return memberships.map((m) => toMember(m, users.get(m.userId)))
  }

  /** Adds an existing user as an ACTIVE member (default role MEMBER). */
  async addMember(
    organizationId: string,
    actor: Actor,
    input: AddMemberRequest,
    audit?: AuditContext,
  ): Promise<Member> {
    const role = input.role ?? 'MEMBER'
    if (!mayChangeRole(actor, null, role)) {
      throw new AppError('FORBIDDEN', 'only an OWNER may add an OWNER')
    }
    const user = await this.store.findUserByEmail(normaliseEmail(input.email))
    if (!user) throw new AppError('NOT_FOUND', 'no user with this email')
    const membership = {
      organizationId,
      userId: user._id,
      role,
      status: 'ACTIVE' as const,
      createdAt: new Date().toISOString(),
    }
    const entries = await this.entries(
      audit,
      organizationId,
      'member.added',
      { type: 'member', id: user._id },
      `added ${user.email} as ${role}`,
    )
    try {
      await this.store.addMembership(membership, entries)
    } catch (err) {
      if (err instanceof DuplicateError) throw new AppError('CONFLICT', 'the user is already a member')
      throw err
    }
    if (entries.length > 0) this.onAudit()
    this.membershipChanged(organizationId, user._id)
    return toMember(membership, user)
  }

  async updateMember(
    organizationId: string,
    actor: Actor,
    userId: string,
    change: UpdateMemberRequest,
    audit?: AuditContext,
  ): Promise<Member> {
    const current = await this.store.getMembership(organizationId, userId)
    if (!current) throw new AppError('NOT_FOUND', 'member not found')
    if (!mayChangeRole(actor, current.role, change.role ?? current.role)) {
      throw new AppError('FORBIDDEN', 'only an OWNER may change an OWNER')
    }
    const [template] = await this.entries(
      audit,
      organizationId,
      'member.updated',
      { type: 'member', id: userId },
      '',
    )
    const who = (await this.store.findUserById(userId))?.email ?? userId
    let audited = false
    const result = await this.store.changeMembership(
      organizationId,
      userId,
      { ...(change.role ? { role: change.role } : {}), ...(change.status ? { status: change.status } : {}) },
      template
        ? (before, after) => {
            // Built from the membership as the transaction saw it; a change to nothing is no change.
            const said: string[] = []
            if (after && after.role !== before.role) said.push(`role ${before.role} → ${after.role}`)
            if (after && after.status !== before.status)
              said.push(`status ${before.status} → ${after.status}`)
            if (said.length === 0) return []
            audited = true
            return [{ ...template, summary: `changed ${who}: ${said.join(', ')}`.slice(0, 500) }]
          }
        : undefined,
      // Again on the membership as the transaction reads it: an OWNER may have promoted this
      // member to OWNER since the check above (an ADMIN would then change an OWNER).
      (now) => mayChangeRole(actor, now.role, change.role ?? now.role),
    )
    if (audited) this.onAudit()
    return this.memberOutcome(result)
  }

  async removeMember(
    organizationId: string,
    actor: Actor,
    userId: string,
    audit?: AuditContext,
  ): Promise<Member> {
    const current = await this.store.getMembership(organizationId, userId)
    if (!current) throw new AppError('NOT_FOUND', 'member not found')
    if (!mayChangeRole(actor, current.role, null)) {
      throw new AppError('FORBIDDEN', 'only an OWNER may remove an OWNER')
    }
    const [template] = await this.entries(
      audit,
      organizationId,
      'member.removed',
      { type: 'member', id: userId },
      '',
    )
    const who = (await this.store.findUserById(userId))?.email ?? userId
    let audited = false
    const result = await this.store.changeMembership(
      organizationId,
      userId,
      'remove',
      template
        ? (before) => {
            audited = true
            return [{ ...template, summary: `removed ${who} (${before.role})`.slice(0, 500) }]
          }
        : undefined,
      (now) => mayChangeRole(actor, now.role, null),
    )
    if (audited) this.onAudit()
    return this.memberOutcome(result)
  }

  private async memberOutcome(result: MembershipChangeResult): Promise<Member> {
    switch (result.outcome) {
      case 'not-found':
        throw new AppError('NOT_FOUND', 'member not found')
      case 'last-owner':
        throw new AppError('CONFLICT', 'an organization needs at least one ACTIVE OWNER')
      case 'forbidden':
        throw new AppError('FORBIDDEN', 'only an OWNER may change or remove an OWNER')
      default: {
        this.membershipChanged(result.membership.organizationId, result.membership.userId)
        const user = await this.store.findUserById(result.membership.userId)
        return toMember(result.membership, user ?? undefined)
      }
    }
  }

  async createApiKey(
    organizationId: string,
    createdBy: string,
    input: CreateApiKeyRequest,
    audit?: AuditContext,
  ): Promise<{ apiKey: ApiKey; key: string }> {
    // `date-time` admits what Date cannot read (a leap second, 23:59:60): refused, not a 500.
    const expires = input.expiresAt ? Date.parse(input.expiresAt) : undefined
    if (expires !== undefined && !Number.isFinite(expires)) {
      throw new AppError('VALIDATION_ERROR', 'request is invalid', [
        { path: '/body/expiresAt', message: 'must be a date and time that exists (no leap second)' },
      ])
    }
    if (expires !== undefined && expires <= Date.now()) {
      throw new AppError('VALIDATION_ERROR', 'expiresAt must be in the future', [
        { path: '/body/expiresAt', message: 'must be in the future' },
      ])
    }
    const key = generateApiKey()
    const record: ApiKeyRecord = {
      _id: newId(),
      organizationId,
      name: input.name.trim(),
      prefix: apiKeyPrefix(key),
      hash: hashApiKey(key),
      scopes: [...new Set(input.scopes)] as Scope[],
      expiresAt: expires !== undefined ? new Date(expires).toISOString() : null,
      rateLimit: input.rateLimit ?? null,
      createdBy,
      createdAt: new Date().toISOString(),
      lastUsedAt: null,
      revokedAt: null,
    }
    const entries = await this.entries(
      audit,
      organizationId,
      'apiKey.created',
      { type: 'apiKey', id: record._id },
      `created API key "${record.name}" (${record.prefix}…) with ${record.scopes.join(', ') || 'no scopes'}`,
    )
    const created = await this.store.createApiKey(record, entries, {
      max: this.maxApiKeys,
      now: new Date().toISOString(),
    })
    if (!created) {
      throw new AppError(
        'CONFLICT',
        `an organization holds at most ${this.maxApiKeys} API keys that are neither revoked nor expired: revoke one first`,
      )
    }
    if (entries.length > 0) this.onAudit()
    return { apiKey: publicApiKey(record), key }
  }

  /**
   * First install: creates the admin user and the organization when the user does not
   * exist. Running it again changes nothing.
   */
  async bootstrap(input: { email: string; password: string; name?: string; orgName: string }): Promise<{
    user: UserRecord
    organization: OrganizationRecord | null
    created: boolean
  }> {
    const existing = await this.store.findUserByEmail(normaliseEmail(input.email))
    if (existing) {
      const [organization] = await this.store.listOrganizationsForUser(existing._id)
      return { user: existing, organization: organization ?? null, created: false }
    }
    let user: UserRecord
    try {
      user = await this.createUser({
        email: input.email,
        password: input.password,
        name: input.name ?? 'Administrator',
      })
    } catch (err) {
      // Two replicas bootstrapping at once: the other one won.
      if (err instanceof AppError && err.code === 'CONFLICT') return this.bootstrap(input)
      throw err
    }
    const organization = await this.createOrganization(input.orgName, user._id)
    return { user, organization, created: true }
  }
}
