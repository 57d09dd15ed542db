import { AppError, type FieldError, listRoutes } from '@pm/contracts'
import { isId } from '@pm/kit'
import type { TObject } from '@sinclair/typebox'
import { TypeCompiler } from '@sinclair/typebox/compiler'

/**
 * The client inputs the gateway itself uses (path parameters, the workspace and fork target
 * ids) are checked here, before any of them reaches an internal call or a cache key (issue 14,
 * findings 1 and 3). The services validate everything again with the same schemas.
 */

type ParamsCheck = (params: Record<string, string | undefined>) => FieldError[]

function compile(schema: TObject): ParamsCheck {
  const checker = TypeCompiler.Compile(schema)
  return (params) => {
    // find-my-way hands over every parameter, decoded; only named ones are checked.
    const values = Object.fromEntries(Object.entries(params).filter(([, v]) => v !== undefined))
    if (checker.Check(values)) return []
    return [...checker.Errors(values)].map((e) => ({ path: `/params${e.path}`, message: e.message }))
  }
}

/** Path parameter checks by "METHOD /route/:pattern", from the route catalogue. */
export function buildParamsChecks(): Map<string, ParamsCheck> {
  const checks = new Map<string, ParamsCheck>()
  for (const route of listRoutes()) {
    if (route.params) checks.set(`${route.method} ${route.path}`, compile(route.params))
  }
  return checks
}

/** What /api/v1/prompts/slug/:slug also answers ("METHOD rest-of-path"). */
const SLUG_ROUTES = new Set(
  listRoutes()
    .filter((r) => r.path.startsWith('/api/v1/prompts/slug/:slug'))
    .map((r) => `${r.method} ${r.path.slice('/api/v1/prompts/slug/:slug'.length)}`),
)

/** Refuses path parameters the catalogue does not allow (400 VALIDATION_ERROR). */
export function checkParams(
  checks: Map<string, ParamsCheck>,
  method: string,
  pattern: string,
  params: Record<string, string | undefined>,
): void {
  const check = checks.get(`${method} ${pattern}`)
  const problems = check ? check(params) : []
  if (problems.length === 0) return
  // A slug where a prompt id goes (/prompts/greeting/invoke): say where slugs are looked up.
  if (pattern.startsWith('/api/v1/prompts/:id') && problems.some((p) => p.path === '/params/id')) {
    const slug = /^[a-z0-9]+(?:-[a-z0-9]+)*$/.test(params.id ?? '')
    const rest = pattern.slice('/api/v1/prompts/:id'.length)
    const bySlug = SLUG_ROUTES.has(`${method} ${rest}`)
      ? `use ${method} /api/v1/prompts/slug/${params.id}${rest}`
      : `find its id with GET /api/v1/prompts/slug/${params.id}`
    const hint = `a prompt id is 24 hexadecimal characters${slug ? `; to name the prompt by its slug, ${bySlug}` : ''}`
    throw new AppError(
      'VALIDATION_ERROR',
      `"${params.id}" is not a prompt id: ${hint}`,
      problems.map((p) => (p.path === '/params/id' ? { path: p.path, message: hint } : p)),
    )
  }
  throw new AppError('VALIDATION_ERROR', 'request is invalid', problems)
}

/**
 * A workspace id given by the client in the query or the body: undefined when absent, the id
 * when it is one, else 400 VALIDATION_ERROR (also for a repeated query parameter or a
 * non-string body field, which the gateway would otherwise ignore while the service reads it).
 */
export function workspaceIdInput(value: unknown, where: string): string | undefined {
  if (value === undefined) return undefined
  if (isId(value)) return value
  throw new AppError('VALIDATION_ERROR', 'request is invalid', [
    { path: where, message: 'must be a 24-character hexadecimal id' },
  ])
}
