import type { Scope } from '@pm/contracts'
import FindMyWay, { type HTTPMethod } from 'find-my-way'

export type Upstream = 'identity' | 'prompts' | 'render' | 'webhooks'

/**
 * How the gateway treats one public route. This table is the one place where routing,
 * authentication and scopes are decided; a path not in it is a 404 at the gateway.
 */
export interface RoutePolicy {
  method: HTTPMethod
  url: string
  upstream: Upstream
  /** public: no credential; any: API key or user JWT; user: user JWT only. */
  auth: 'public' | 'any' | 'user'
  /** Scope an API key needs (a user's role grants scopes, see scopesForRole). */
  scope?: Scope
  /**
   * Which workspace the request acts in. context: the key's own, or for a JWT its `org`
   * claim or `organizationId` from query or body; path: the `:id` path parameter; none.
   */
  org: 'context' | 'path' | 'none'
  /** Body field naming a fork target whose ACTIVE membership the gateway checks. */
  target?: 'targetOrganizationId' | 'organizationId'
  /** Rate-limit class for unauthenticated routes. */
  limit?: 'login' | 'public'
  /** Body limit in bytes (default 1 MiB). */
  bodyLimit?: number
}

const MiB = 1024 * 1024

const p = (
  method: HTTPMethod,
  url: string,
  upstream: Upstream,
  auth: RoutePolicy['auth'],
  extra: Partial<RoutePolicy> = {},
): RoutePolicy => ({ method, url, upstream, auth, org: 'context', ...extra })

export const ROUTES: RoutePolicy[] = [
  // identity: sign-in and organizations
  p('POST', '/api/v1/auth/login', 'identity', 'public', { org: 'none', limit: 'login' }),
  p('POST', '/api/v1/auth/register', 'identity', 'public', { org: 'none', limit: 'login' }),
  p('POST', '/api/v1/auth/refresh', 'identity', 'public', { org: 'none', limit: 'login' }),
  p('POST', '/api/v1/auth/logout', 'identity', 'public', { org: 'none', limit: 'login' }),
  p('GET', '/api/v1/organizations', 'identity', 'any', { org: 'none', scope: 'organization:read' }),
  p('POST', '/api/v1/organizations', 'identity', 'user', { org: 'none' }),
  p('GET', '/api/v1/organizations/:id', 'identity', 'any', { org: 'path', scope: 'organization:read' }),
  p('PATCH', '/api/v1/organizations/:id', 'identity', 'any', { org: 'path', scope: 'organization:write' }),
  p('GET', '/api/v1/organizations/:id/members', 'identity', 'any', {
    org: 'path',
    scope: 'organization:read',
  }),
  p('POST', '/api/v1/organizations/:id/members', 'identity', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('PATCH', '/api/v1/organizations/:id/members/:userId', 'identity', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('DELETE', '/api/v1/organizations/:id/members/:userId', 'identity', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('GET', '/api/v1/organizations/:id/api-keys', 'identity', 'user', { org: 'path' }),
  p('POST', '/api/v1/organizations/:id/api-keys', 'identity', 'user', { org: 'path' }),
  p('DELETE', '/api/v1/organizations/:id/api-keys/:keyId', 'identity', 'user', { org: 'path' }),

  // webhooks
  p('GET', '/api/v1/organizations/:id/webhooks', 'webhooks', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('POST', '/api/v1/organizations/:id/webhooks', 'webhooks', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('GET', '/api/v1/organizations/:id/webhooks/:webhookId', 'webhooks', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('PATCH', '/api/v1/organizations/:id/webhooks/:webhookId', 'webhooks', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('DELETE', '/api/v1/organizations/:id/webhooks/:webhookId', 'webhooks', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('POST', '/api/v1/organizations/:id/webhooks/:webhookId/test', 'webhooks', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p('GET', '/api/v1/organizations/:id/webhooks/:webhookId/deliveries', 'webhooks', 'any', {
    org: 'path',
    scope: 'organization:write',
  }),
  p(
    'POST',
    '/api/v1/organizations/:id/webhooks/:webhookId/deliveries/:deliveryId/redeliver',
    'webhooks',
    'any',
    {
      org: 'path',
      scope: 'organization:write',
    },
  ),

  // prompts
  p('GET', '/api/v1/prompts', 'prompts', 'any', { scope: 'prompts:read' }),
  p('POST', '/api/v1/prompts', 'prompts', 'any', { scope: 'prompts:write' }),
  p('POST', '/api/v1/prompts/import', 'prompts', 'user', { bodyLimit: 10 * MiB }),
  p('GET', '/api/v1/prompts/import/:batchId', 'prompts', 'any', { scope: 'prompts:read' }),
  p('GET', '/api/v1/prompts/:id', 'prompts', 'any', { scope: 'prompts:read' }),
  p('PATCH', '/api/v1/prompts/:id', 'prompts', 'any', { scope: 'prompts:write' }),
  p('DELETE', '/api/v1/prompts/:id', 'prompts', 'any', { scope: 'prompts:write' }),
  p('GET', '/api/v1/prompts/:id/variables', 'prompts', 'any', { scope: 'prompts:read' }),
  p('PATCH', '/api/v1/prompts/:id/variables/:name', 'prompts', 'any', { scope: 'prompts:write' }),
  p('POST', '/api/v1/prompts/:id/publish', 'prompts', 'user'),
  p('DELETE', '/api/v1/prompts/:id/publish', 'prompts', 'any', { scope: 'prompts:write' }),
  p('POST', '/api/v1/prompts/:id/save-and-publish', 'prompts', 'user'),
  p('GET', '/api/v1/prompts/:id/versions', 'prompts', 'any', { scope: 'prompts:read' }),
  p('GET', '/api/v1/prompts/:id/versions/diff', 'prompts', 'any', { scope: 'prompts:read' }),
  p('GET', '/api/v1/prompts/:id/versions/:versionId', 'prompts', 'any', { scope: 'prompts:read' }),
  p('POST', '/api/v1/prompts/:id/versions/:versionId/restore', 'prompts', 'any', { scope: 'prompts:write' }),
  p('POST', '/api/v1/prompts/:id/versions/:versionId/fork', 'prompts', 'user', {
    target: 'targetOrganizationId',
  }),
  p('GET', '/api/v1/prompts/:id/environments', 'prompts', 'any', { scope: 'prompts:read' }),
  p('POST', '/api/v1/prompts/:id/environments/:env/promote', 'prompts', 'any', { scope: 'prompts:write' }),
  p('GET', '/api/v1/public/prompts', 'prompts', 'public', { org: 'none', limit: 'public' }),
  p('GET', '/api/v1/public/prompts/:id', 'prompts', 'public', { org: 'none', limit: 'public' }),
  p('POST', '/api/v1/public/prompts/:id/fork', 'prompts', 'user', { org: 'none', target: 'organizationId' }),

  // render
  p('POST', '/api/v1/prompts/:id/invoke', 'render', 'any', { scope: 'prompts:read' }),
  p('POST', '/api/v1/prompts/:id/inject', 'render', 'any', { scope: 'prompts:read' }),
  p('POST', '/api/v1/public/prompts/:id/invoke', 'render', 'public', { org: 'none', limit: 'public' }),
]

export interface PolicyMatch {
  policy: RoutePolicy
  params: Record<string, string | undefined>
}

export function buildPolicyLookup(
  routes: RoutePolicy[] = ROUTES,
): (method: string, url: string) => PolicyMatch | null {
  const router = FindMyWay({ ignoreTrailingSlash: true })
  for (const policy of routes) router.on(policy.method, policy.url, () => {}, { policy })
  return (method, url) => {
    const found = router.find(method as HTTPMethod, url.split('?', 1)[0] ?? url)
    if (!found) return null
    return { policy: (found.store as { policy: RoutePolicy }).policy, params: found.params }
  }
}

const ROLE_SCOPES: Record<string, Scope[]> = {
  OWNER: ['prompts:read', 'prompts:write', 'organization:read', 'organization:write'],
  ADMIN: ['prompts:read', 'prompts:write', 'organization:read', 'organization:write'],
  MEMBER: ['prompts:read', 'prompts:write', 'organization:read'],
}

export function scopesForRole(role: string | undefined): Scope[] {
  return (role && ROLE_SCOPES[role]) || []
}
