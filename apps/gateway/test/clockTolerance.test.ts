import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import Fastify, { type FastifyInstance } from 'fastify'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { Authenticator } from '../src/auth.ts'
import { loadGatewayConfig } from '../src/config.ts'
import { IdentityClient } from '../src/identityClient.ts'

const KID = 'test-key'
const USER = 'c3'.repeat(12)

describe('JWT_CLOCK_TOLERANCE_SECONDS: how long past its expiry an access token is accepted', () => {
  let jwks: FastifyInstance
  let identityUrl: string
  let signingKey: Awaited<ReturnType<typeof generateKeyPair>>['privateKey']
  /** A token of `user` that expires in `inSeconds` (negative: expired that long ago), issued a minute before. */
  const tokenFor = (user: string, inSeconds: number) => {
    const now = Math.floor(Date.now() / 1000)
    return new SignJWT({})
      .setProtectedHeader({ alg: 'ES256', kid: KID })
      .setSubject(user)
      .setIssuer('prompt-service')
      .setAudience('prompt-service-api')
      .setIssuedAt(Math.min(now, now + inSeconds - 60))
      .setExpirationTime(now + inSeconds)
      .sign(signingKey)
  }
  /** A token whose `exp` passed `agoSeconds` ago. */
  const expiredToken = (agoSeconds: number) => tokenFor(USER, -agoSeconds)

  beforeAll(async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256')
    signingKey = privateKey
    const jwk = await exportJWK(publicKey)
    jwks = Fastify()
    jwks.get('/.well-known/jwks.json', async () => ({
      keys: [{ ...jwk, kid: KID, alg: 'ES256', use: 'sig' }],
    }))
    await jwks.listen({ port: 0, host: '127.0.0.1' })
    identityUrl = `http://127.0.0.1:${(jwks.server.address() as AddressInfo).port}`
  })

  afterAll(async () => {
    await jwks?.close()
  })

  const authenticator = (env: Record<string, string>) => {
    const config = loadGatewayConfig({ INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'), ...env })
    return new Authenticator(new IdentityClient(identityUrl, config.INTERNAL_AUTH_SECRET), {
      identityUrl,
      issuer: config.JWT_ISSUER,
      audience: config.JWT_AUDIENCE,
      clockToleranceSeconds: config.JWT_CLOCK_TOLERANCE_SECONDS,
      keyCacheTtlMs: config.API_KEY_CACHE_TTL_MS,
      membershipCacheTtlMs: config.MEMBERSHIP_CACHE_TTL_MS,
    })
  }

  it('defaults to 30 s: a token 10 s past its expiry passes, one 40 s past it does not', async () => {
    const auth = authenticator({})
    expect(await auth.authenticate(`Bearer ${await expiredToken(10)}`, 'r1')).toEqual({
      kind: 'user',
      userId: USER,
      org: undefined,
    })
    await expect(auth.authenticate(`Bearer ${await expiredToken(40)}`, 'r2')).rejects.toMatchObject({
      code: 'INVALID_CREDENTIALS',
    })
  })

  it('0 refuses a token as soon as it expires', async () => {
    const auth = authenticator({ JWT_CLOCK_TOLERANCE_SECONDS: '0' })
    await expect(auth.authenticate(`Bearer ${await expiredToken(2)}`, 'r3')).rejects.toMatchObject({
      code: 'INVALID_CREDENTIALS',
    })
  })

  it('is validated: negative or over 300 s is refused at start', () => {
    for (const value of ['-1', '301', 'soon']) {
      expect(() => authenticator({ JWT_CLOCK_TOLERANCE_SECONDS: value }), value).toThrow(
        /JWT_CLOCK_TOLERANCE_SECONDS/,
      )
    }
  })

  describe('a verified token is remembered, its expiry checked on every use', () => {
    afterEach(() => {
      vi.useRealTimers()
    })

    it('checks the signature once, and refuses the remembered token once it expires', async () => {
      const auth = authenticator({ JWT_CLOCK_TOLERANCE_SECONDS: '0' })
      const token = await tokenFor(USER, 120)
      for (let i = 0; i < 3; i++) {
        expect(await auth.authenticate(`Bearer ${token}`, `r${i}`)).toMatchObject({ userId: USER })
      }
      expect(auth.tokenStats).toEqual({ hits: 2, misses: 1 })
      // Past its expiry the remembered token is refused, and forgotten.
      vi.useFakeTimers({ toFake: ['Date'] })
      vi.setSystemTime(Date.now() + 121_000)
      await expect(auth.authenticate(`Bearer ${token}`, 'r4')).rejects.toMatchObject({
        code: 'INVALID_CREDENTIALS',
      })
      await expect(auth.authenticate(`Bearer ${token}`, 'r5')).rejects.toMatchObject({
        code: 'INVALID_CREDENTIALS',
      })
      expect(auth.tokenStats).toEqual({ hits: 3, misses: 2 })
    })

    it('never takes a changed token for a remembered one', async () => {
      const auth = authenticator({})
      const token = await tokenFor(USER, 120)
      await auth.authenticate(`Bearer ${token}`, 'r1')
      // The same claims with another user, the first token's signature: a different string, checked.
      const [header, , signature] = token.split('.')
      const other = (await tokenFor('d4'.repeat(12), 120)).split('.')[1]
      await expect(auth.authenticate(`Bearer ${header}.${other}.${signature}`, 'r2')).rejects.toMatchObject({
        code: 'INVALID_CREDENTIALS',
      })
      expect(auth.tokenStats.misses).toBe(2)
    })
  })
})
