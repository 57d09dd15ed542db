import type { LoginResponse } from '@pm/contracts'
import { signContext } from '@pm/kit'
import { createLocalJWKSet, decodeProtectedHeader, type JSONWebKeySet, jwtVerify } from 'jose'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { loadIdentityConfig } from '../src/config.ts'
import { IdentityService } from '../src/services/identity.ts'
import { hashRefreshToken } from '../src/services/sessions.ts'
import { anonymousContext, startIdentity, type TestIdentity, TEST_PASSWORD_COST } from './helpers.ts'

type Session = LoginResponse & { refreshToken: string }

const PASSWORD = 'a long and secret passphrase'

describe('identity: sign-in, sessions, sign-up', () => {
  let t: TestIdentity
  let identity: IdentityService
  let userId: string
  let orgA: string
  let orgB: string

  const post = (url: string, payload: unknown, context = anonymousContext()) =>
    t.app.inject({ method: 'POST', url, payload: payload as object, headers: { 'x-pm-context': context } })

  const login = async (password = PASSWORD) =>
    post('/api/v1/auth/login', { email: 'Ann@Example.com ', password })

  beforeEach(async () => {
    t = await startIdentity()
    identity = new IdentityService(t.store, t.bus, undefined, { passwordCost: TEST_PASSWORD_COST })
    const user = await identity.createUser({ email: 'ann@example.com', password: PASSWORD, name: 'Ann' })
    userId = user._id
    await identity.createOrganization('Alpha', userId)
    await identity.createOrganization('Beta', userId)
    // Login picks the first organization listed (created in the same instant here: ask).
    const [first, second] = await t.store.listOrganizationsForUser(userId)
    orgA = first?._id ?? ''
    orgB = second?._id ?? ''
  })
  afterEach(async () => {
    await t.close()
  })

  it('stores a scrypt hash, never the password; 2^15 unless PASSWORD_HASH_COST says otherwise', async () => {
    const user = await t.store.findUserByEmail('ann@example.com')
    expect(user?.passwordHash).toMatch(/^scrypt\$1024\$8\$1\$/)
    expect(user?.passwordHash).not.toContain(PASSWORD)
    expect(loadIdentityConfig({ INTERNAL_AUTH_SECRET: 'x'.repeat(32) }).PASSWORD_HASH_COST).toBe(15)
    expect(() =>
      loadIdentityConfig({ INTERNAL_AUTH_SECRET: 'x'.repeat(32), PASSWORD_HASH_COST: '9' }),
    ).toThrow()
    const standard = new IdentityService(t.store, t.bus)
    const bo = await standard.createUser({ email: 'bo@example.com', password: PASSWORD, name: 'Bo' })
    expect(bo.passwordHash).toMatch(/^scrypt\$32768\$8\$1\$/)
    // Each hash is verified with its own parameters: a cost changed later still signs both in.
    expect(await identity.authenticate('bo@example.com', PASSWORD)).toMatchObject({ _id: bo._id })
    expect(await standard.authenticate('ann@example.com', PASSWORD)).toMatchObject({ _id: userId })
    expect(await standard.authenticate('ann@example.com', 'wrong password')).toBeNull()
  })

  it('logs in with an access token signed by a JWKS key and a refresh token', async () => {
    const res = await login()
    expect(res.statusCode).toBe(200)
    const body = res.json<Session>()
    expect(body).toMatchObject({ tokenType: 'Bearer', expiresIn: 900, organizationId: orgA })
    expect(body.user).toEqual({ _id: userId, email: 'ann@example.com', name: 'Ann' })
    expect(body.refreshToken).toMatch(/^rt_[A-Za-z0-9_-]{43}$/)

    const jwks = await t.app.inject({ method: 'GET', url: '/.well-known/jwks.json' })
    expect(jwks.statusCode).toBe(200)
    const keys = jwks.json<JSONWebKeySet>()
    expect(keys.keys[0]).not.toHaveProperty('d') // public parts only
    const header = decodeProtectedHeader(body.accessToken)
    expect(header).toMatchObject({ alg: 'ES256', kid: keys.keys[0]?.kid })
    const { payload } = await jwtVerify(body.accessToken, createLocalJWKSet(keys), {
      issuer: 'prompt-service',
      audience: 'prompt-service-api',
      algorithms: ['ES256'],
    })
    expect(payload).toMatchObject({ sub: userId, org: orgA })
    expect(payload.jti).toBeTypeOf('string')
    expect((payload.exp ?? 0) - (payload.iat ?? 0)).toBe(900)

    // Only the hash of the refresh token is kept.
    expect(await t.store.findRefreshToken(hashRefreshToken(body.refreshToken))).toMatchObject({
      userId,
      organizationId: orgA,
      usedAt: null,
    })
    const db = (t.store as unknown as { db: import('node:sqlite').DatabaseSync }).db
    expect(JSON.stringify(db.prepare('SELECT * FROM refresh_tokens').all())).not.toContain(body.refreshToken)
  })

  it('refuses a wrong password and an unknown email alike', async () => {
    const wrong = await login('not the password')
    expect(wrong.statusCode).toBe(401)
    expect(wrong.json().error.code).toBe('INVALID_CREDENTIALS')
    const unknown = await post('/api/v1/auth/login', { email: 'nobody@example.com', password: PASSWORD })
    expect(unknown.statusCode).toBe(401)
    expect(unknown.json().error.message).toBe(wrong.json().error.message)
  })

  it('rotates refresh tokens; a reused token revokes the whole family', async () => {
    const first = (await login()).json<Session>()
    const r1 = await post('/api/v1/auth/refresh', { refreshToken: first.refreshToken })
    expect(r1.statusCode).toBe(200)
    const second = r1.json<Session>()
    expect(second.refreshToken).not.toBe(first.refreshToken)
    expect(second.accessToken).not.toBe(first.accessToken)
    expect(second.organizationId).toBe(orgA)

    const r2 = await post('/api/v1/auth/refresh', { refreshToken: second.refreshToken })
    expect(r2.statusCode).toBe(200)
    const third = r2.json<Session>()

    // The first token again: it leaked. Its family (third included) is revoked.
    const replay = await post('/api/v1/auth/refresh', { refreshToken: first.refreshToken })
    expect(replay.statusCode).toBe(401)
    expect(replay.json().error.code).toBe('INVALID_CREDENTIALS')
    const afterReplay = await post('/api/v1/auth/refresh', { refreshToken: third.refreshToken })
    expect(afterReplay.statusCode).toBe(401)
    expect(t.logs.some((l) => l.includes('refresh token reused'))).toBe(true)

    // Another login is another family, untouched.
    const other = (await login()).json<Session>()
    expect((await post('/api/v1/auth/refresh', { refreshToken: other.refreshToken })).statusCode).toBe(200)
  })

  it('a reused token asking for another organization is still reuse: 401, its family revoked', async () => {
    const first = (await login()).json<Session>()
    const second = (await post('/api/v1/auth/refresh', { refreshToken: first.refreshToken })).json<Session>()
    // An organization the user is not in: answered 404 before, and the family lived on.
    const replay = await post('/api/v1/auth/refresh', {
      refreshToken: first.refreshToken,
      organizationId: 'f'.repeat(24),
    })
    expect(replay.statusCode).toBe(401)
    expect(replay.json().error.code).toBe('INVALID_CREDENTIALS')
    expect((await post('/api/v1/auth/refresh', { refreshToken: second.refreshToken })).statusCode).toBe(401)
  })

  it('refuses malformed, unknown and expired refresh tokens', async () => {
    for (const refreshToken of ['nope', `rt_${'A'.repeat(43)}`]) {
      const res = await post('/api/v1/auth/refresh', { refreshToken })
      expect(res.statusCode).toBe(401)
    }
    const expiring = await startIdentity({ REFRESH_TOKEN_TTL_SECONDS: '300' })
    try {
      const s = new IdentityService(expiring.store, expiring.bus, undefined, {
        passwordCost: TEST_PASSWORD_COST,
      })
      const u = await s.createUser({ email: 'exp@example.com', password: PASSWORD, name: 'E' })
      const session = (
        await expiring.app.inject({
          method: 'POST',
          url: '/api/v1/auth/login',
          payload: { email: 'exp@example.com', password: PASSWORD },
          headers: { 'x-pm-context': anonymousContext() },
        })
      ).json<Session>()
      expect(session.user._id).toBe(u._id)
      // Age the stored token past its expiry.
      const db = (expiring.store as unknown as { db: import('node:sqlite').DatabaseSync }).db
      db.prepare('UPDATE refresh_tokens SET expires_at = ?').run('2000-01-01T00:00:00.000Z')
      const res = await expiring.app.inject({
        method: 'POST',
        url: '/api/v1/auth/refresh',
        payload: { refreshToken: session.refreshToken },
        headers: { 'x-pm-context': anonymousContext() },
      })
      expect(res.statusCode).toBe(401)
    } finally {
      await expiring.close()
    }
  })

  it('switches the current organization on refresh, only to an ACTIVE membership', async () => {
    const first = (await login()).json<Session>()
    const switched = await post('/api/v1/auth/refresh', {
      refreshToken: first.refreshToken,
      organizationId: orgB,
    })
    expect(switched.statusCode).toBe(200)
    const second = switched.json<Session>()
    expect(second.organizationId).toBe(orgB)

    const stranger = await identity.createUser({ email: 'eve@example.com', password: PASSWORD, name: 'Eve' })
    const foreign = (await identity.createOrganization('Eve Co', stranger._id))._id
    const refused = await post('/api/v1/auth/refresh', {
      refreshToken: second.refreshToken,
      organizationId: foreign,
    })
    expect(refused.statusCode).toBe(404)
    // The refused switch did not use up the token.
    const still = await post('/api/v1/auth/refresh', { refreshToken: second.refreshToken })
    expect(still.statusCode).toBe(200)
    expect(still.json<Session>().organizationId).toBe(orgB)
  })

  it('logs out: the session cannot be refreshed any more', async () => {
    const session = (await login()).json<Session>()
    const out = await post('/api/v1/auth/logout', { refreshToken: session.refreshToken })
    expect(out.statusCode).toBe(204)
    expect(out.body).toBe('')
    const res = await post('/api/v1/auth/refresh', { refreshToken: session.refreshToken })
    expect(res.statusCode).toBe(401)
    // Unknown or repeated logouts are no errors.
    expect((await post('/api/v1/auth/logout', { refreshToken: session.refreshToken })).statusCode).toBe(204)
    expect((await post('/api/v1/auth/logout', { refreshToken: 'whatever' })).statusCode).toBe(204)
  })

  describe('browser sessions (cookie mode)', () => {
    const cookieOf = (res: { headers: Record<string, unknown> }) => {
      const raw = res.headers['set-cookie']
      const line = Array.isArray(raw) ? String(raw[0]) : String(raw ?? '')
      return { line, value: /^pm_refresh=([^;]*)/.exec(line)?.[1] ?? '' }
    }
    const withCookie = (url: string, token: string, headers: Record<string, string>, payload: object = {}) =>
      t.app.inject({
        method: 'POST',
        url,
        payload,
        headers: { 'x-pm-context': anonymousContext(), cookie: `pm_refresh=${token}`, ...headers },
      })

    it('sets the refresh token only as an HttpOnly, Secure, SameSite=Strict cookie on /api/v1/auth', async () => {
      const res = await post('/api/v1/auth/login', {
        email: 'ann@example.com',
        password: PASSWORD,
        cookie: true,
      })
      expect(res.statusCode).toBe(200)
      const body = res.json<LoginResponse>()
      expect(body.refreshToken).toBeUndefined()
      expect(body.accessToken).toBeTruthy()
      expect(res.headers['cache-control']).toBe('no-store')
      const { line, value } = cookieOf(res)
      expect(value).toMatch(/^rt_[A-Za-z0-9_-]{43}$/)
      expect(line).toMatch(/; HttpOnly/)
      expect(line).toMatch(/; Secure/)
      expect(line).toMatch(/; SameSite=Strict/)
      expect(line).toMatch(/; Path=\/api\/v1\/auth(;|$)/)
      expect(line).toMatch(/; Max-Age=2592000/)
      // The hint beside it holds no secret and is readable by the page.
      const hint = [res.headers['set-cookie']].flat().find((c) => String(c).startsWith('pm_session='))
      expect(hint).toBe('pm_session=1; Max-Age=2592000; Path=/; Secure; SameSite=Strict')
    })

    it('refreshes from the cookie only with the CSRF header, rotating the cookie', async () => {
      const login = await post('/api/v1/auth/login', {
        email: 'ann@example.com',
        password: PASSWORD,
        cookie: true,
      })
      const first = cookieOf(login).value
      const refused = await withCookie('/api/v1/auth/refresh', first, {})
      expect(refused.statusCode).toBe(403)
      expect(refused.json()).toMatchObject({ error: { code: 'FORBIDDEN' } })
      const blank = await withCookie('/api/v1/auth/refresh', first, { 'x-csrf-protection': ' ' })
      expect(blank.statusCode).toBe(403)

      const ok = await withCookie(
        '/api/v1/auth/refresh',
        first,
        { 'x-csrf-protection': '1' },
        { organizationId: orgB },
      )
      expect(ok.statusCode).toBe(200)
      expect(ok.json<LoginResponse>()).toMatchObject({ organizationId: orgB })
      expect(ok.json<LoginResponse>().refreshToken).toBeUndefined()
      const second = cookieOf(ok).value
      expect(second).toMatch(/^rt_/)
      expect(second).not.toBe(first)

      // The spent cookie is a reuse: refused, the family revoked, the cookie cleared.
      const replay = await withCookie('/api/v1/auth/refresh', first, { 'x-csrf-protection': '1' })
      expect(replay.statusCode).toBe(401)
      expect(cookieOf(replay).line).toMatch(/^pm_refresh=;.*Expires=Thu, 01 Jan 1970/)
      const after = await withCookie('/api/v1/auth/refresh', second, { 'x-csrf-protection': '1' })
      expect(after.statusCode).toBe(401)
    })

    it('answers 400 when neither the body nor a cookie carries a refresh token', async () => {
      const res = await post('/api/v1/auth/refresh', {})
      expect(res.statusCode).toBe(400)
      expect(res.json()).toMatchObject({ error: { code: 'VALIDATION_ERROR' } })
    })

    it('logs out from the cookie with the CSRF header, clearing it', async () => {
      const login = await post('/api/v1/auth/login', {
        email: 'ann@example.com',
        password: PASSWORD,
        cookie: true,
      })
      const token = cookieOf(login).value
      expect((await withCookie('/api/v1/auth/logout', token, {})).statusCode).toBe(403)
      const out = await withCookie('/api/v1/auth/logout', token, { 'x-csrf-protection': '1' })
      expect(out.statusCode).toBe(204)
      expect(cookieOf(out).line).toMatch(/^pm_refresh=;.*Path=\/api\/v1\/auth/)
      expect([out.headers['set-cookie']].flat().some((c) => String(c).startsWith('pm_session=;'))).toBe(true)
      const res = await withCookie('/api/v1/auth/refresh', token, { 'x-csrf-protection': '1' })
      expect(res.statusCode).toBe(401)
      // A body token still wins over the cookie (API clients).
      expect((await post('/api/v1/auth/logout', { refreshToken: 'whatever' })).statusCode).toBe(204)
    })

    it('signs up in cookie mode', async () => {
      const open = await startIdentity({ AUTH_ALLOW_SIGNUP: 'true' })
      try {
        const res = await open.app.inject({
          method: 'POST',
          url: '/api/v1/auth/register',
          payload: { email: 'new@example.com', password: PASSWORD, name: 'New', cookie: true },
          headers: { 'x-pm-context': anonymousContext() },
        })
        expect(res.statusCode).toBe(201)
        expect(res.json<LoginResponse>().refreshToken).toBeUndefined()
        expect(cookieOf(res).value).toMatch(/^rt_/)
        // A name of spaces only is no name (it made a user "" with "'s workspace").
        const blank = await open.app.inject({
          method: 'POST',
          url: '/api/v1/auth/register',
          payload: { email: 'blank@example.com', password: PASSWORD, name: '   ' },
          headers: { 'x-pm-context': anonymousContext() },
        })
        expect(blank.statusCode).toBe(400)
      } finally {
        await open.close()
      }
    })

    it('writes no cookie value into its logs', async () => {
      const login = await post('/api/v1/auth/login', {
        email: 'ann@example.com',
        password: PASSWORD,
        cookie: true,
      })
      const token = cookieOf(login).value
      const ok = await withCookie('/api/v1/auth/refresh', token, { 'x-csrf-protection': '1' })
      await withCookie('/api/v1/auth/logout', cookieOf(ok).value, { 'x-csrf-protection': '1' })
      const all = t.logs.join('\n')
      expect(all).not.toContain(token)
      expect(all).not.toContain(cookieOf(ok).value)
    })
  })

  it('writes no password or refresh token into its logs', async () => {
    const session = (await login()).json<Session>()
    await login('a wrong password guess')
    const refreshed = (
      await post('/api/v1/auth/refresh', { refreshToken: session.refreshToken })
    ).json<Session>()
    await post('/api/v1/auth/refresh', { refreshToken: session.refreshToken })
    await post('/api/v1/auth/logout', { refreshToken: refreshed.refreshToken })
    const all = t.logs.join('\n')
    expect(all).toContain('"msg":"login"')
    for (const secret of [PASSWORD, 'a wrong password guess', session.refreshToken, refreshed.refreshToken]) {
      expect(all).not.toContain(secret)
    }
  })

  it('refuses a request without a valid signed caller context', async () => {
    const payload = { email: 'ann@example.com', password: PASSWORD }
    const none = await t.app.inject({ method: 'POST', url: '/api/v1/auth/login', payload })
    expect(none.statusCode).toBe(401)
    const forged = signContext(
      { kind: 'anonymous', scopes: [], requestId: 'x' },
      'another-secret-0123456789abcdefgh',
    )
    const wrong = await post('/api/v1/auth/login', payload, forged)
    expect(wrong.statusCode).toBe(401)
    const expired = signContext(
      { kind: 'anonymous', scopes: [], requestId: 'x' },
      'test-internal-secret-0123456789abcdef',
      Date.now() - 120_000,
    )
    expect((await post('/api/v1/auth/login', payload, expired)).statusCode).toBe(401)
  })
})

describe('identity: sign-up', () => {
  it('is a 404 unless AUTH_ALLOW_SIGNUP=true', async () => {
    const t = await startIdentity()
    try {
      const res = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/register',
        payload: { email: 'new@example.com', password: PASSWORD, name: 'New' },
        headers: { 'x-pm-context': anonymousContext() },
      })
      expect(res.statusCode).toBe(404)
      expect(res.json().error.code).toBe('NOT_FOUND')
    } finally {
      await t.close()
    }
  })

  it('creates a user, a personal organization and a session when enabled', async () => {
    const t = await startIdentity({ AUTH_ALLOW_SIGNUP: 'true' })
    try {
      const register = (email: string) =>
        t.app.inject({
          method: 'POST',
          url: '/api/v1/auth/register',
          payload: { email, password: PASSWORD, name: 'New' },
          headers: { 'x-pm-context': anonymousContext() },
        })
      const res = await register('new@example.com')
      expect(res.statusCode).toBe(201)
      const body = res.json<Session>()
      expect(body.refreshToken).toMatch(/^rt_/)
      expect(body.organizationId).toMatch(/^[0-9a-f]{24}$/)
      const membership = await t.store.getMembership(body.organizationId ?? '', body.user._id)
      expect(membership).toMatchObject({ role: 'OWNER', status: 'ACTIVE' })
      expect((await register('NEW@example.com')).statusCode).toBe(409)
      const short = await t.app.inject({
        method: 'POST',
        url: '/api/v1/auth/register',
        payload: { email: 'x@example.com', password: 'short', name: 'X' },
        headers: { 'x-pm-context': anonymousContext() },
      })
      expect(short.statusCode).toBe(400)
    } finally {
      await t.close()
    }
  })
})

describe('identity: bootstrap', () => {
  it('creates the admin and organization once', async () => {
    const env = {
      BOOTSTRAP_ADMIN_EMAIL: 'root@example.com',
      BOOTSTRAP_ADMIN_PASSWORD: PASSWORD,
      BOOTSTRAP_ORG_NAME: 'Root Org',
    }
    const t = await startIdentity(env)
    try {
      const service = new IdentityService(t.store, t.bus, undefined, { passwordCost: TEST_PASSWORD_COST })
      const user = await t.store.findUserByEmail('root@example.com')
      expect(user).not.toBeNull()
      const orgs = await t.store.listOrganizationsForUser(user?._id ?? '')
      expect(orgs.map((o) => o.name)).toEqual(['Root Org'])
      const again = await service.bootstrap({
        email: 'root@example.com',
        password: 'other',
        orgName: 'Root Org',
      })
      expect(again.created).toBe(false)
      expect(await t.store.listOrganizationsForUser(user?._id ?? '')).toHaveLength(1)
    } finally {
      await t.close()
    }
  })
})
