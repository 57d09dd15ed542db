import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type InProcess, startInProcess, type Tenant } from '../src/inProcess.ts'

/**
 * Issue 14, finding 4: the gateway read a body only when its Content-Type held a lower-case
 * "json" and JSON.parse took it, while the services accept `APPLICATION/JSON` and a leading
 * BOM: the per-email login limit was bypassed and a body's organizationId was ignored. Now one
 * parser (kit's parseJsonBody) reads bodies at both ends, and what the gateway cannot read is
 * refused.
 */
describe('one body rule at the gateway and the services', () => {
  let app: InProcess
  let alice: Tenant
  let bob: Tenant

  beforeAll(async () => {
    app = await startInProcess()
    alice = await app.signUp('alice')
    bob = await app.signUp('bob')
  }, 60_000)

  afterAll(async () => {
    await app?.close()
  })

  const BOM = '\ufeff'
  const send = async (path: string, type: string, text: string, token?: string) => {
    const res = await fetch(`${app.base}${path}`, {
      method: 'POST',
      headers: { 'content-type': type, ...(token ? { authorization: `Bearer ${token}` } : {}) },
      body: Buffer.from(text, 'utf8'),
    })
    const body = (await res.json()) as { data?: Record<string, unknown>; error?: { code: string } }
    return { status: res.status, body }
  }

  it('counts every wrong password however the body is labelled: 429 from the 11th', async () => {
    const statuses: number[] = []
    for (let i = 0; i < 12; i++) {
      const type = ['APPLICATION/JSON', 'Application/Json; charset=UTF-8', 'application/json'][
        i % 3
      ] as string
      const res = await send(
        '/api/v1/auth/login',
        type,
        `${BOM}${JSON.stringify({ email: alice.email, password: `wrong ${i}` })}`,
      )
      statuses.push(res.status)
    }
    expect(statuses.slice(0, 10)).toEqual(Array(10).fill(401))
    expect(statuses.slice(10)).toEqual([429, 429])
    const right = await send(
      '/api/v1/auth/login',
      'APPLICATION/JSON',
      `${BOM}${JSON.stringify({ email: alice.email, password: 'correct horse battery staple' })}`,
    )
    expect(right.status).toBe(429)
  })

  it('honours organizationId in an upper-case, BOM-prefixed body: another workspace is a 404', async () => {
    const res = await send(
      '/api/v1/prompts',
      'APPLICATION/JSON',
      `${BOM}${JSON.stringify({ organizationId: bob.organizationId, name: 'lands where?', template: 'x' })}`,
      alice.accessToken,
    )
    expect(res.status).toBe(404)
    expect(res.body.error?.code).toBe('NOT_FOUND')
    const own = await send(
      '/api/v1/prompts',
      'APPLICATION/JSON',
      `${BOM}${JSON.stringify({ organizationId: alice.organizationId, name: 'mine', template: 'x' })}`,
      alice.accessToken,
    )
    expect(own.status).toBe(201)
    expect(own.body.data?.organizationId).toBe(alice.organizationId)
  })

  it('refuses a body it cannot read instead of passing it on', async () => {
    const malformed = await send('/api/v1/prompts', 'application/json', '{"name": "x",', alice.accessToken)
    expect([malformed.status, malformed.body.error?.code]).toEqual([400, 'VALIDATION_ERROR'])
    const proto = await send(
      '/api/v1/prompts',
      'application/json',
      '{"name":"x","template":"y","__proto__":{"organizationId":"0123456789abcdef01234567"}}',
      alice.accessToken,
    )
    expect([proto.status, proto.body.error?.code]).toEqual([400, 'VALIDATION_ERROR'])
    const text = await send(
      '/api/v1/prompts',
      'text/plain',
      JSON.stringify({ organizationId: bob.organizationId, name: 'x', template: 'y' }),
      alice.accessToken,
    )
    expect([text.status, text.body.error?.code]).toEqual([415, 'UNSUPPORTED_MEDIA_TYPE'])
  })
})
