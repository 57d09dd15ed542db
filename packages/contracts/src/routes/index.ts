export * from './spec.ts'
import { AUTH_ROUTES } from './auth.ts'
import { ORGANIZATION_ROUTES } from './organizations.ts'
import { WEBHOOK_ROUTES } from './webhooks.ts'
import { PROMPT_ROUTES } from './prompts.ts'
import { VERSION_ROUTES } from './versions.ts'
import { PUBLIC_ROUTES } from './public.ts'
import { RENDER_ROUTES } from './render.ts'
import { META_ROUTES } from './meta.ts'
import { RESOLVE_ROUTES } from './resolve.ts'
import { AUDIT_ROUTES } from './audit.ts'
import { FILE_ROUTES } from './files.ts'
import { EXPERIMENT_ROUTES } from './experiments.ts'
import { RUN_ROUTES } from './runs.ts'
import type { ErrorCode } from '../errors.ts'
import type { RouteSpec } from './spec.ts'

export {
  AUTH_ROUTES,
  ORGANIZATION_ROUTES,
  WEBHOOK_ROUTES,
  PROMPT_ROUTES,
  VERSION_ROUTES,
  PUBLIC_ROUTES,
  RENDER_ROUTES,
  META_ROUTES,
  RESOLVE_ROUTES,
  AUDIT_ROUTES,
  FILE_ROUTES,
  EXPERIMENT_ROUTES,
  RUN_ROUTES,
}

/** Every public route, one declaration each, by operation id (split by area in this folder). */
export const API_ROUTES = {
  ...AUTH_ROUTES,
  ...ORGANIZATION_ROUTES,
  ...WEBHOOK_ROUTES,
  ...PROMPT_ROUTES,
  ...VERSION_ROUTES,
  ...PUBLIC_ROUTES,
  ...RENDER_ROUTES,
  ...META_ROUTES,
  ...RESOLVE_ROUTES,
  ...AUDIT_ROUTES,
  ...FILE_ROUTES,
  ...EXPERIMENT_ROUTES,
  ...RUN_ROUTES,
} as const satisfies Record<string, RouteSpec>

export type ApiRoutes = typeof API_ROUTES
export type OperationId = keyof ApiRoutes

/** The routes as a list, each with its operation id. */
export function listRoutes(): (RouteSpec & { operationId: OperationId })[] {
  return (Object.keys(API_ROUTES) as OperationId[]).map((operationId) => ({
    operationId,
    ...(API_ROUTES[operationId] as RouteSpec),
  }))
}

/**
 * Every failure a route can answer: its own, plus those that follow from how the gateway
 * treats it (credential, scope, inputs, rate limits, upstream failures).
 */
export function routeErrors(route: RouteSpec): ErrorCode[] {
  const codes = new Set<ErrorCode>()
  if (route.gateway) {
    // Health probes are exempt from the HTTPS rule; the document and its page are not.
    if (route.path.startsWith('/api/')) codes.add('HTTPS_REQUIRED')
    return [...codes]
  }
  const hasInput = route.params || route.query || route.body
  if (hasInput || route.auth !== 'public') codes.add('VALIDATION_ERROR')
  if (route.auth !== 'public') {
    codes.add('AUTH_REQUIRED')
    codes.add('INVALID_CREDENTIALS')
    // A workspace the caller cannot act in, or a resource of another one.
    codes.add('NOT_FOUND')
  }
  if (route.scope) codes.add('INSUFFICIENT_SCOPE')
  if (route.auth === 'user') codes.add('USER_TOKEN_REQUIRED')
  codes.add('HTTPS_REQUIRED')
  if (route.auth === 'public' && route.params) codes.add('NOT_FOUND')
  if (route.body) {
    codes.add('PAYLOAD_TOO_LARGE')
    codes.add('UNSUPPORTED_MEDIA_TYPE')
  }
  for (const code of route.errors ?? []) codes.add(code)
  // API keys and unauthenticated routes are rate limited; user tokens are not.
  if (route.auth !== 'user') codes.add('RATE_LIMITED')
  codes.add('INTERNAL_ERROR')
  codes.add('SERVICE_UNAVAILABLE')
  codes.add('UPSTREAM_TIMEOUT')
  return [...codes]
}
