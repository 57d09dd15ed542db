import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { ADMIN } from '../src/slice.ts'

interface Data<T> {
  data: T
}
interface Failure {
  error: { code: string; message: string; details?: Array<{ path: string; message: string }> | string[] }
}

/** The errors a newcomer meets first, through the gateway (issue 31): each says what to do. */
describe('clearer errors through the gateway', () => {
  let proc: RunningProcess
  let base: string
  let dataDir: string
  let key: string
  let promptId: string

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'pm-errors-'))
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
    const login = await call<Data<{ accessToken: string; organizationId: string }>>(
      base,
      'POST',
      '/api/v1/auth/login',
      {
        body: { email: ADMIN.email, password: ADMIN.password },
      },
    )
    const token = login.body.data.accessToken
    const minted = await call<Data<{ key: string }>>(
      base,
      'POST',
      `/api/v1/organizations/${login.body.data.organizationId}/api-keys`,
      { token, body: { name: 'errors', scopes: ['prompts:read', 'prompts:write'] } },
    )
    key = minted.body.data.key
    const created = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
      token: key,
      body: { name: 'Greeting', template: 'Hello {{name}}!' },
    })
    promptId = created.body.data._id
    await call(base, 'POST', `/api/v1/prompts/${promptId}/publish`, { token, body: {} })
  }, 90_000)

  afterAll(async () => {
    await proc?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  it('an unknown slug is named', async () => {
    const res = await call<Failure>(base, 'GET', '/api/v1/prompts/slug/no-such', { token: key })
    expect(res.status).toBe(404)
    expect(res.body.error).toMatchObject({
      code: 'NOT_FOUND',
      message: 'no prompt has the slug "no-such" in this workspace',
    })
    const invoke = await call<Failure>(base, 'POST', '/api/v1/prompts/slug/no-such/invoke', {
      token: key,
      body: {},
    })
    expect(invoke.body.error.message).toContain('"no-such"')
  })

  it('a slug where an id goes points to the slug routes', async () => {
    const res = await call<Failure>(base, 'POST', '/api/v1/prompts/greeting/invoke', {
      token: key,
      body: { variables: { name: 'Ada' } },
    })
    expect(res.status).toBe(400)
    expect(res.body.error.code).toBe('VALIDATION_ERROR')
    expect(res.body.error.message).toBe(
      '"greeting" is not a prompt id: a prompt id is 24 hexadecimal characters; to name the prompt by its slug, use POST /api/v1/prompts/slug/greeting/invoke',
    )
    const publish = await call<Failure>(base, 'POST', '/api/v1/prompts/greeting/publish', {
      token: key,
      body: {},
    })
    expect(publish.body.error.message).toContain('find its id with GET /api/v1/prompts/slug/greeting')
  })

  it('a missing variable names the undeclared ones that were sent', async () => {
    const res = await call<Failure>(base, 'POST', `/api/v1/prompts/${promptId}/invoke`, {
      token: key,
      body: { variables: { nmae: 'Ada' } },
    })
    expect(res.status).toBe(400)
    expect(res.body.error).toMatchObject({
      code: 'MISSING_REQUIRED_VARIABLES',
      message: 'missing required variables: name; sent but not declared: nmae',
      details: ['name'],
    })
  })

  it('template values at the top level get a hint to put them under variables; paths are one style', async () => {
    const res = await call<Failure>(base, 'POST', `/api/v1/prompts/${promptId}/invoke`, {
      token: key,
      body: { name: 'Ada' },
    })
    expect(res.status).toBe(400)
    expect(res.body.error.details).toEqual([
      {
        path: '/body/name',
        message:
          'unknown field "name": this body takes only the fields the route declares (template values go inside "variables": {"variables": {"name": ...}})',
      },
    ])
    const query = await call<Failure>(base, 'POST', `/api/v1/prompts/${promptId}/invoke?version=x`, {
      token: key,
      body: {},
    })
    expect(query.status).toBe(400)
    expect((query.body.error.details as Array<{ path: string }>).map((d) => d.path)).toEqual([
      '/query/version',
    ])
    const config = await call<Failure>(base, 'PATCH', `/api/v1/prompts/${promptId}`, {
      token: key,
      body: { config: 'x' },
    })
    expect(config.status).toBe(400)
    for (const d of config.body.error.details as Array<{ path: string }>)
      expect(d.path).toMatch(/^\/body\/config/)
  })

  it('a form-encoded body is told to send JSON', async () => {
    const res = await fetch(`${base}/api/v1/prompts/${promptId}/invoke`, {
      method: 'POST',
      headers: { authorization: `Bearer ${key}`, 'content-type': 'application/x-www-form-urlencoded' },
      body: 'name=Ada',
    })
    expect(res.status).toBe(415)
    const body = (await res.json()) as Failure
    expect(body.error).toMatchObject({
      code: 'UNSUPPORTED_MEDIA_TYPE',
      message: 'unsupported content type: send the body as JSON with "content-type: application/json"',
    })
  })
})
