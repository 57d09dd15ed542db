import type { CreatedWebhook, WebhookDelivery, WebhookDeliveryList } from '@pm/contracts'
import { expect } from 'vitest'
import { call } from './client.ts'
import { ADMIN } from './slice.ts'

interface Data<T> {
  data: T
}

export interface Session {
  token: string
  organizationId: string
}

/** Signs in as the bootstrap admin (OWNER of its organization). */
export async function login(base: string): Promise<Session> {
  const res = await call<Data<{ accessToken: string; organizationId: string }>>(
    base,
    'POST',
    '/api/v1/auth/login',
    {
      body: { email: ADMIN.email, password: ADMIN.password },
    },
  )
  expect(res.status).toBe(200)
  return { token: res.body.data.accessToken, organizationId: res.body.data.organizationId }
}

export async function createApiKey(base: string, s: Session, scopes: string[]): Promise<string> {
  const res = await call<Data<{ key: string }>>(
    base,
    'POST',
    `/api/v1/organizations/${s.organizationId}/api-keys`,
    {
      token: s.token,
      body: { name: `key-${scopes.join('-')}`, scopes },
    },
  )
  expect(res.status).toBe(201)
  return res.body.data.key
}

export async function createPrompt(base: string, s: Session, name: string): Promise<string> {
  const res = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
    token: s.token,
    body: { name, template: 'Hello {{name}}' },
  })
  expect(res.status).toBe(201)
  return res.body.data._id
}

/** Publishes the prompt's draft through the gateway; returns the new version's id. */
export async function publishVersion(
  base: string,
  s: Session,
  promptId: string,
  changeLog = '',
): Promise<string> {
  const res = await call<Data<{ _id: string }>>(base, 'POST', `/api/v1/prompts/${promptId}/publish`, {
    token: s.token,
    body: { changeLog },
  })
  expect(res.status).toBe(201)
  return res.body.data._id
}

export async function createWebhook(
  base: string,
  s: Session,
  url: string,
  extra: Record<string, unknown> = {},
): Promise<CreatedWebhook> {
  const res = await call<Data<CreatedWebhook>>(
    base,
    'POST',
    `/api/v1/organizations/${s.organizationId}/webhooks`,
    {
      token: s.token,
      body: { url, ...extra },
    },
  )
  expect(res.status, JSON.stringify(res.body)).toBe(201)
  return res.body.data
}

export async function listDeliveries(
  base: string,
  s: Session,
  webhookId: string,
  query = '',
): Promise<WebhookDeliveryList> {
  const res = await call<Data<WebhookDeliveryList>>(
    base,
    'GET',
    `/api/v1/organizations/${s.organizationId}/webhooks/${webhookId}/deliveries${query}`,
    { token: s.token },
  )
  expect(res.status).toBe(200)
  return res.body.data
}

/** The delivery of the event announcing `versionId`, if there is one yet. */
export async function deliveryOf(
  base: string,
  s: Session,
  webhookId: string,
  versionId: string,
): Promise<WebhookDelivery | undefined> {
  const list = await listDeliveries(base, s, webhookId, '?limit=100')
  return list.deliveries.find(
    (d) => (d.payload as { data?: { versionId?: string } }).data?.versionId === versionId,
  )
}
