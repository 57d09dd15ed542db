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

/** Refuses path parameters the catalogue does not allow (400 VALIDATION_ERROR). */
export function checkParams(
  checks: Map<string, ParamsCheck>,
  method: string,
  pattern: string,
  params: Record<string, string | undefined>,
): void {
  const check = checks.get(`${method} ${pattern}`)
  const problems = check ? check(params) : []
  if (problems.length > 0) throw new AppError('VALIDATION_ERROR', 'request is invalid', problems)
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
