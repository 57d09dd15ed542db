import { createHash, randomBytes } from 'node:crypto'
import { AppError, type AuditEntry, type LoginResponse } from '@pm/contracts'
import { newId } from '@pm/kit'
import type { IdentityStore, RefreshTokenRecord, UserRecord } from '../store/types.ts'
import type { TokenIssuer } from './tokens.ts'

/** `rt_` + 43 base64url characters (32 random bytes). Opaque: only its hash is stored. */
const REFRESH_PATTERN = /^rt_[A-Za-z0-9_-]{43}$/

export function newRefreshToken(): string {
  return `rt_${randomBytes(32).toString('base64url')}`
}

export function hashRefreshToken(token: string): string {
  return createHash('sha256').update(token).digest('hex')
}

export type SessionTokens = LoginResponse & { refreshToken: string }

export type RefreshOutcome =
  | { ok: true; session: SessionTokens; familyId: string }
  /** reused: a token already rotated was presented again; its whole family is now revoked. */
  | { ok: false; reason: 'invalid' | 'expired' | 'revoked' | 'reused'; familyId?: string; userId?: string }

/**
 * Login sessions: a short-lived access token (JWT) plus an opaque refresh token. Every
 * refresh rotates the refresh token (the presented one is marked used, a new one joins the
 * same family); presenting a used token again means it leaked, so the whole family is
 * revoked and both the thief and the user must log in again. Logout revokes the family.
 */
export class Sessions {
  private readonly store: IdentityStore
  private readonly tokens: TokenIssuer
  private readonly ttlSeconds: number
  private readonly onAudit: () => void

  constructor(
    store: IdentityStore,
    tokens: TokenIssuer,
    refreshTtlSeconds: number,
    onAudit: () => void = () => {},
  ) {
    this.store = store
    this.tokens = tokens
    this.ttlSeconds = refreshTtlSeconds
    this.onAudit = onAudit
  }

  /**
   * A new session (a new refresh-token family) for a user who just proved who they are; `audit`
   * (the sign-in's entries) is written with its refresh token, in one transaction.
   */
  async start(
    user: UserRecord,
    organizationId: string | null,
    audit: AuditEntry[] = [],
  ): Promise<SessionTokens> {
    const session = await this.issue(user, organizationId, newId(), audit)
    if (audit.length > 0) this.onAudit()
    return session
  }

  async refresh(refreshToken: string, requestedOrg: string | undefined): Promise<RefreshOutcome> {
    if (!REFRESH_PATTERN.test(refreshToken)) return { ok: false, reason: 'invalid' }
    const hash = hashRefreshToken(refreshToken)
    if (requestedOrg) {
      // Checked before the token is used, so a refused switch leaves the session as it was; only
      // for a token still good: a used, revoked or expired one goes on to be refused below as
      // such (a reused one revoking its family), never answered with what its user belongs to.
      const peek = await this.store.findRefreshToken(hash)
      if (!peek) return { ok: false, reason: 'invalid' }
      const live = peek.usedAt === null && peek.revokedAt === null && Date.parse(peek.expiresAt) > Date.now()
      if (live) {
        const m = await this.store.getMembership(requestedOrg, peek.userId)
        if (m?.status !== 'ACTIVE') throw new AppError('NOT_FOUND', 'organization not found')
      }
    }
    const now = new Date()
    const found = await this.store.useRefreshToken(hash, now.toISOString())
    if (!found) return { ok: false, reason: 'invalid' }
    const { token } = found
    const who = { familyId: token.familyId, userId: token.userId }
    if (!found.used) {
      if (token.revokedAt) return { ok: false, reason: 'revoked', ...who }
      await this.store.revokeRefreshFamily(token.familyId, now.toISOString())
      return { ok: false, reason: 'reused', ...who }
    }
    if (Date.parse(token.expiresAt) <= now.getTime()) return { ok: false, reason: 'expired', ...who }
    const user = await this.store.findUserById(token.userId)
    if (!user) return { ok: false, reason: 'invalid', ...who }
    const organizationId = await this.currentOrganization(token, requestedOrg)
    return {
      ok: true,
      session: await this.issue(user, organizationId, token.familyId),
      familyId: token.familyId,
    }
  }

  /** Ends the session the token belongs to. Unknown tokens are ignored (nothing to end). */
  async logout(refreshToken: string): Promise<void> {
    if (!REFRESH_PATTERN.test(refreshToken)) return
    const token = await this.store.findRefreshToken(hashRefreshToken(refreshToken))
    if (token) await this.store.revokeRefreshFamily(token.familyId, new Date().toISOString())
  }

  /**
   * The organization the new access token carries: the one asked for (its ACTIVE
   * membership was checked in refresh(); 404 otherwise, like any workspace the caller cannot
   * see), else the session's own while the membership is still ACTIVE, else the user's
   * first ACTIVE organization.
   */
  private async currentOrganization(
    token: RefreshTokenRecord,
    requested: string | undefined,
  ): Promise<string | null> {
    if (requested) return requested
    if (token.organizationId) {
      const m = await this.store.getMembership(token.organizationId, token.userId)
      if (m?.status === 'ACTIVE') return token.organizationId
    }
    const [first] = await this.store.listOrganizationsForUser(token.userId)
    return first?._id ?? null
  }

  private async issue(
    user: UserRecord,
    organizationId: string | null,
    familyId: string,
    audit: AuditEntry[] = [],
  ): Promise<SessionTokens> {
    const refreshToken = newRefreshToken()
    const now = Date.now()
    await this.store.createRefreshToken(
      {
        _id: newId(),
        familyId,
        userId: user._id,
        organizationId,
        hash: hashRefreshToken(refreshToken),
        createdAt: new Date(now).toISOString(),
        expiresAt: new Date(now + this.ttlSeconds * 1000).toISOString(),
        usedAt: null,
        revokedAt: null,
      },
      audit,
    )
    const { token, expiresIn } = await this.tokens.issue(user._id, organizationId)
    return {
      accessToken: token,
      tokenType: 'Bearer',
      expiresIn,
      refreshToken,
      refreshExpiresIn: this.ttlSeconds,
      user: { _id: user._id, email: user.email, name: user.name },
      organizationId,
    }
  }
}
