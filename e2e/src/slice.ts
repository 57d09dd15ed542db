import { expect } from 'vitest'
import { call } from './client.ts'

export const ADMIN = { email: 'admin@example.com', password: 'correct horse battery staple', org: 'Acme' }

interface Data<T> {
  data: T
}

export interface SliceResult {
  accessToken: string
  organizationId: string
  apiKey: string
  promptId: string
  versionId: string
}

/**
 * The walking skeleton's path through the gateway: login → API key → create prompt →
 * publish → invoke. Asserts every step's status and shape.
 */
export async function runSlice(base: string): Promise<SliceResult> {
  const login = await call<Data<{ accessToken: string; organizationId: string; tokenType: string }>>(
    base,
    'POST',
    '/api/v1/auth/login',
    { body: { email: ADMIN.email, password: ADMIN.password } },
  )
  expect(login.status).toBe(200)
  expect(login.body.data.tokenType).toBe('Bearer')
  const { accessToken, organizationId } = login.body.data
  expect(organizationId).toMatch(/^[0-9a-f]{24}$/)
  expect(login.headers.get('x-request-id')).toBeTruthy()

  const created = await call<Data<{ key: string; apiKey: { scopes: string[] } }>>(
    base,
    'POST',
    `/api/v1/organizations/${organizationId}/api-keys`,
    { token: accessToken, body: { name: 'slice', scopes: ['prompts:read', 'prompts:write'] } },
  )
  expect(created.status).toBe(201)
  const apiKey = created.body.data.key
  expect(apiKey).toMatch(/^pk_/)
  expect(created.body.data.apiKey).not.toHaveProperty('hash')

  const prompt = await call<
    Data<{ _id: string; slug: string; variables: { name: string; required: boolean }[] }>
  >(base, 'POST', '/api/v1/prompts', {
    token: apiKey,
    body: { name: 'Greeting Prompt', template: 'Hello {{ name }}, welcome to {{place}}!' },
  })
  expect(prompt.status).toBe(201)
  expect(prompt.body.data.slug).toBe('greeting-prompt')
  expect(prompt.body.data.variables.map((v) => v.name)).toEqual(['name', 'place'])
  const promptId = prompt.body.data._id

  const beforePublish = await call<{ error: { code: string } }>(
    base,
    'POST',
    `/api/v1/prompts/${promptId}/invoke`,
    {
      token: apiKey,
      body: { variables: { name: 'Ada', place: 'Paris' } },
    },
  )
  expect(beforePublish.status).toBe(400)
  expect(beforePublish.body.error.code).toBe('NO_PUBLISHED_VERSION')

  const publishWithKey = await call<{ error: { code: string } }>(
    base,
    'POST',
    `/api/v1/prompts/${promptId}/publish`,
    {
      token: apiKey,
      body: {},
    },
  )
  expect(publishWithKey.status).toBe(403)
  expect(publishWithKey.body.error.code).toBe('USER_TOKEN_REQUIRED')

  const published = await call<Data<{ _id: string; version: number; status: string }>>(
    base,
    'POST',
    `/api/v1/prompts/${promptId}/publish`,
    { token: accessToken, body: { changeLog: 'first' } },
  )
  expect(published.status).toBe(201)
  expect(published.body.data.version).toBe(1)
  expect(published.body.data.status).toBe('PUBLISHED')

  const invoked = await call<Data<{ renderedContent: string; version: number }>>(
    base,
    'POST',
    `/api/v1/prompts/${promptId}/invoke`,
    { token: apiKey, body: { variables: { name: 'Ada', place: 'Paris' } } },
  )
  expect(invoked.status).toBe(200)
  expect(invoked.body.data.renderedContent).toBe('Hello Ada, welcome to Paris!')
  expect(invoked.headers.get('x-service-version')).toBe('1')

  return { accessToken, organizationId, apiKey, promptId, versionId: published.body.data._id }
}
