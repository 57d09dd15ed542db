import { SCOPES } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { buildPolicyLookup, ROUTES, scopesForRole } from '../src/policy.ts'

describe('route table', () => {
  const lookup = buildPolicyLookup()

  it('gives every route an authentication rule, and every API-key route a scope', () => {
    for (const route of ROUTES) {
      const where = `${route.method} ${route.url}`
      expect(['public', 'any', 'user'], where).toContain(route.auth)
      if (route.auth === 'any') expect(SCOPES, `${where} needs a scope`).toContain(route.scope)
      if (route.org === 'path') expect(route.url, where).toMatch(/^\/api\/v1\/organizations\/:id/)
    }
  })

  it('has no route twice', () => {
    const seen = new Set(ROUTES.map((r) => `${r.method} ${r.url}`))
    expect(seen.size).toBe(ROUTES.length)
  })

  it.each([
    ['POST', '/api/v1/prompts/p1/publish'],
    ['POST', '/api/v1/prompts/p1/save-and-publish'],
    ['POST', '/api/v1/prompts/p1/versions/v1/fork'],
    ['POST', '/api/v1/public/prompts/p1/fork'],
    ['POST', '/api/v1/prompts/import'],
  ])('%s %s needs a user token (spec section 5)', (method, url) => {
    expect(lookup(method, url)?.policy.auth).toBe('user')
  })

  it.each([
    ['GET', '/api/v1/prompts', 'prompts:read'],
    ['GET', '/api/v1/prompts/p1', 'prompts:read'],
    ['GET', '/api/v1/prompts/p1/versions', 'prompts:read'],
    ['POST', '/api/v1/prompts/p1/invoke', 'prompts:read'],
    ['POST', '/api/v1/prompts/p1/inject', 'prompts:read'],
    ['POST', '/api/v1/prompts', 'prompts:write'],
    ['PATCH', '/api/v1/prompts/p1', 'prompts:write'],
    ['DELETE', '/api/v1/prompts/p1', 'prompts:write'],
    ['DELETE', '/api/v1/prompts/p1/publish', 'prompts:write'],
    ['GET', '/api/v1/organizations', 'organization:read'],
    ['GET', '/api/v1/organizations/o1', 'organization:read'],
    ['PATCH', '/api/v1/organizations/o1', 'organization:write'],
    ['POST', '/api/v1/organizations/o1/members', 'organization:write'],
  ])('%s %s needs %s (spec section 5)', (method, url, scope) => {
    const match = lookup(method, url)
    expect(match?.policy.auth).toBe('any')
    expect(match?.policy.scope).toBe(scope)
  })

  it('leaves the public catalog open and rate-limited per IP', () => {
    for (const [method, url] of [
      ['GET', '/api/v1/public/prompts'],
      ['GET', '/api/v1/public/prompts/p1'],
      ['POST', '/api/v1/public/prompts/p1/invoke'],
    ] as const) {
      expect(lookup(method, url)?.policy).toMatchObject({ auth: 'public', limit: 'public' })
    }
    expect(lookup('POST', '/api/v1/auth/login')?.policy).toMatchObject({ auth: 'public', limit: 'login' })
  })

  it('does not route internal paths or unknown ones', () => {
    expect(lookup('POST', '/internal/api-keys/resolve')).toBeNull()
    expect(lookup('GET', '/.well-known/jwks.json')).toBeNull()
    expect(lookup('GET', '/api/v1/nothing')).toBeNull()
  })

  it('grants scopes by role', () => {
    expect(scopesForRole('MEMBER')).not.toContain('organization:write')
    expect(scopesForRole('ADMIN')).toEqual([...SCOPES])
    expect(scopesForRole('OWNER')).toEqual([...SCOPES])
    expect(scopesForRole(undefined)).toEqual([])
  })
})

describe('HEAD', () => {
  it('takes the policy of GET, and only of GET', () => {
    const lookup = buildPolicyLookup()
    expect(lookup('HEAD', '/api/v1/prompts/p1')?.policy).toBe(lookup('GET', '/api/v1/prompts/p1')?.policy)
    expect(lookup('HEAD', '/api/v1/prompts/p1/invoke')).toBeNull()
  })
})
