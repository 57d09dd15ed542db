import type { DatabaseSync } from 'node:sqlite'
import type { AuditEntry } from '@pm/contracts'
import {
  addColumnIfMissing,
  AUDIT_OUTBOX_SCHEMA,
  type AuditOutbox,
  insertAuditOutbox,
  sqliteAuditOutbox,
  isUniqueViolation,
  closeSqlite,
  openSqlite,
  transaction,
  queryAll,
  queryOne,
  type SqliteRow,
  text,
  textOrNull,
} from '@pm/kit'
import {
  type ApiKeyLimit,
  type ApiKeyRecord,
  DuplicateError,
  type IdentityStore,
  type MembershipChange,
  type MembershipAudit,
  type MembershipChangeResult,
  type MembershipRecord,
  type OrganizationChange,
  type OrganizationRecord,
  type RefreshTokenRecord,
  type SigningKeyRecord,
  type UserRecord,
} from './types.ts'

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS users (
    id TEXT PRIMARY KEY, email TEXT NOT NULL UNIQUE, name TEXT NOT NULL,
    password_hash TEXT NOT NULL, created_at TEXT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS organizations (
    id TEXT PRIMARY KEY, name TEXT NOT NULL, slug TEXT NOT NULL UNIQUE,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL)`,
  `CREATE TABLE IF NOT EXISTS memberships (
    organization_id TEXT NOT NULL REFERENCES organizations(id), user_id TEXT NOT NULL,
    role TEXT NOT NULL, status TEXT NOT NULL, created_at TEXT NOT NULL,
    PRIMARY KEY (organization_id, user_id))`,
  'CREATE INDEX IF NOT EXISTS memberships_user ON memberships(user_id)',
  `CREATE TABLE IF NOT EXISTS api_keys (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, name TEXT NOT NULL, prefix TEXT NOT NULL,
    hash TEXT NOT NULL UNIQUE, scopes TEXT NOT NULL, expires_at TEXT, rate_limit TEXT,
    created_by TEXT NOT NULL, created_at TEXT NOT NULL, last_used_at TEXT, revoked_at TEXT)`,
  'CREATE INDEX IF NOT EXISTS api_keys_org ON api_keys(organization_id, created_at)',
  `CREATE TABLE IF NOT EXISTS refresh_tokens (
    id TEXT PRIMARY KEY, family_id TEXT NOT NULL, user_id TEXT NOT NULL, organization_id TEXT,
    hash TEXT NOT NULL UNIQUE, created_at TEXT NOT NULL, expires_at TEXT NOT NULL,
    used_at TEXT, revoked_at TEXT)`,
  'CREATE INDEX IF NOT EXISTS refresh_tokens_family ON refresh_tokens(family_id)',
  'CREATE INDEX IF NOT EXISTS refresh_tokens_expiry ON refresh_tokens(expires_at)',
  `CREATE TABLE IF NOT EXISTS signing_keys (
    kid TEXT PRIMARY KEY, alg TEXT NOT NULL, private_jwk TEXT NOT NULL, public_jwk TEXT NOT NULL,
    created_at TEXT NOT NULL)`,
  // Audit entries written with their change, until the relay has published them (DESIGN section 15).
  ...AUDIT_OUTBOX_SCHEMA,
]

type Row = SqliteRow

const str = text
const strOrNull = textOrNull

function toUser(r: Row): UserRecord {
  return {
    _id: str(r.id),
    email: str(r.email),
    name: str(r.name),
    passwordHash: str(r.password_hash),
    createdAt: str(r.created_at),
  }
}
/**
 * Columns added after the first schema, each added once when missing (a database of any age
 * goes through the same steps). Protected environments: DESIGN section 15.
 */
function migrateIdentity(db: DatabaseSync): void {
  addColumnIfMissing(db, 'organizations', 'protected_environments', "TEXT NOT NULL DEFAULT '[]'")
}

function toOrg(r: Row): OrganizationRecord {
  return {
    _id: str(r.id),
    name: str(r.name),
    slug: str(r.slug),
    // None protected reads as no field (as MongoDB keeps it).
    ...(r.protected_environments && r.protected_environments !== '[]'
      ? {
          protectedEnvironments: JSON.parse(
            str(r.protected_environments),
          ) as OrganizationRecord['protectedEnvironments'],
        }
      : {}),
    createdAt: str(r.created_at),
    updatedAt: str(r.updated_at),
  }
}
function toMembership(r: Row): MembershipRecord {
  return {
    organizationId: str(r.organization_id),
    userId: str(r.user_id),
    role: str(r.role) as MembershipRecord['role'],
    status: str(r.status) as MembershipRecord['status'],
    createdAt: str(r.created_at),
  }
}
function toKey(r: Row): ApiKeyRecord {
  return {
    _id: str(r.id),
    organizationId: str(r.organization_id),
    name: str(r.name),
    prefix: str(r.prefix),
    hash: str(r.hash),
    scopes: JSON.parse(str(r.scopes)) as ApiKeyRecord['scopes'],
    expiresAt: strOrNull(r.expires_at),
    rateLimit: r.rate_limit ? (JSON.parse(str(r.rate_limit)) as ApiKeyRecord['rateLimit']) : null,
    createdBy: str(r.created_by),
    createdAt: str(r.created_at),
    lastUsedAt: strOrNull(r.last_used_at),
    revokedAt: strOrNull(r.revoked_at),
  }
}
function toRefreshToken(r: Row): RefreshTokenRecord {
  return {
    _id: str(r.id),
    familyId: str(r.family_id),
    userId: str(r.user_id),
    organizationId: strOrNull(r.organization_id),
    hash: str(r.hash),
    createdAt: str(r.created_at),
    expiresAt: str(r.expires_at),
    usedAt: strOrNull(r.used_at),
    revokedAt: strOrNull(r.revoked_at),
  }
}
function toSigningKey(r: Row): SigningKeyRecord {
  return {
    kid: str(r.kid),
    alg: str(r.alg),
    privateJwk: JSON.parse(str(r.private_jwk)) as Record<string, unknown>,
    publicJwk: JSON.parse(str(r.public_jwk)) as Record<string, unknown>,
    createdAt: str(r.created_at),
  }
}

export class SqliteIdentityStore implements IdentityStore {
  private readonly db: DatabaseSync
  private readonly outbox: AuditOutbox

  constructor(file: string) {
    this.db = openSqlite(file, SCHEMA)
    migrateIdentity(this.db)
    this.outbox = sqliteAuditOutbox(() => this.db)
  }

  pendingAudit(limit: number): Promise<AuditEntry[]> {
    return this.outbox.pendingAudit(limit)
  }
  markAuditSent(ids: string[], at: string): Promise<void> {
    return this.outbox.markAuditSent(ids, at)
  }
  pruneAuditOutbox(before: string): Promise<number> {
    return this.outbox.pruneAuditOutbox(before)
  }

  async recordAudit(entries: AuditEntry[]): Promise<void> {
    transaction(this.db, () => insertAuditOutbox(this.db, entries))
  }

  private all(sql: string, ...params: (string | number | null)[]): Row[] {
    return this.db.prepare(sql).all(...params) as Row[]
  }

  async createUser(u: UserRecord): Promise<void> {
    try {
      this.db
        .prepare('INSERT INTO users (id, email, name, password_hash, created_at) VALUES (?, ?, ?, ?, ?)')
        .run(u._id, u.email, u.name, u.passwordHash, u.createdAt)
    } catch (err) {
      if (isUniqueViolation(err)) throw new DuplicateError('user')
      throw err
    }
  }

  async findUserByEmail(email: string): Promise<UserRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM users WHERE email = ?', email)
    return r ? toUser(r) : null
  }

  async findUserById(id: string): Promise<UserRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM users WHERE id = ?', id)
    return r ? toUser(r) : null
  }

  async createOrganization(
    org: OrganizationRecord,
    owner: MembershipRecord,
    audit: AuditEntry[] = [],
  ): Promise<void> {
    try {
      transaction(this.db, () => {
        this.db
          .prepare(
            'INSERT INTO organizations (id, name, slug, created_at, updated_at) VALUES (?, ?, ?, ?, ?)',
          )
          .run(org._id, org.name, org.slug, org.createdAt, org.updatedAt)
        this.db
          .prepare(
            'INSERT INTO memberships (organization_id, user_id, role, status, created_at) VALUES (?, ?, ?, ?, ?)',
          )
          .run(owner.organizationId, owner.userId, owner.role, owner.status, owner.createdAt)
        insertAuditOutbox(this.db, audit)
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw new DuplicateError('organization')
      throw err
    }
  }

  async getOrganization(id: string): Promise<OrganizationRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM organizations WHERE id = ?', id)
    return r ? toOrg(r) : null
  }

  async findOrganizationBySlug(slug: string): Promise<OrganizationRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM organizations WHERE slug = ?', slug)
    return r ? toOrg(r) : null
  }

  async listOrganizationsForUser(userId: string): Promise<OrganizationRecord[]> {
    return queryAll(
      this.db,
      `SELECT o.* FROM organizations o JOIN memberships m ON m.organization_id = o.id
       WHERE m.user_id = ? AND m.status = 'ACTIVE' ORDER BY o.created_at, o.id`,
      userId,
    ).map(toOrg)
  }

  async getMembership(organizationId: string, userId: string): Promise<MembershipRecord | null> {
    const r = queryOne(
      this.db,
      'SELECT * FROM memberships WHERE organization_id = ? AND user_id = ?',
      organizationId,
      userId,
    )
    return r ? toMembership(r) : null
  }

  async isSlugTaken(slug: string): Promise<boolean> {
    return queryOne(this.db, 'SELECT 1 AS x FROM organizations WHERE slug = ?', slug) !== undefined
  }

  async updateOrganization(
    id: string,
    change: OrganizationChange,
    at: string,
    audit: AuditEntry[] = [],
  ): Promise<OrganizationRecord | null> {
    return transaction(this.db, () => {
      const { changes } = this.db
        .prepare(
          `UPDATE organizations SET name = COALESCE(?, name),
           protected_environments = COALESCE(?, protected_environments), updated_at = ? WHERE id = ?`,
        )
        .run(
          change.name ?? null,
          change.protectedEnvironments ? JSON.stringify(change.protectedEnvironments) : null,
          at,
          id,
        )
      if (Number(changes) === 0) return null
      insertAuditOutbox(this.db, audit)
      const r = queryOne(this.db, 'SELECT * FROM organizations WHERE id = ?', id)
      return r ? toOrg(r) : null
    })
  }

  async findUsersByIds(ids: string[]): Promise<UserRecord[]> {
    if (ids.length === 0) return []
    return queryAll(
      this.db,
      `SELECT * FROM users WHERE id IN (${ids.map(() => '?').join(', ')})`,
      ...ids,
    ).map(toUser)
  }

  async listMemberships(organizationId: string): Promise<MembershipRecord[]> {
    return queryAll(
      this.db,
      'SELECT * FROM memberships WHERE organization_id = ? ORDER BY created_at, user_id',
      organizationId,
    ).map(toMembership)
  }

  async addMembership(m: MembershipRecord, audit: AuditEntry[] = []): Promise<void> {
    try {
      transaction(this.db, () => {
        this.db
          .prepare(
            'INSERT INTO memberships (organization_id, user_id, role, status, created_at) VALUES (?, ?, ?, ?, ?)',
          )
          .run(m.organizationId, m.userId, m.role, m.status, m.createdAt)
        insertAuditOutbox(this.db, audit)
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw new DuplicateError('membership')
      throw err
    }
  }

  async changeMembership(
    organizationId: string,
    userId: string,
    change: MembershipChange,
    audit?: MembershipAudit,
    allowed?: (current: MembershipRecord) => boolean,
  ): Promise<MembershipChangeResult> {
    // BEGIN IMMEDIATE serialises writers, so two owners demoting each other cannot both pass.
    return transaction(this.db, (): MembershipChangeResult => {
      const row = queryOne(
        this.db,
        'SELECT * FROM memberships WHERE organization_id = ? AND user_id = ?',
        organizationId,
        userId,
      )
      if (!row) return { outcome: 'not-found' }
      const current = toMembership(row)
      if (allowed && !allowed(current)) return { outcome: 'forbidden' }
      const next = change === 'remove' ? null : { ...current, ...change }
      const wasOwner = current.role === 'OWNER' && current.status === 'ACTIVE'
      const staysOwner = next !== null && next.role === 'OWNER' && next.status === 'ACTIVE'
      if (wasOwner && !staysOwner) {
        const others = queryOne(
          this.db,
          `SELECT COUNT(*) AS n FROM memberships
           WHERE organization_id = ? AND user_id != ? AND role = 'OWNER' AND status = 'ACTIVE'`,
          organizationId,
          userId,
        )
        if (Number(others?.n ?? 0) === 0) return { outcome: 'last-owner' }
      }
      if (next === null) {
        this.db
          .prepare('DELETE FROM memberships WHERE organization_id = ? AND user_id = ?')
          .run(organizationId, userId)
        if (audit) insertAuditOutbox(this.db, audit(current, null))
        return { outcome: 'removed', membership: current }
      }
      this.db
        .prepare('UPDATE memberships SET role = ?, status = ? WHERE organization_id = ? AND user_id = ?')
        .run(next.role, next.status, organizationId, userId)
      if (audit) insertAuditOutbox(this.db, audit(current, next))
      return { outcome: 'changed', membership: next }
    })
  }

  async createApiKey(k: ApiKeyRecord, audit: AuditEntry[] = [], limit?: ApiKeyLimit): Promise<boolean> {
    // BEGIN IMMEDIATE serialises writers: the count sees every create before this one.
    return transaction(this.db, () => {
      if (limit) {
        const held = this.db
          .prepare(
            `SELECT COUNT(*) AS n FROM api_keys WHERE organization_id = ? AND revoked_at IS NULL
             AND (expires_at IS NULL OR expires_at > ?)`,
          )
          .get(k.organizationId, limit.now) as { n: number | bigint } | undefined
        if (Number(held?.n ?? 0) >= limit.max) return false
      }
      this.insertApiKey(k)
      insertAuditOutbox(this.db, audit)
      return true
    })
  }

  private insertApiKey(k: ApiKeyRecord): void {
    this.db
      .prepare(
        `INSERT INTO api_keys (id, organization_id, name, prefix, hash, scopes, expires_at, rate_limit,
         created_by, created_at, last_used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        k._id,
        k.organizationId,
        k.name,
        k.prefix,
        k.hash,
        JSON.stringify(k.scopes),
        k.expiresAt,
        k.rateLimit ? JSON.stringify(k.rateLimit) : null,
        k.createdBy,
        k.createdAt,
        k.lastUsedAt,
        k.revokedAt,
      )
  }

  async findApiKeyByHash(hash: string): Promise<ApiKeyRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM api_keys WHERE hash = ?', hash)
    return r ? toKey(r) : null
  }

  async listApiKeys(organizationId: string): Promise<ApiKeyRecord[]> {
    return queryAll(
      this.db,
      'SELECT * FROM api_keys WHERE organization_id = ? ORDER BY created_at, id',
      organizationId,
    ).map(toKey)
  }

  async revokeApiKey(
    organizationId: string,
    keyId: string,
    at: string,
    audit?: (key: ApiKeyRecord) => AuditEntry[],
  ): Promise<ApiKeyRecord | null> {
    return transaction(this.db, () => {
      const { changes } = this.db
        .prepare(
          'UPDATE api_keys SET revoked_at = ? WHERE id = ? AND organization_id = ? AND revoked_at IS NULL',
        )
        .run(at, keyId, organizationId)
      const r = queryOne(
        this.db,
        'SELECT * FROM api_keys WHERE id = ? AND organization_id = ?',
        keyId,
        organizationId,
      )
      const key = r ? toKey(r) : null
      if (key && audit && Number(changes) === 1) insertAuditOutbox(this.db, audit(key))
      return key
    })
  }

  async renameApiKey(
    organizationId: string,
    keyId: string,
    name: string,
    audit?: (before: ApiKeyRecord) => AuditEntry[],
  ): Promise<ApiKeyRecord | null> {
    return transaction(this.db, () => {
      const r = queryOne(
        this.db,
        'SELECT * FROM api_keys WHERE id = ? AND organization_id = ?',
        keyId,
        organizationId,
      )
      if (!r) return null
      const before = toKey(r)
      if (before.name === name) return before
      this.db.prepare('UPDATE api_keys SET name = ? WHERE id = ?').run(name, keyId)
      if (audit) insertAuditOutbox(this.db, audit(before))
      return before
    })
  }

  async touchApiKey(keyId: string, at: string): Promise<void> {
    this.db.prepare('UPDATE api_keys SET last_used_at = ? WHERE id = ?').run(at, keyId)
  }

  async createRefreshToken(t: RefreshTokenRecord, audit: AuditEntry[] = []): Promise<void> {
    // Expired tokens are useless (refused either way): clear them as new ones arrive.
    this.db.prepare('DELETE FROM refresh_tokens WHERE expires_at < ?').run(t.createdAt)
    if (audit.length === 0) {
      this.insertRefreshToken(t)
      return
    }
    transaction(this.db, () => {
      this.insertRefreshToken(t)
      insertAuditOutbox(this.db, audit)
    })
  }

  private insertRefreshToken(t: RefreshTokenRecord): void {
    this.db
      .prepare(
        `INSERT INTO refresh_tokens (id, family_id, user_id, organization_id, hash, created_at, expires_at,
         used_at, revoked_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        t._id,
        t.familyId,
        t.userId,
        t.organizationId,
        t.hash,
        t.createdAt,
        t.expiresAt,
        t.usedAt,
        t.revokedAt,
      )
  }

  async useRefreshToken(
    hash: string,
    at: string,
  ): Promise<{ token: RefreshTokenRecord; used: boolean } | null> {
    return transaction(this.db, () => {
      const row = queryOne(this.db, 'SELECT * FROM refresh_tokens WHERE hash = ?', hash)
      if (!row) return null
      const token = toRefreshToken(row)
      if (token.usedAt !== null || token.revokedAt !== null) return { token, used: false }
      this.db.prepare('UPDATE refresh_tokens SET used_at = ? WHERE id = ?').run(at, token._id)
      return { token, used: true }
    })
  }

  async findRefreshToken(hash: string): Promise<RefreshTokenRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM refresh_tokens WHERE hash = ?', hash)
    return r ? toRefreshToken(r) : null
  }

  async revokeRefreshFamily(familyId: string, at: string): Promise<void> {
    this.db
      .prepare('UPDATE refresh_tokens SET revoked_at = ? WHERE family_id = ? AND revoked_at IS NULL')
      .run(at, familyId)
  }

  async latestSigningKey(): Promise<SigningKeyRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM signing_keys ORDER BY created_at DESC, kid DESC LIMIT 1')
    return r ? toSigningKey(r) : null
  }

  async listSigningKeys(): Promise<SigningKeyRecord[]> {
    return queryAll(this.db, 'SELECT * FROM signing_keys ORDER BY created_at DESC').map(toSigningKey)
  }

  async ensureSigningKey(key: SigningKeyRecord): Promise<SigningKeyRecord> {
    return transaction(this.db, () => {
      const existing = queryOne(
        this.db,
        'SELECT * FROM signing_keys ORDER BY created_at DESC, kid DESC LIMIT 1',
      )
      if (existing) return toSigningKey(existing)
      this.db
        .prepare(
          'INSERT INTO signing_keys (kid, alg, private_jwk, public_jwk, created_at) VALUES (?, ?, ?, ?, ?)',
        )
        .run(key.kid, key.alg, JSON.stringify(key.privateJwk), JSON.stringify(key.publicJwk), key.createdAt)
      return key
    })
  }

  async check(): Promise<void> {
    queryOne(this.db, 'SELECT 1 AS ok')
  }

  async close(): Promise<void> {
    closeSqlite(this.db)
  }
}
