import { randomBytes } from 'node:crypto'
import type { AddressInfo } from 'node:net'
import { MemoryBus } from '@pm/bus'
import type { ResolvedApiKey, Scope } from '@pm/contracts'
import { generateApiKey, hashApiKey } from '@pm/kit'
import { type CaseCredential, commonRouteCases } from '@pm/testkit'
import Fastify, { type FastifyInstance } from 'fastify'
import { exportJWK, generateKeyPair, type JWK, SignJWT } from 'jose'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, loadGatewayConfig } from '../src/app.ts'

const WORKSPACE = 'a1'.repeat(12)
const OTHER = 'b2'.repeat(12)
const USER = 'c3'.repeat(12)
const KID = 'test-key'

/**
 * identity as the gateway sees it: its JWKS, key resolution by hash and memberships. USER
 * is the ACTIVE OWNER of WORKSPACE and of nothing else.
 */
async function fakeIdentity(keys: Map<string, ResolvedApiKey>, jwk: JWK): Promise<FastifyInstance> {
  const app = Fastify()
  app.get('/.well-known/jwks.json', async () => ({ keys: [{ ...jwk, kid: KID, alg: 'ES256', use: 'sig' }] }))
  app.post('/internal/api-keys/resolve', async (request, reply) => {
    const key = keys.get((request.body as { hash: string }).hash)
    return key ?? reply.code(404).send({ error: { code: 'NOT_FOUND' } })
  })
  app.get('/internal/memberships/:org/:user', async (request, reply) => {
    const { org, user } = request.params as { org: string; user: string }
    if (org === WORKSPACE && user === USER) return { role: 'OWNER', status: 'ACTIVE' }
    return reply.code(404).send({ error: { code: 'NOT_FOUND' } })
  })
  await app.listen({ port: 0, host: '127.0.0.1' })
  return app
}

describe('the common 401/403/404 cases of every declared route, at the gateway', () => {
  const bus = new MemoryBus()
  const keys = new Map<string, ResolvedApiKey>()
  let identity: FastifyInstance
  let gateway: Awaited<ReturnType<typeof buildApp>>
  let sign: (org: string) => Promise<string>

  beforeAll(async () => {
    const { publicKey, privateKey } = await generateKeyPair('ES256')
    identity = await fakeIdentity(keys, await exportJWK(publicKey))
    sign = (org) =>
      new SignJWT({ org })
        .setProtectedHeader({ alg: 'ES256', kid: KID })
        .setSubject(USER)
        .setIssuer('prompt-service')
        .setAudience('prompt-service-api')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(privateKey)
    const identityUrl = `http://127.0.0.1:${(identity.server.address() as AddressInfo).port}`
    // Nothing listens on the other upstreams: a case the gateway let through would answer 503.
    const nowhere = 'http://127.0.0.1:9'
    gateway = await buildApp({
      bus,
      config: loadGatewayConfig({
        NODE_ENV: 'test',
        LOG_LEVEL: 'silent',
        INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
        IDENTITY_URL: identityUrl,
        PROMPTS_URL: nowhere,
        WEBHOOKS_URL: nowhere,
        RENDER_URLS: nowhere,
      }),
    })
  })

  afterAll(async () => {
    await gateway?.close()
    await identity?.close()
    await bus.close()
  })

  const apiKey = (scopes: Scope[]): string => {
    const key = generateApiKey()
    keys.set(hashApiKey(key), {
      _id: randomBytes(12).toString('hex'),
      organizationId: WORKSPACE,
      scopes,
      expiresAt: null,
      revokedAt: null,
      rateLimit: null,
    })
    return key
  }

  async function authorization(credential: CaseCredential): Promise<Record<string, string>> {
    switch (credential.kind) {
      case 'none':
        return {}
      case 'apiKey':
        return { authorization: `Bearer ${apiKey(credential.scopes)}` }
      case 'user':
        return { authorization: `Bearer ${await sign(credential.org === 'workspace' ? WORKSPACE : OTHER)}` }
    }
  }

  const cases = commonRouteCases({ workspace: WORKSPACE, other: OTHER })

  it('covers every protected route', () => {
    expect(new Set(cases.map((c) => c.operationId)).size).toBeGreaterThan(35)
  })

  it.each(cases)('$name', async (c) => {
    const res = await gateway.inject({
      method: c.method,
      url: c.url,
      headers: await authorization(c.credential),
    })
    expect({ status: res.statusCode, code: res.json().error?.code }).toEqual(c.expect)
  })
})
