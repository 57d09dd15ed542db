import { type ErrorCode, listRoutes, type RouteSpec, SCOPES, type Scope } from '@pm/contracts'

/** The credential a common case sends; the runner turns it into an Authorization header. */
export type CaseCredential =
  /** No Authorization header. */
  | { kind: 'none' }
  /** An API key of `workspace` with these scopes. */
  | { kind: 'apiKey'; scopes: Scope[] }
  /** A user token; the user is an ACTIVE OWNER of `workspace` only. */
  | { kind: 'user'; org: 'workspace' | 'other' }

export interface CommonRouteCase {
  operationId: string
  /** e.g. "POST /api/v1/prompts/:id/publish: an API key where a user token is needed". */
  name: string
  method: RouteSpec['method']
  /** A concrete path (parameters filled in). */
  url: string
  credential: CaseCredential
  expect: { status: number; code: ErrorCode }
}

export interface Workspaces {
  /** The workspace the credentials belong to. */
  workspace: string
  /** A workspace the credentials have nothing to do with. */
  other: string
}

const SAMPLE_ID = '0123456789abcdef01234567'

function concrete(path: string, id: string): string {
  return path.replace(/:([A-Za-z]+)/g, (_m, name: string) =>
    name === 'id' ? id : name === 'env' ? 'production' : name === 'name' ? 'topic' : SAMPLE_ID,
  )
}

/**
 * The 401/403/404 cases every protected route shares, derived from the route declarations:
 * no credential (401 AUTH_REQUIRED), an API key on a user-token route (403
 * USER_TOKEN_REQUIRED), an API key without the route's scope (403 INSUFFICIENT_SCOPE), and a
 * caller asking for another workspace (404 NOT_FOUND: by path, query or token). A test runs
 * them against the gateway (apps/gateway/test/commonRoutes.test.ts) or a service.
 */
export function commonRouteCases(ws: Workspaces, routes: RouteSpec[] = listRoutes()): CommonRouteCase[] {
  const cases: CommonRouteCase[] = []
  for (const route of routes) {
    if (route.gateway || route.auth === 'public') continue
    const operationId = 'operationId' in route ? String(route.operationId) : `${route.method} ${route.path}`
    const where = `${route.method} ${route.path}`
    const own = concrete(route.path, route.workspace === 'path' ? ws.workspace : SAMPLE_ID)
    const add = (c: Omit<CommonRouteCase, 'operationId' | 'method'>) =>
      cases.push({ operationId, method: route.method, ...c, name: `${where}: ${c.name}` })

    add({
      name: 'no credential',
      url: own,
      credential: { kind: 'none' },
      expect: { status: 401, code: 'AUTH_REQUIRED' },
    })
    if (route.auth === 'user') {
      add({
        name: 'an API key where a user token is needed',
        url: own,
        credential: { kind: 'apiKey', scopes: [...SCOPES] },
        expect: { status: 403, code: 'USER_TOKEN_REQUIRED' },
      })
    }
    const { scope } = route
    if (scope && route.auth === 'any') {
      add({
        name: `an API key without ${scope}`,
        url: own,
        credential: { kind: 'apiKey', scopes: SCOPES.filter((s) => s !== scope) },
        expect: { status: 403, code: 'INSUFFICIENT_SCOPE' },
      })
    }
    if (route.workspace === 'path') {
      add({
        name: 'another workspace in the path',
        url: concrete(route.path, ws.other),
        credential:
          route.auth === 'user'
            ? { kind: 'user', org: 'workspace' }
            : { kind: 'apiKey', scopes: [...SCOPES] },
        expect: { status: 404, code: 'NOT_FOUND' },
      })
    } else if (route.workspace === 'context') {
      if (route.auth === 'any') {
        add({
          name: 'an API key asking for another workspace',
          url: `${own}?organizationId=${ws.other}`,
          credential: { kind: 'apiKey', scopes: [...SCOPES] },
          expect: { status: 404, code: 'NOT_FOUND' },
        })
      }
      add({
        name: 'a user token of a workspace the user is not in',
        url: own,
        credential: { kind: 'user', org: 'other' },
        expect: { status: 404, code: 'NOT_FOUND' },
      })
    }
  }
  return cases
}
