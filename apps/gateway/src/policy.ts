import {
  listRoutes,
  type RouteAuth,
  type RouteSpec,
  type Scope,
  type Upstream,
  type WorkspaceSource,
} from '@pm/contracts'
import FindMyWay, { type HTTPMethod } from 'find-my-way'

export type { Upstream } from '@pm/contracts'

/**
 * How the gateway treats one public route: where it goes, which credential it takes, which
 * scope it needs and which workspace it acts in. Derived from the route declarations in
 * @pm/contracts (`packages/contracts/src/routes/`); a path not among them is a 404 here.
 */
export interface RoutePolicy {
  method: HTTPMethod
  url: string
  upstream: Upstream
  /** public: no credential; any: API key or user JWT; user: user JWT only. */
  auth: RouteAuth
  /** Scope an API key needs (a user's role grants scopes, see scopesForRole). */
  scope?: Scope
  /** Which workspace the request acts in (see WorkspaceSource). */
  org: WorkspaceSource
  /** Body field naming a fork target whose ACTIVE membership the gateway checks. */
  target?: 'targetOrganizationId' | 'organizationId'
  /** Rate-limit class for unauthenticated routes. */
  limit?: 'login' | 'public'
  /** Body limit in bytes (default 1 MiB). */
  bodyLimit?: number
  /** multipart: streamed through unread (CSV import). Default: JSON. */
  bodyType?: 'multipart'
}

/** The policy of one declared route; null for the routes the gateway answers itself. */
export function policyOf(route: RouteSpec): RoutePolicy | null {
  if (route.gateway) return null
  const policy: RoutePolicy = {
    method: route.method,
    url: route.path,
    upstream: route.upstream,
    auth: route.auth,
    org: route.workspace,
  }
  if (route.scope) policy.scope = route.scope
  if (route.target) policy.target = route.target
  if (route.limit) policy.limit = route.limit
  if (route.bodyLimit) policy.bodyLimit = route.bodyLimit
  if (route.bodyType === 'multipart') policy.bodyType = 'multipart'
  return policy
}

export const ROUTES: RoutePolicy[] = listRoutes().flatMap((route) => policyOf(route) ?? [])

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
    // HEAD is GET without the body (RFC 9110 9.3.2): same policy, same checks (issue 14, finding 7).
    const asked = method === 'HEAD' ? 'GET' : method
    const found = router.find(asked as HTTPMethod, url.split('?', 1)[0] ?? url)
    if (!found) return null
    return { policy: (found.store as { policy: RoutePolicy }).policy, params: found.params }
  }
}

const ROLE_SCOPES: Record<string, Scope[]> = {
  OWNER: [
    'prompts:read',
    'prompts:write',
    'organization:read',
    'organization:write',
    'environments:promote-protected',
    'runs:write',
  ],
  ADMIN: [
    'prompts:read',
    'prompts:write',
    'organization:read',
    'organization:write',
    'environments:promote-protected',
    'runs:write',
  ],
  MEMBER: ['prompts:read', 'prompts:write', 'organization:read', 'runs:write'],
}

export function scopesForRole(role: string | undefined): Scope[] {
  return (role && ROLE_SCOPES[role]) || []
}
