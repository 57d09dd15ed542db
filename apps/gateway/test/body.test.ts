import { describe, expect, it } from 'vitest'
import { needsBody, UNREAD_BODY_MAX } from '../src/body.ts'
import { ROUTES, type RoutePolicy } from '../src/policy.ts'

const policy = (method: string, url: string): RoutePolicy => {
  const found = ROUTES.find((r) => r.method === method && r.url === url)
  if (!found) throw new Error(`no route ${method} ${url}`)
  return found
}

describe('needsBody: what the gateway reads before deciding', () => {
  const invoke = policy('POST', '/api/v1/prompts/:id/invoke')
  const create = policy('POST', '/api/v1/prompts')
  const login = policy('POST', '/api/v1/auth/login')
  const fork = policy('POST', '/api/v1/prompts/:id/versions/:versionId/fork')

  it('a user token: every context route’s body (organizationId may be there)', () => {
    expect(needsBody(invoke, 'user', '20')).toBe(true)
    expect(needsBody(create, 'user', '20')).toBe(true)
  })

  it('an API key: a small body of declared length streams through unread', () => {
    expect(needsBody(invoke, 'apiKey', '20')).toBe(false)
    expect(needsBody(create, 'apiKey', String(UNREAD_BODY_MAX))).toBe(false)
  })

  it('an API key: a larger body, or one of unknown length, is read (the gateway answers 413 itself)', () => {
    expect(needsBody(create, 'apiKey', String(UNREAD_BODY_MAX + 1))).toBe(true)
    expect(needsBody(create, 'apiKey', undefined)).toBe(true)
    expect(needsBody(create, 'apiKey', 'x')).toBe(true)
  })

  it('any route: a larger body, or one of unknown length, is read (a service answering 413 early cut the upload: 499)', () => {
    const createOrg = policy('POST', '/api/v1/organizations')
    const publicInvoke = policy('POST', '/api/v1/public/prompts/:id/invoke')
    expect(needsBody(createOrg, 'user', '20')).toBe(false)
    expect(needsBody(createOrg, 'user', String(UNREAD_BODY_MAX + 1))).toBe(true)
    expect(needsBody(createOrg, 'user', undefined)).toBe(true)
    expect(needsBody(publicInvoke, null, '20')).toBe(false)
    expect(needsBody(publicInvoke, null, String(UNREAD_BODY_MAX + 1))).toBe(true)
  })

  it('login and fork targets: always read', () => {
    expect(needsBody(login, null, '20')).toBe(true)
    expect(needsBody(fork, 'apiKey', '20')).toBe(true)
  })
})
