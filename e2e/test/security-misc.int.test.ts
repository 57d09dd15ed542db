import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { type InProcess, startInProcess, type Tenant } from '../src/inProcess.ts'

describe('HEAD answers what GET answers, without a body (issue 14, finding 7)', () => {
  let app: InProcess
  let alice: Tenant
  let promptId: string

  beforeAll(async () => {
    app = await startInProcess()
    alice = await app.signUp('alice')
    const created = await call<{ data: { _id: string } }>(app.base, 'POST', '/api/v1/prompts', {
      token: alice.accessToken,
      body: { organizationId: alice.organizationId, name: 'p', template: 'x' },
    })
    promptId = created.body.data._id
  }, 60_000)

  afterAll(async () => {
    await app?.close()
  })

  const head = (path: string, token?: string) =>
    fetch(`${app.base}${path}`, {
      method: 'HEAD',
      headers: token ? { authorization: `Bearer ${token}` } : {},
    })

  it.each([
    ['/api/v1/prompts?organizationId=ORG', 200],
    ['/api/v1/prompts/PROMPT?organizationId=ORG', 200],
    ['/api/v1/organizations', 200],
    ['/api/v1/public/prompts', 200],
    ['/api/v1/openapi.json', 200],
    ['/health/live', 200],
    ['/api/v1/prompts/0123456789abcdef01234567?organizationId=ORG', 404],
  ])('HEAD %s → %i like GET', async (template, status) => {
    const path = template.replace('ORG', alice.organizationId).replace('PROMPT', promptId)
    const got = await fetch(`${app.base}${path}`, {
      headers: { authorization: `Bearer ${alice.accessToken}` },
    })
    const res = await head(path, alice.accessToken)
    expect(got.status).toBe(status)
    expect(res.status).toBe(status)
    expect(res.headers.get('content-type')).toBe(got.headers.get('content-type'))
    expect(await res.text()).toBe('')
  })

  it('checks credentials on HEAD as on GET', async () => {
    const res = await head('/api/v1/prompts')
    expect(res.status).toBe(401)
  })
})
