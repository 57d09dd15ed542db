import { AppError, type ResolvedApiKey, type Role } from '@pm/contracts'
import { hashApiKey, isId, isWellFormedApiKey } from '@pm/kit'
import { createRemoteJWKSet, jwtVerify } from 'jose'
import { LRUCache } from 'lru-cache'
import type { IdentityClient, MembershipInfo } from './identityClient.ts'

export type Credential =
  | { kind: 'apiKey'; key: ResolvedApiKey; hash: string }
  | { kind: 'user'; userId: string; org: string | undefined }

export interface AuthenticatorOptions {
  identityUrl: string
  issuer: string
  audience: string
  /** Seconds of clock skew allowed past a token's `exp` (JWT_CLOCK_TOLERANCE_SECONDS). */
  clockToleranceSeconds: number
  keyCacheTtlMs: number
  membershipCacheTtlMs: number
}

const NOT_FOUND = Symbol('not found')

/**
 * How long an access token, once verified, is taken without checking its signature again: its
 * expiry is still checked on every use. A token signed with a key that identity has since taken
 * out of its JWKS is accepted for at most this long (docs/decisions.md, "Cheaper runs and signed-in requests").
 */
const VERIFIED_TOKEN_TTL_MS = 60_000

interface VerifiedToken {
  userId: string
  org: string | undefined
  /** The token's `exp`, seconds since the epoch. */
  exp: number
}

/**
 * Verifies credentials. API keys: format and checksum first (no lookup for a malformed
 * key), then the hash through identity, cached briefly; a revocation broadcast drops the
 * cached entry at once. JWTs: verified locally against identity's JWKS with algorithm,
 * issuer and audience pinned; a verified token is remembered for up to a minute (an ES256
 * verification is the gateway's largest single cost of a signed-in request), its expiry checked
 * on every use.
 */
export class Authenticator {
  private readonly identity: IdentityClient
  private readonly opts: AuthenticatorOptions
  private readonly jwks: ReturnType<typeof createRemoteJWKSet>
  private readonly keys: LRUCache<string, ResolvedApiKey | typeof NOT_FOUND>
  private readonly inflight = new Map<string, Promise<ResolvedApiKey | null>>()
  private readonly memberships: LRUCache<string, MembershipInfo>
  private readonly verified = new LRUCache<string, VerifiedToken>({ max: 10_000, ttl: VERIFIED_TOKEN_TTL_MS })
  /**
   * When each membership last changed (a sequence number, not a time): a lookup that was in
   * flight when its broadcast arrived must not cache the answer it got from before the change.
   */
  private readonly membershipChanges = new LRUCache<string, number>({ max: 50_000, ttl: 10 * 60_000 })
  private membershipSeq = 0
  /** Hashes revoked while a lookup was in flight must not be cached by it. */
  private readonly revokedHashes = new LRUCache<string, true>({ max: 10_000, ttl: 10 * 60_000 })
  /** API-key lookups answered from the cache, and those that asked identity (metrics read these). */
  readonly keyStats = { hits: 0, misses: 0 }
  /** Access tokens taken as verified already, and those whose signature was checked. */
  readonly tokenStats = { hits: 0, misses: 0 }

  constructor(identity: IdentityClient, opts: AuthenticatorOptions) {
    this.identity = identity
    this.opts = opts
    this.jwks = createRemoteJWKSet(new URL('/.well-known/jwks.json', opts.identityUrl), {
      cacheMaxAge: 10 * 60_000,
      cooldownDuration: 30_000,
    })
    this.keys = new LRUCache({ max: 50_000, ttl: Math.max(opts.keyCacheTtlMs, 1) })
    this.memberships = new LRUCache({ max: 50_000, ttl: Math.max(opts.membershipCacheTtlMs, 1) })
  }

  async authenticate(header: string | undefined, requestId: string): Promise<Credential> {
    if (!header) throw new AppError('AUTH_REQUIRED', 'an Authorization header is required')
    const match = /^Bearer\s+(\S+)\s*$/i.exec(header)
    const token = match?.[1]
    if (!token)
      throw new AppError('INVALID_CREDENTIALS', 'the Authorization header must be "Bearer <credential>"')
    if (token.startsWith('pk_')) return this.apiKey(token, requestId)
    return this.jwt(token)
  }

  /**
   * Whether authenticating this header would ask identity: a well-formed API key whose answer
   * (found or not) is not cached. What KeyGuard counts and limits per IP.
   */
  needsLookup(header: string | undefined): boolean {
    const token = header ? /^Bearer\s+(\S+)\s*$/i.exec(header)?.[1] : undefined
    if (!token?.startsWith('pk_') || !isWellFormedApiKey(token)) return false
    return !this.keys.has(hashApiKey(token))
  }

  private async apiKey(token: string, requestId: string): Promise<Credential> {
    if (!isWellFormedApiKey(token)) throw new AppError('INVALID_CREDENTIALS', 'invalid API key')
    const hash = hashApiKey(token)
    let key = this.keys.get(hash)
    if (key !== undefined) this.keyStats.hits++
    else {
      this.keyStats.misses++
      let pending = this.inflight.get(hash)
      if (!pending) {
        pending = this.identity.resolveKey(hash, requestId).finally(() => this.inflight.delete(hash))
        this.inflight.set(hash, pending)
      }
      const resolved = await pending
      key = resolved ?? NOT_FOUND
      if (!this.revokedHashes.has(hash)) this.keys.set(hash, key)
    }
    if (key === NOT_FOUND || key.revokedAt || this.revokedHashes.has(hash)) {
      throw new AppError('INVALID_CREDENTIALS', 'invalid API key')
    }
    if (key.expiresAt && Date.parse(key.expiresAt) <= Date.now()) {
      throw new AppError('INVALID_CREDENTIALS', 'the API key has expired')
    }
    return { kind: 'apiKey', key, hash }
  }

  private async jwt(token: string): Promise<Credential> {
    const known = this.verified.get(token)
    if (known) {
      this.tokenStats.hits++
      if (Date.now() / 1000 > known.exp + this.opts.clockToleranceSeconds) {
        this.verified.delete(token)
        throw new AppError('INVALID_CREDENTIALS', 'invalid or expired access token')
      }
      return { kind: 'user', userId: known.userId, org: known.org }
    }
    this.tokenStats.misses++
    try {
      const { payload } = await jwtVerify(token, this.jwks, {
        issuer: this.opts.issuer,
        audience: this.opts.audience,
        algorithms: ['ES256'],
        clockTolerance: this.opts.clockToleranceSeconds,
        requiredClaims: ['sub', 'exp', 'iat'],
      })
      if (!isId(payload.sub)) throw new Error('bad subject')
      const org = typeof payload.org === 'string' && isId(payload.org) ? payload.org : undefined
      if (typeof payload.exp === 'number')
        this.verified.set(token, { userId: payload.sub, org, exp: payload.exp })
      return { kind: 'user', userId: payload.sub, org }
    } catch (err) {
      if (err instanceof AppError) throw err
      if (
        (err as { code?: string }).code === 'ERR_JWKS_TIMEOUT' ||
        (err as Error).message?.includes('fetch failed')
      ) {
        throw new AppError('SERVICE_UNAVAILABLE', 'cannot verify tokens right now')
      }
      throw new AppError('INVALID_CREDENTIALS', 'invalid or expired access token')
    }
  }

  /** The user's ACTIVE role in the organization (with the user's name), or null. */
  async activeMember(
    organizationId: string,
    userId: string,
    requestId: string,
  ): Promise<{ role: Role; name?: string } | null> {
    const cacheKey = `${organizationId}:${userId}`
    const cached = this.memberships.get(cacheKey)
    if (cached) return cached
    // Only ACTIVE answers are cached (and dropped by the membership broadcast): a refusal is
    // asked again, so a member who was just added is let in on the very next request.
    let m: MembershipInfo | null = null
    for (let attempt = 0; attempt < 2; attempt++) {
      const asked = this.membershipSeq
      m = await this.identity.membership(organizationId, userId, requestId)
      // Changed while identity was asked (a removal, say): that answer may predate the change,
      // so it is asked once more and, if it changed again meanwhile, used but not cached.
      const changed = (this.membershipChanges.get(cacheKey) ?? 0) > asked
      if (!changed) {
        if (m?.status === 'ACTIVE') this.memberships.set(cacheKey, m)
        break
      }
    }
    return m?.status === 'ACTIVE' ? m : null
  }

  /** Called when identity changes or ends a membership: the next request asks again. */
  membershipChanged(organizationId: string, userId: string): void {
    const cacheKey = `${organizationId}:${userId}`
    this.membershipChanges.set(cacheKey, ++this.membershipSeq)
    this.memberships.delete(cacheKey)
  }

  /** Called when any replica revokes a key. */
  revoked(hash: string): void {
    this.revokedHashes.set(hash, true)
    this.keys.delete(hash)
  }
}
