import { Writable } from 'node:stream'
import { API_ROUTES, CONTEXT_HEADER, type CallerContext, listRoutes } from '@pm/contracts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { signContext } from './context.ts'
import { bodyNamesWorkspace, route } from './route.ts'
import { createService, type Service } from './service.ts'

const secret = 's'.repeat(32)
const ORG = 'aaaaaaaaaaaaaaaaaaaaaaaa'
const OTHER = 'bbbbbbbbbbbbbbbbbbbbbbbb'
const PROMPT = 'cccccccccccccccccccccccc'
const key: CallerContext = {
  kind: 'apiKey',
  apiKeyId: 'k1',
  organizationId: ORG,
  scopes: ['prompts:read'],
  requestId: 'r',
}

describe('route(): a body organizationId names the caller workspace or nothing', () => {
  let app: Service
  beforeAll(async () => {
    app = createService({
      name: 'route-test',
      internalSecret: secret,
      logStream: new Writable({ write: (_c, _e, done) => done() }),
    })
    route(app, API_ROUTES.invokePrompt, async (request) => ({
      renderedContent: `rendered in ${request.caller.organizationId}`,
      variables: {},
      promptId: PROMPT,
      versionId: PROMPT,
      version: 1,
    }))
    await app.ready()
  })
  afterAll(() => app.close())

  const invoke = (body: unknown) =>
    app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${PROMPT}/invoke`,
      headers: { [CONTEXT_HEADER]: signContext(key, secret), 'content-type': 'application/json' },
      payload: JSON.stringify(body),
    })

  it('answers when the body names no workspace, or the caller’s own', async () => {
    for (const body of [{}, { variables: { a: 1 } }, { organizationId: ORG }]) {
      const res = await invoke(body)
      expect(res.statusCode, JSON.stringify(body)).toBe(200)
      expect(res.json().renderedContent).toBe(`rendered in ${ORG}`)
    }
  })

  it('answers 404 when the body names another workspace, 400 when it names no id', async () => {
    const other = await invoke({ organizationId: OTHER })
    expect([other.statusCode, other.json().error.code]).toEqual([404, 'NOT_FOUND'])
    const bad = await invoke({ organizationId: 'a/b' })
    expect([bad.statusCode, bad.json().error.code]).toEqual([400, 'VALIDATION_ERROR'])
  })

  it('answers a path the router cannot decode, or too long a parameter, in the envelope', async () => {
    for (const id of ['%ff', '%', '%ED%A0%80', 'c'.repeat(200)]) {
      const res = await app.inject({
        method: 'POST',
        url: `/api/v1/prompts/${id}/invoke`,
        headers: { [CONTEXT_HEADER]: signContext(key, secret), 'content-type': 'application/json' },
        payload: '{}',
      })
      expect([res.statusCode, res.json().error?.code], id).toEqual([400, 'VALIDATION_ERROR'])
      expect(res.json().error.requestId).toBe(res.headers['x-request-id'])
    }
  })

  it('applies to every context route whose body has organizationId, never to a fork target', () => {
    const checked = listRoutes()
      .filter((r) => bodyNamesWorkspace(r))
      .map((r) => r.operationId)
      .sort()
    expect(checked).toContain('invokePrompt')
    expect(checked).toContain('invokePromptBySlug')
    expect(checked).toContain('createPrompt')
    for (const r of listRoutes()) {
      if (r.gateway || r.target !== undefined) expect(checked).not.toContain(r.operationId)
    }
  })
})
