import { randomBytes } from 'node:crypto'
import { SCOPES, type Scope } from '@pm/contracts'
import { ROUTES, type RoutePolicy } from '@pm/gateway'
import { generateApiKey, newId, signContext } from '@pm/kit'
import { exportJWK, generateKeyPair, SignJWT } from 'jose'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import {
  type ErrorReply,
  identitySigningKey,
  Recorder,
  randomIp,
  runIdentityCli,
  signJwt,
  unsignedJwt,
} from '../src/access.ts'
import { call } from '../src/client.ts'
import { ADMIN } from '../src/slice.ts'
import { auditResponses, type ResponseAudit } from '../src/openapi.ts'
import { type Stack, startStack } from '../src/stack.ts'

interface Data<T> {
  data: T
}
interface Session {
  accessToken: string
  refreshToken: string
  organizationId: string
  user: { _id: string; email: string }
}
interface CreatedKey {
  key: string
  apiKey: { _id: string; organizationId: string; scopes: Scope[] }
}

/** Codes with which the gateway itself refuses a request (authentication and scopes). */
const GATEWAY_REFUSALS = ['AUTH_REQUIRED', 'INVALID_CREDENTIALS', 'INSUFFICIENT_SCOPE', 'USER_TOKEN_REQUIRED']

/** A concrete path for a route of the table; `:id` of workspace routes is `org`. */
function pathFor(route: RoutePolicy, org: string): string {
  return route.url
    .replace(':id', route.org === 'path' ? org : newId())
    .replace(':env', 'preview')
    .replace(':name', 'x')
    .replace(/:[A-Za-z]+/g, () => newId())
}

const hasBody = (route: RoutePolicy) => route.method === 'POST' || route.method === 'PATCH'

describe('identity and access through the gateway (spec sections 5 and 7)', () => {
  let stack: Stack
  let audit: ResponseAudit
  let gw: string
  const rec = new Recorder()
  /** Every secret the tests handle: none may reach a log line. */
  const secrets = new Set<string>([ADMIN.password])
  /** Where each secret was shown (the response after which it must never appear again). */
  const shownAt = new Map<string, number>()
  const ip = randomIp()
  let admin: Session
  let org: string

  const login = (email: string, password: string, from = ip) =>
    rec.call<Data<Session> & ErrorReply>(gw, 'POST', '/api/v1/auth/login', {
      body: { email, password },
      headers: { 'x-forwarded-for': from },
    })

  const mintKey = async (scopes: Scope[], extra: Record<string, unknown> = {}, token = admin.accessToken) => {
    const res = await rec.call<Data<CreatedKey>>(gw, 'POST', `/api/v1/organizations/${org}/api-keys`, {
      token,
      body: { name: `k-${scopes.join('+')}`.slice(0, 64), scopes, ...extra },
    })
    expect(res.status).toBe(201)
    secrets.add(res.body.data.key)
    shownAt.set(res.body.data.key, rec.mark())
    return res.body.data
  }

  beforeAll(async () => {
    stack = await startStack({
      // Tests send X-Forwarded-For so that each one's per-IP limits are its own.
      TRUSTED_PROXIES: '127.0.0.1',
      LOG_LEVEL: 'debug',
      AUTH_ALLOW_SIGNUP: 'true',
      RATE_LIMIT_PUBLIC_POINTS: '5',
    })
    audit = auditResponses(stack.gateway)
    gw = stack.gateway
    const res = await login(ADMIN.email, ADMIN.password)
    expect(res.status).toBe(200)
    admin = res.body.data
    org = admin.organizationId
    secrets.add(admin.refreshToken)
    shownAt.set(admin.refreshToken, rec.mark())
  }, 120_000)

  afterAll(async () => {
    audit?.stop()
    await stack?.stop()
  })

  it('refuses every non-public route without a header, with a malformed one, and with an unknown key', async () => {
    const unknownKey = `pk_${'A'.repeat(32)}`
    // A well-formed key (right checksum) that identity does not know.
    const stranger = generateApiKey()
    const routes = ROUTES.filter((r) => r.auth !== 'public')
    expect(routes.length).toBeGreaterThan(40)
    for (const route of routes) {
      const path = pathFor(route, org)
      const body = hasBody(route) ? {} : undefined
      const where = `${route.method} ${route.url}`
      const none = await call<ErrorReply>(gw, route.method, path, { body })
      expect([none.status, none.body.error?.code], where).toEqual([401, 'AUTH_REQUIRED'])
      for (const header of ['Basic YWRtaW46YWRtaW4=', 'Bearer', `Bearer ${unknownKey}`, 'Bearer not-a-jwt']) {
        const bad = await call<ErrorReply>(gw, route.method, path, {
          body,
          headers: { authorization: header },
        })
        expect([bad.status, bad.body.error?.code], `${where} with ${header}`).toEqual([
          401,
          'INVALID_CREDENTIALS',
        ])
      }
      const wrong = await call<ErrorReply>(gw, route.method, path, { body, token: stranger })
      expect([wrong.status, wrong.body.error?.code], `${where} with an unknown key`).toEqual([
        401,
        'INVALID_CREDENTIALS',
      ])
    }
  })

  it('applies the scope table to every route, and keeps user-token routes from API keys', async () => {
    const allScopes = await mintKey([...SCOPES])
    const without = new Map<Scope, string>()
    const only = new Map<Scope, string>()
    for (const scope of SCOPES) {
      without.set(scope, (await mintKey(SCOPES.filter((s) => s !== scope))).key)
      only.set(scope, (await mintKey([scope])).key)
    }
    const checked = new Set<string>()
    for (const route of ROUTES) {
      const path = pathFor(route, org)
      const body = hasBody(route) ? {} : undefined
      const where = `${route.method} ${route.url}`
      if (route.auth === 'user') {
        const res = await call<ErrorReply>(gw, route.method, path, { body, token: allScopes.key })
        expect([res.status, res.body.error?.code], where).toEqual([403, 'USER_TOKEN_REQUIRED'])
        checked.add('user')
      } else if (route.auth === 'any' && route.scope) {
        const lacking = await call<ErrorReply>(gw, route.method, path, {
          body,
          token: without.get(route.scope),
        })
        expect([lacking.status, lacking.body.error?.code], `${where} without ${route.scope}`).toEqual([
          403,
          'INSUFFICIENT_SCOPE',
        ])
        const holding = await call<ErrorReply>(gw, route.method, path, { body, token: only.get(route.scope) })
        expect(GATEWAY_REFUSALS, `${where} with only ${route.scope}: ${holding.status}`).not.toContain(
          holding.body?.error?.code,
        )
        checked.add(route.scope)
      }
    }
    // Every scope a route declares and the user-token rule were exercised.
    // environments:promote-protected is no route's scope: the prompts service checks it on a
    // promote to a protected environment (e2e/test/release.int.test.ts).
    expect([...checked].sort()).toEqual(
      [...SCOPES.filter((s) => s !== 'environments:promote-protected'), 'user'].sort(),
    )

    // The spec's named cases, by name.
    const publish = await call<ErrorReply>(gw, 'POST', `/api/v1/prompts/${newId()}/publish`, {
      token: allScopes.key,
      body: {},
    })
    expect([publish.status, publish.body.error.code]).toEqual([403, 'USER_TOKEN_REQUIRED'])
  })

  it('refuses wrong, broken-checksum, revoked and expired keys with 401', async () => {
    const { key, apiKey } = await mintKey(['prompts:read'])
    const ok = await call(gw, 'GET', '/api/v1/prompts', { token: key })
    expect(ok.status).toBe(200)

    // A broken checksum is refused without asking identity (no log line for that request there).
    const last = key.at(-1) === 'a' ? 'b' : 'a'
    const broken = `${key.slice(0, -1)}${last}`
    const brokenId = `e2e-broken-${randomBytes(6).toString('hex')}`
    const res = await call<ErrorReply>(gw, 'GET', '/api/v1/prompts', {
      token: broken,
      headers: { 'x-request-id': brokenId },
    })
    expect([res.status, res.body.error.code]).toEqual([401, 'INVALID_CREDENTIALS'])
    // ... whereas a well-formed unknown key is looked up (the control).
    const lookedUpId = `e2e-lookup-${randomBytes(6).toString('hex')}`
    const unknown = await call(gw, 'GET', '/api/v1/prompts', {
      token: generateApiKey(),
      headers: { 'x-request-id': lookedUpId },
    })
    expect(unknown.status).toBe(401)
    const identityLogs = () => stack.processes.identity?.logs.join('\n') ?? ''
    await vi.waitFor(() => expect(identityLogs()).toContain(lookedUpId), { timeout: 5_000 })
    expect(identityLogs()).not.toContain(brokenId)

    // Revoked: refused at once.
    const revoke = await rec.call(gw, 'DELETE', `/api/v1/organizations/${org}/api-keys/${apiKey._id}`, {
      token: admin.accessToken,
    })
    expect(revoke.status).toBe(200)
    await vi.waitFor(
      async () => {
        const after = await call<ErrorReply>(gw, 'GET', '/api/v1/prompts', { token: key })
        expect([after.status, after.body.error?.code]).toEqual([401, 'INVALID_CREDENTIALS'])
      },
      { timeout: 1_000, interval: 25 },
    )

    // Expired: accepted until expiresAt, refused after. 3 s: room for the mint and the first
    // call on a loaded machine (each takes well under a second), no more waiting than that.
    const expiring = await mintKey(['prompts:read'], {
      expiresAt: new Date(Date.now() + 3_000).toISOString(),
    })
    expect((await call(gw, 'GET', '/api/v1/prompts', { token: expiring.key })).status).toBe(200)
    await vi.waitFor(
      async () => {
        const after = await call<ErrorReply>(gw, 'GET', '/api/v1/prompts', { token: expiring.key })
        expect([after.status, after.body.error?.code]).toEqual([401, 'INVALID_CREDENTIALS'])
      },
      { timeout: 15_000, interval: 200 },
    )
  })

  it('shows an API key exactly one organization, and limits it by its own rate', async () => {
    const second = await rec.call<Data<{ _id: string }>>(gw, 'POST', '/api/v1/organizations', {
      token: admin.accessToken,
      body: { name: 'Second Workspace' },
    })
    expect(second.status).toBe(201)
    const mine = await rec.call<Data<{ organizations: { _id: string }[] }>>(
      gw,
      'GET',
      '/api/v1/organizations',
      {
        token: admin.accessToken,
      },
    )
    expect(mine.body.data.organizations.map((o) => o._id)).toEqual(
      expect.arrayContaining([org, second.body.data._id]),
    )

    const { key } = await mintKey(['organization:read'], { rateLimit: { points: 3, durationSeconds: 60 } })
    const listed = await call<Data<{ organizations: { _id: string }[] }>>(
      gw,
      'GET',
      '/api/v1/organizations',
      {
        token: key,
      },
    )
    expect(listed.status).toBe(200)
    expect(listed.body.data.organizations.map((o) => o._id)).toEqual([org])
    expect(listed.headers.get('ratelimit-policy')).toBe('"api-key";q=3;w=60')
    expect(listed.headers.get('ratelimit')).toMatch(/^"api-key";r=2;t=\d+$/)
    await call(gw, 'GET', `/api/v1/organizations/${org}`, { token: key })
    await call(gw, 'GET', `/api/v1/organizations/${org}`, { token: key })
    const limited = await call<ErrorReply>(gw, 'GET', `/api/v1/organizations/${org}`, { token: key })
    expect([limited.status, limited.body.error.code]).toEqual([429, 'RATE_LIMITED'])
    const retryAfter = Number(limited.headers.get('retry-after'))
    expect(retryAfter).toBeGreaterThanOrEqual(1)
    expect(retryAfter).toBeLessThanOrEqual(60)
    expect(limited.headers.get('ratelimit')).toBe(`"api-key";r=0;t=${retryAfter}`)

    // A key without its own rate gets the default.
    const plain = await mintKey(['organization:read'])
    const res = await call(gw, 'GET', '/api/v1/organizations', { token: plain.key })
    expect(res.headers.get('ratelimit-policy')).toBe('"api-key";q=600;w=60')
  })

  it('refuses hostile JWTs: alg none, another key, HS256, expired, wrong issuer or audience', async () => {
    const real = identitySigningKey(stack.dataDir)
    const claims = { sub: admin.user._id, org }
    // The control: a token signed with identity's key is accepted.
    const good = await signJwt(real.privateJwk, real.kid, claims)
    expect((await call(gw, 'GET', '/api/v1/organizations', { token: good })).status).toBe(200)

    const { privateKey } = await generateKeyPair('ES256', { extractable: true })
    const strangerJwk = await exportJWK(privateKey)
    const now = Math.floor(Date.now() / 1000)
    const hostile: Record<string, string> = {
      'alg none': unsignedJwt(claims),
      'another key, same kid': await signJwt(strangerJwk, real.kid, claims),
      'another key, unknown kid': await signJwt(strangerJwk, 'not-a-kid', claims),
      'HS256 with the public key as secret': await new SignJWT({ org })
        .setProtectedHeader({ alg: 'HS256', kid: real.kid })
        .setSubject(admin.user._id)
        .setIssuer('prompt-service')
        .setAudience('prompt-service-api')
        .setIssuedAt()
        .setExpirationTime('5m')
        .sign(new TextEncoder().encode(JSON.stringify({ ...real.privateJwk, d: undefined }))),
      expired: await signJwt(real.privateJwk, real.kid, { ...claims, iat: now - 3600, exp: now - 120 }),
      'wrong issuer': await signJwt(real.privateJwk, real.kid, { ...claims, iss: 'someone-else' }),
      'wrong audience': await signJwt(real.privateJwk, real.kid, { ...claims, aud: 'another-api' }),
      'tampered payload': `${good.split('.')[0]}.${Buffer.from(
        JSON.stringify({
          sub: newId(),
          org,
          iss: 'prompt-service',
          aud: 'prompt-service-api',
          exp: now + 300,
        }),
      ).toString('base64url')}.${good.split('.')[2]}`,
      garbage: 'eyJhbGciOiJFUzI1NiJ9.e30.c2ln',
    }
    for (const [name, token] of Object.entries(hostile)) {
      const res = await call<ErrorReply>(gw, 'GET', '/api/v1/organizations', { token })
      expect([res.status, res.body.error?.code], name).toEqual([401, 'INVALID_CREDENTIALS'])
    }
  })

  it('strips forged internal headers; every service refuses a request without a valid context', async () => {
    const secret = stack.env.INTERNAL_AUTH_SECRET ?? ''
    const other = await signUp('forger')
    // A context correctly signed with the real secret, sent by a client: stripped.
    const forged = signContext(
      {
        kind: 'user',
        userId: other.user._id,
        organizationId: other.organizationId,
        role: 'OWNER',
        scopes: [...SCOPES],
        requestId: 'x',
      },
      secret,
    )
    const stripped = await call<ErrorReply>(gw, 'GET', '/api/v1/prompts', {
      headers: { 'x-pm-context': forged },
    })
    expect([stripped.status, stripped.body.error.code]).toEqual([401, 'AUTH_REQUIRED'])
    // With a real key, the forged context does not move the request into another workspace.
    const created = await call<Data<{ _id: string }>>(gw, 'POST', '/api/v1/prompts', {
      token: other.accessToken,
      body: { name: `Secret plan ${newId()}`, template: 'x' },
    })
    expect(created.status).toBe(201)
    const { key } = await mintKey(['prompts:read'])
    const listed = await call<Data<{ prompts: { _id: string }[] }>>(gw, 'GET', '/api/v1/prompts?limit=100', {
      token: key,
      headers: { 'x-pm-context': forged, 'x-pm-anything': 'x' },
    })
    expect(listed.status).toBe(200)
    expect(listed.body.data.prompts.map((p) => p._id)).not.toContain(created.body.data._id)

    const context = {
      kind: 'user' as const,
      userId: admin.user._id,
      organizationId: org,
      scopes: [],
      requestId: 'x',
    }
    const good = signContext(context, secret)
    const [payload, signature] = good.split('.')
    const tampered = `${Buffer.from(JSON.stringify({ ...context, organizationId: newId(), exp: Date.now() + 60_000 })).toString('base64url')}.${signature}`
    const cases: Record<string, Record<string, string>> = {
      'no context': {},
      'garbage context': { 'x-pm-context': 'forged.context' },
      'wrong secret': { 'x-pm-context': signContext(context, `${secret}-not-it`) },
      expired: { 'x-pm-context': signContext(context, secret, Date.now() - 120_000) },
      tampered: { 'x-pm-context': tampered },
      'signature only': { 'x-pm-context': `.${signature}` },
      'payload only': { 'x-pm-context': `${payload}.` },
    }
    const targets: Array<[string, string, string]> = [
      ['identity', 'GET', '/api/v1/organizations'],
      ['prompts', 'GET', '/api/v1/prompts'],
      ['render', 'POST', `/api/v1/prompts/${newId()}/invoke`],
      ['webhooks', 'GET', `/api/v1/organizations/${org}/webhooks`],
    ]
    for (const [service, method, path] of targets) {
      const base = `http://127.0.0.1:${stack.ports[service]}`
      for (const [name, headers] of Object.entries(cases)) {
        const res = await call<ErrorReply>(base, method, path, {
          headers,
          body: method === 'POST' ? {} : undefined,
        })
        expect([res.status, res.body.error?.code], `${service}: ${name}`).toEqual([
          401,
          'INVALID_CREDENTIALS',
        ])
      }
    }
    // The control: the genuine context is accepted by the service.
    const direct = await call(`http://127.0.0.1:${stack.ports.identity}`, 'GET', '/api/v1/organizations', {
      headers: { 'x-pm-context': good },
    })
    expect(direct.status).toBe(200)
    // Internal routes are not reachable through the gateway.
    expect(
      (await call(gw, 'POST', '/internal/api-keys/resolve', { body: { hash: 'a'.repeat(64) } })).status,
    ).toBe(404)
  })

  /** Signs up a new user (AUTH_ALLOW_SIGNUP is on here) with a personal organization. */
  async function signUp(name: string): Promise<Session & { email: string; password: string }> {
    const email = `${name}-${newId()}@example.com`
    const password = `pw-${randomBytes(12).toString('hex')}`
    secrets.add(password)
    const res = await rec.call<Data<Session>>(gw, 'POST', '/api/v1/auth/register', {
      body: { email, password, name },
      headers: { 'x-forwarded-for': ip },
    })
    expect(res.status).toBe(201)
    secrets.add(res.body.data.refreshToken)
    shownAt.set(res.body.data.refreshToken, rec.mark())
    return { ...res.body.data, email, password }
  }

  it("answers 404 for another workspace's resources; acting there needs an ACTIVE membership", async () => {
    const bea = await signUp('bea')
    const orgB = bea.organizationId
    const prompt = await call<Data<{ _id: string }>>(gw, 'POST', '/api/v1/prompts', {
      token: bea.accessToken,
      body: { name: `Bea private ${newId()}`, template: 'Hi {{ who }}' },
    })
    expect(prompt.status).toBe(201)
    const promptB = prompt.body.data._id
    const { key } = await mintKey([...SCOPES])
    const A = admin.accessToken
    // A prompt of the key's own workspace: naming another workspace in the body must not reach it.
    const own = await call<Data<{ _id: string }>>(gw, 'POST', '/api/v1/prompts', {
      token: key,
      body: { name: `Own ${newId()}`, template: 'Hi {{ who }}' },
    })
    expect(own.status).toBe(201)
    const promptA = own.body.data._id

    const refused: Array<[string, string, string, { token: string; body?: unknown }]> = [
      [
        'key: create there (body)',
        'POST',
        '/api/v1/prompts',
        { token: key, body: { organizationId: orgB, name: 'x', template: 'x' } },
      ],
      [
        'key: invoke its own prompt naming another workspace (body)',
        'POST',
        `/api/v1/prompts/${promptA}/invoke`,
        { token: key, body: { organizationId: orgB, variables: { who: 'x' } } },
      ],
      [
        'key: preview its own draft naming another workspace (body)',
        'POST',
        `/api/v1/prompts/${promptA}/inject`,
        { token: key, body: { organizationId: orgB } },
      ],
      ['key: prompt of another workspace', 'GET', `/api/v1/prompts/${promptB}`, { token: key }],
      ['key: its versions', 'GET', `/api/v1/prompts/${promptB}/versions`, { token: key }],
      [
        'key: invoke it',
        'POST',
        `/api/v1/prompts/${promptB}/invoke`,
        { token: key, body: { variables: {} } },
      ],
      [
        'key: organizationId of another workspace',
        'GET',
        `/api/v1/prompts?organizationId=${orgB}`,
        { token: key },
      ],
      ['key: another organization', 'GET', `/api/v1/organizations/${orgB}`, { token: key }],
      ['key: its members', 'GET', `/api/v1/organizations/${orgB}/members`, { token: key }],
      ['JWT: prompt of another workspace', 'GET', `/api/v1/prompts/${promptB}`, { token: A }],
      [
        'JWT: in a workspace without membership',
        'GET',
        `/api/v1/prompts/${promptB}?organizationId=${orgB}`,
        { token: A },
      ],
      ['JWT: list there', 'GET', `/api/v1/prompts?organizationId=${orgB}`, { token: A }],
      [
        'JWT: create there (body)',
        'POST',
        '/api/v1/prompts',
        { token: A, body: { organizationId: orgB, name: 'x', template: 'x' } },
      ],
      ['JWT: another organization', 'GET', `/api/v1/organizations/${orgB}`, { token: A }],
      ['JWT: its API keys', 'GET', `/api/v1/organizations/${orgB}/api-keys`, { token: A }],
      ['JWT: rename it', 'PATCH', `/api/v1/organizations/${orgB}`, { token: A, body: { name: 'Mine now' } }],
    ]
    for (const [name, method, path, opts] of refused) {
      const res = await call<ErrorReply>(gw, method, path, opts)
      expect([res.status, res.body.error?.code], name).toEqual([404, 'NOT_FOUND'])
    }
    // Forking into a workspace without ACTIVE membership.
    const fork = await call<ErrorReply>(gw, 'POST', `/api/v1/prompts/${newId()}/versions/${newId()}/fork`, {
      token: A,
      body: { name: 'Copy', targetOrganizationId: orgB },
    })
    expect([fork.status, fork.body.error.code]).toEqual([403, 'MEMBERSHIP_REQUIRED'])

    // Bea adds the admin as a MEMBER: the admin can now read there, not administer.
    const added = await rec.call<Data<{ userId: string; role: string; status: string }>>(
      gw,
      'POST',
      `/api/v1/organizations/${orgB}/members`,
      { token: bea.accessToken, body: { email: ADMIN.email } },
    )
    expect(added.status).toBe(201)
    expect(added.body.data).toMatchObject({ userId: admin.user._id, role: 'MEMBER', status: 'ACTIVE' })
    const read = await call(gw, 'GET', `/api/v1/prompts/${promptB}?organizationId=${orgB}`, { token: A })
    expect(read.status).toBe(200)
    const rename = await call<ErrorReply>(gw, 'PATCH', `/api/v1/organizations/${orgB}`, {
      token: A,
      body: { name: 'Mine now' },
    })
    expect([rename.status, rename.body.error.code]).toEqual([403, 'INSUFFICIENT_SCOPE'])
    const keys = await call<ErrorReply>(gw, 'POST', `/api/v1/organizations/${orgB}/api-keys`, {
      token: A,
      body: { name: 'x', scopes: ['prompts:read'] },
    })
    expect([keys.status, keys.body.error.code]).toEqual([403, 'FORBIDDEN'])

    // Suspended: refused at once (the gateway's membership cache is dropped by a broadcast).
    const suspend = await call(gw, 'PATCH', `/api/v1/organizations/${orgB}/members/${admin.user._id}`, {
      token: bea.accessToken,
      body: { status: 'SUSPENDED' },
    })
    expect(suspend.status).toBe(200)
    await vi.waitFor(
      async () => {
        const res = await call(gw, 'GET', `/api/v1/prompts/${promptB}?organizationId=${orgB}`, { token: A })
        expect(res.status).toBe(404)
      },
      { timeout: 1_000, interval: 25 },
    )
    const restore = await call(gw, 'PATCH', `/api/v1/organizations/${orgB}/members/${admin.user._id}`, {
      token: bea.accessToken,
      body: { status: 'ACTIVE', role: 'ADMIN' },
    })
    expect(restore.status).toBe(200)
    await vi.waitFor(
      async () => {
        const res = await call(gw, 'PATCH', `/api/v1/organizations/${orgB}`, {
          token: A,
          body: { name: 'Renamed by an ADMIN' },
        })
        expect(res.status).toBe(200)
      },
      { timeout: 1_000, interval: 25 },
    )
    const removed = await call(gw, 'DELETE', `/api/v1/organizations/${orgB}/members/${admin.user._id}`, {
      token: bea.accessToken,
    })
    expect(removed.status).toBe(200)
    await vi.waitFor(
      async () => {
        const res = await call(gw, 'GET', `/api/v1/organizations/${orgB}`, { token: A })
        expect(res.status).toBe(404)
      },
      { timeout: 1_000, interval: 25 },
    )
  })

  it('manages the workspace and its members with a JWT or an organization:write key', async () => {
    const carol = await signUp('carol')
    const writer = await mintKey(['organization:read', 'organization:write'])
    const reader = await mintKey(['organization:read'])

    const renamed = await call<Data<{ name: string }>>(gw, 'PATCH', `/api/v1/organizations/${org}`, {
      token: writer.key,
      body: { name: 'Acme Renamed' },
    })
    expect(renamed.status).toBe(200)
    expect(renamed.body.data.name).toBe('Acme Renamed')
    const readerRename = await call<ErrorReply>(gw, 'PATCH', `/api/v1/organizations/${org}`, {
      token: reader.key,
      body: { name: 'No' },
    })
    expect([readerRename.status, readerRename.body.error.code]).toEqual([403, 'INSUFFICIENT_SCOPE'])

    const added = await call<Data<{ userId: string }>>(gw, 'POST', `/api/v1/organizations/${org}/members`, {
      token: writer.key,
      body: { email: carol.email, role: 'ADMIN' },
    })
    expect(added.status).toBe(201)
    const ownerByKey = await call<ErrorReply>(
      gw,
      'PATCH',
      `/api/v1/organizations/${org}/members/${carol.user._id}`,
      {
        token: writer.key,
        body: { role: 'OWNER' },
      },
    )
    expect([ownerByKey.status, ownerByKey.body.error.code]).toEqual([403, 'FORBIDDEN'])
    const members = await call<Data<{ members: { userId: string; role: string }[] }>>(
      gw,
      'GET',
      `/api/v1/organizations/${org}/members`,
      { token: reader.key },
    )
    expect(members.body.data.members).toEqual(
      expect.arrayContaining([
        expect.objectContaining({ userId: admin.user._id, role: 'OWNER' }),
        expect.objectContaining({ userId: carol.user._id, role: 'ADMIN' }),
      ]),
    )
    // Carol acts in the admin's workspace by naming it, and can mint keys there as an ADMIN.
    const carolKey = await mintKey(['prompts:read'], {}, carol.accessToken)
    expect(carolKey.apiKey.organizationId).toBe(org)
    const lastOwner = await call<ErrorReply>(
      gw,
      'DELETE',
      `/api/v1/organizations/${org}/members/${admin.user._id}`,
      {
        token: admin.accessToken,
      },
    )
    expect([lastOwner.status, lastOwner.body.error.code]).toEqual([409, 'CONFLICT'])
    const gone = await call(gw, 'DELETE', `/api/v1/organizations/${org}/members/${carol.user._id}`, {
      token: admin.accessToken,
    })
    expect(gone.status).toBe(200)
  })

  it('rotates refresh tokens through the gateway; a reused one ends the session; logout ends it too', async () => {
    const first = (await login(ADMIN.email, ADMIN.password)).body.data
    secrets.add(first.refreshToken)
    shownAt.set(first.refreshToken, rec.mark())
    const refresh = (refreshToken: string) =>
      rec.call<Data<Session> & ErrorReply>(gw, 'POST', '/api/v1/auth/refresh', {
        body: { refreshToken },
        headers: { 'x-forwarded-for': ip },
      })
    const r1 = await refresh(first.refreshToken)
    expect(r1.status).toBe(200)
    const second = r1.body.data
    secrets.add(second.refreshToken)
    shownAt.set(second.refreshToken, rec.mark())
    expect(second.refreshToken).not.toBe(first.refreshToken)
    expect((await call(gw, 'GET', '/api/v1/organizations', { token: second.accessToken })).status).toBe(200)

    const replay = await refresh(first.refreshToken)
    expect([replay.status, replay.body.error.code]).toEqual([401, 'INVALID_CREDENTIALS'])
    expect((await refresh(second.refreshToken)).status).toBe(401)

    const third = (await login(ADMIN.email, ADMIN.password)).body.data
    secrets.add(third.refreshToken)
    shownAt.set(third.refreshToken, rec.mark())
    const out = await rec.call(gw, 'POST', '/api/v1/auth/logout', {
      body: { refreshToken: third.refreshToken },
      headers: { 'x-forwarded-for': ip },
    })
    expect(out.status).toBe(204)
    expect((await refresh(third.refreshToken)).status).toBe(401)
  })

  it('limits failed logins per email (the eleventh wrong password is a 429) and logins per IP', async () => {
    const victim = `victim-${newId()}@example.com`
    for (let i = 1; i <= 10; i++) {
      const guess = `wrong-guess-${i}-${randomBytes(4).toString('hex')}`
      secrets.add(guess)
      const res = await login(victim, guess)
      expect([res.status, res.body.error.code], `attempt ${i}`).toEqual([401, 'INVALID_CREDENTIALS'])
    }
    const eleventh = await login(victim, 'wrong-guess-11')
    expect([eleventh.status, eleventh.body.error.code]).toEqual([429, 'RATE_LIMITED'])
    expect(Number(eleventh.headers.get('retry-after'))).toBeGreaterThanOrEqual(1)
    expect(eleventh.headers.get('ratelimit-policy')).toBe('"login-email";q=10;w=60')
    expect(eleventh.headers.get('ratelimit')).toMatch(/^"login-email";r=0;t=\d+$/)
    // The limit is the email's, from any address; another email is not affected.
    expect((await login(victim, 'x', randomIp())).status).toBe(429)
    expect((await login(`other-${newId()}@example.com`, 'x')).status).toBe(401)

    // Successful logins give their point back: only failures count.
    const dave = await signUp('dave')
    for (let i = 0; i < 9; i++) expect((await login(dave.email, 'not-it')).status).toBe(401)
    expect((await login(dave.email, dave.password)).status).toBe(200)
    expect((await login(dave.email, 'not-it')).status).toBe(401)
    expect((await login(dave.email, 'not-it')).status).toBe(429)

    // Per IP: RATE_LIMIT_LOGIN_IP_POINTS (100) attempts a minute from one address.
    const from = randomIp()
    const statuses: number[] = []
    for (let i = 0; i < 100; i += 20) {
      const batch = await Promise.all(
        Array.from({ length: 20 }, () =>
          call(gw, 'POST', '/api/v1/auth/refresh', {
            body: { refreshToken: 'rt_nothing' },
            headers: { 'x-forwarded-for': from },
          }),
        ),
      )
      statuses.push(...batch.map((r) => r.status))
    }
    expect(statuses.every((s) => s === 401)).toBe(true)
    const over = await call<ErrorReply>(gw, 'POST', '/api/v1/auth/login', {
      body: { email: `fresh-${newId()}@example.com`, password: 'x' },
      headers: { 'x-forwarded-for': from },
    })
    expect([over.status, over.body.error.code]).toEqual([429, 'RATE_LIMITED'])
    expect(over.headers.get('ratelimit-policy')).toBe('"login-ip";q=100;w=60')
  })

  it('limits the public catalog per IP', async () => {
    const from = randomIp()
    for (let i = 0; i < 5; i++) {
      const res = await call(gw, 'GET', '/api/v1/public/prompts', { headers: { 'x-forwarded-for': from } })
      // Served by the prompts service (whatever it answers), not refused by the gateway.
      expect(res.status, `request ${i + 1}`).not.toBe(429)
      expect(res.status).toBeLessThan(500)
      expect(res.headers.get('ratelimit-policy')).toBe('"public-ip";q=5;w=60')
    }
    const over = await call<ErrorReply>(gw, 'GET', '/api/v1/public/prompts', {
      headers: { 'x-forwarded-for': from },
    })
    expect([over.status, over.body.error.code]).toEqual([429, 'RATE_LIMITED'])
    expect(over.headers.get('retry-after')).toBeTruthy()
    const elsewhere = await call(gw, 'GET', '/api/v1/public/prompts', {
      headers: { 'x-forwarded-for': randomIp() },
    })
    expect(elsewhere.status).not.toBe(429)
  })

  it('mints a key with the CLI that the gateway accepts, and revokes it everywhere', async () => {
    const env = { DATA_DIR: stack.dataDir, NATS_URL: stack.env.NATS_URL ?? '' }
    const minted = await runIdentityCli(
      ['mint-key', '--org', org, '--name', 'from-cli', '--scopes', 'prompts:read', '--rate-limit', '50/60'],
      env,
    )
    expect(minted.code, minted.stderr).toBe(0)
    const { key, apiKey } = JSON.parse(minted.stdout) as CreatedKey
    secrets.add(key)
    shownAt.set(key, rec.mark())
    const ok = await call(gw, 'GET', '/api/v1/prompts', { token: key })
    expect(ok.status).toBe(200)
    expect(ok.headers.get('ratelimit-policy')).toBe('"api-key";q=50;w=60')

    const revoked = await runIdentityCli(['revoke-key', '--org', org, '--key-id', apiKey._id], env)
    expect(revoked.code, revoked.stderr).toBe(0)
    await vi.waitFor(
      async () => expect((await call(gw, 'GET', '/api/v1/prompts', { token: key })).status).toBe(401),
      { timeout: 1_000, interval: 25 },
    )
  })

  it('writes no password, refresh token or key secret in any log line, nor in any later response', async () => {
    // Everything the tests did above went through these processes.
    const logs = Object.values(stack.processes).flatMap((p) => p.logs)
    const text = logs.join('\n')
    expect(text).toContain('"msg":"login"')
    expect(text).toContain('"msg":"api key created"')
    expect(secrets.size).toBeGreaterThan(20)
    for (const secret of secrets) {
      const lines = logs.filter((l) => l.includes(secret))
      expect(lines, `a secret (${secret.slice(0, 6)}...) is in the logs`).toEqual([])
    }
    // Every key and refresh token appears in no response after the one that created it;
    // passwords in none at all.
    for (const secret of secrets) {
      const from = shownAt.get(secret) ?? 0
      expect(rec.leaksAfter(from, secret), `${secret.slice(0, 6)}... shown again`).toEqual([])
    }
    const listed = await rec.call(gw, 'GET', `/api/v1/organizations/${org}/api-keys`, {
      token: admin.accessToken,
    })
    expect(listed.status).toBe(200)
    for (const secret of secrets) expect(JSON.stringify(listed.body)).not.toContain(secret)
  })

  it('answered every request above as the OpenAPI document describes', async () => {
    expect(audit.seen.length).toBeGreaterThan(20)
    expect(await audit.problems()).toEqual([])
  })
})
