import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { type InProcess, startInProcess, type Tenant } from '../src/inProcess.ts'

/**
 * Issue 14, findings 1 and 3: a workspace id holding a NUL, a TAB or a path made the gateway's
 * identity pool lose a connection per request (16 requests took sign-in checks down for every
 * workspace) or steered the membership check to another user. Now: 400 VALIDATION_ERROR before
 * any internal call, and nobody else notices.
 */
describe('hostile workspace ids never reach identity', () => {
  let app: InProcess
  let attacker: Tenant
  let victim: Tenant
  let closed = false

  beforeAll(async () => {
    app = await startInProcess()
    attacker = await app.signUp('attacker')
    victim = await app.signUp('victim')
  }, 60_000)

  afterAll(async () => {
    if (!closed) await app?.close()
  })

  /** A request bounded in time, so a hung gateway fails the test instead of stalling it. */
  const bounded = (method: string, path: string, token: string, body?: unknown) =>
    Promise.race([
      call<{ error?: { code: string; requestId: string } }>(app.base, method, path, { token, body }),
      new Promise<never>((_, reject) =>
        setTimeout(() => reject(new Error(`${method} ${path} did not answer within 10 s`)), 10_000),
      ),
    ])

  it('answers 100 hostile requests with 400, then serves an unrelated user at once, then closes promptly', async () => {
    const hostile: [string, string, unknown?][] = [
      ['GET', '/api/v1/prompts?organizationId=%00'],
      ['GET', '/api/v1/prompts?organizationId=%09'],
      ['GET', `/api/v1/prompts?organizationId=${victim.organizationId}%00`],
      ['POST', '/api/v1/prompts', { organizationId: 'a\u0000', name: 'x', template: 'y' }],
      ['POST', '/api/v1/prompts', { organizationId: 'a\tb', name: 'x', template: 'y' }],
      ['GET', '/api/v1/organizations/a%09b'],
      ['GET', '/api/v1/organizations/a%00b/members'],
      // Finding 3: the membership check steered to the victim (the OWNER of their workspace).
      ['GET', `/api/v1/prompts?organizationId=${victim.organizationId}%2F${victim.userId}%3F`],
      [
        'POST',
        '/api/v1/prompts',
        { organizationId: `${victim.organizationId}/${victim.userId}?`, name: 'x', template: 'y' },
      ],
    ]
    for (let i = 0; i < 100; i++) {
      const [method, path, body] = hostile[i % hostile.length] as [string, string, unknown?]
      const res = await bounded(method, path, attacker.accessToken, body)
      expect(res.status, `${method} ${path}`).toBe(400)
      expect(res.body.error?.code, `${method} ${path}`).toBe('VALIDATION_ERROR')
    }

    // An unrelated user, a membership check that is not cached yet: answered, not hung.
    const listed = await bounded(
      'GET',
      `/api/v1/prompts?organizationId=${victim.organizationId}`,
      victim.accessToken,
    )
    expect(listed.status).toBe(200)
    // An uncached API key lookup goes through the same pool.
    const key = await bounded(
      'POST',
      `/api/v1/organizations/${victim.organizationId}/api-keys`,
      victim.accessToken,
      { name: 'after the attack', scopes: ['prompts:read'] },
    )
    expect(key.status).toBe(201)
    const withKey = await bounded(
      'GET',
      '/api/v1/prompts',
      (key.body as unknown as { data: { key: string } }).data.key,
    )
    expect(withKey.status).toBe(200)

    // Nothing is left in flight: closing does not wait for stuck connections (it took ~60 s).
    const started = Date.now()
    await app.close()
    closed = true
    expect(Date.now() - started).toBeLessThan(10_000)
  }, 120_000)

  it('does not let a phantom workspace in: the caller is checked, never another user', async () => {
    // A fresh app: the first test closed its own.
    const other = await startInProcess()
    try {
      const a = await other.signUp('attacker')
      const v = await other.signUp('victim')
      const steered = await call<{ error: { code: string } }>(
        other.base,
        'POST',
        `/api/v1/prompts?organizationId=${v.organizationId}%2F${v.userId}%3F`,
        { token: a.accessToken, body: { name: 'phantom', template: 'x' } },
      )
      expect(steered.status).toBe(400)
      const notMember = await call<{ error: { code: string } }>(
        other.base,
        'GET',
        `/api/v1/prompts?organizationId=${v.organizationId}`,
        { token: a.accessToken },
      )
      expect(notMember.status).toBe(404)
      expect(notMember.body.error.code).toBe('NOT_FOUND')
    } finally {
      await other.close()
    }
  }, 60_000)
})
