import { randomUUID } from 'node:crypto'
import { newId } from '@pm/kit'
import { exportJWK, generateKeyPair, importJWK, type JWK, SignJWT } from 'jose'
import type { IdentityStore, SigningKeyRecord } from '../store/types.ts'

export const JWT_ALG = 'ES256'

export interface TokenSettings {
  issuer: string
  audience: string
  ttlSeconds: number
}

/**
 * Signs access tokens with the store's signing key (ES256, with a `kid`), created on
 * first start and shared by every identity replica through the store.
 */
export class TokenIssuer {
  private readonly store: IdentityStore
  private readonly settings: TokenSettings
  private key: { record: SigningKeyRecord; privateKey: Awaited<ReturnType<typeof importJWK>> } | undefined

  constructor(store: IdentityStore, settings: TokenSettings) {
    this.store = store
    this.settings = settings
  }

  async init(): Promise<void> {
    let record = await this.store.latestSigningKey()
    if (!record) {
      const { privateKey, publicKey } = await generateKeyPair(JWT_ALG, { extractable: true })
      const kid = newId()
      record = await this.store.ensureSigningKey({
        kid,
        alg: JWT_ALG,
        privateJwk: { ...(await exportJWK(privateKey)), kid, alg: JWT_ALG },
        publicJwk: { ...(await exportJWK(publicKey)), kid, alg: JWT_ALG, use: 'sig' },
        createdAt: new Date().toISOString(),
      })
    }
    this.key = { record, privateKey: await importJWK(record.privateJwk as JWK, record.alg) }
  }

  async issue(userId: string, organizationId: string | null): Promise<{ token: string; expiresIn: number }> {
    if (!this.key) throw new Error('token issuer not initialised')
    const jwt = new SignJWT(organizationId ? { org: organizationId } : {})
      .setProtectedHeader({ alg: this.key.record.alg, kid: this.key.record.kid, typ: 'JWT' })
      .setSubject(userId)
      .setIssuer(this.settings.issuer)
      .setAudience(this.settings.audience)
      .setIssuedAt()
      .setExpirationTime(`${this.settings.ttlSeconds}s`)
      .setJti(randomUUID())
    return { token: await jwt.sign(this.key.privateKey), expiresIn: this.settings.ttlSeconds }
  }

  async jwks(): Promise<{ keys: Record<string, unknown>[] }> {
    const keys = await this.store.listSigningKeys()
    return { keys: keys.map((k) => k.publicJwk) }
  }
}
