import { AppError, type RouteSpec } from '@pm/contracts'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { TSchema } from '@sinclair/typebox'
import type {
  ContextConfigDefault,
  FastifyBaseLogger,
  FastifyRequest,
  FastifySchema,
  preHandlerHookHandler,
  preValidationHookHandler,
  RawReplyDefaultExpression,
  RawRequestDefaultExpression,
  RawServerDefault,
  RouteGenericInterface,
  RouteHandlerMethod,
} from 'fastify'
import type { Service } from './service.ts'

type Field<R, K extends string> = R extends { [P in K]: infer S extends TSchema } ? S : undefined

/** The Fastify schema a declaration implies: its params, query, body and success response. */
export interface SchemaOf<R extends RouteSpec> extends FastifySchema {
  params: Field<R, 'params'>
  querystring: Field<R, 'query'>
  body: Field<R, 'body'>
  response: R extends { status: infer S extends number; response: infer P extends TSchema }
    ? { [K in S]: P }
    : undefined
}

export type DeclaredHandler<R extends RouteSpec> = RouteHandlerMethod<
  RawServerDefault,
  RawRequestDefaultExpression,
  RawReplyDefaultExpression,
  RouteGenericInterface,
  ContextConfigDefault,
  SchemaOf<R>,
  TypeBoxTypeProvider,
  FastifyBaseLogger
>

export interface RouteExtras {
  /** Runs before validation (e.g. a missing optional body validated as `{}`). */
  preValidation?: preValidationHookHandler
}

/**
 * For routes whose body is optional (publish, logout, a secret's rotation): a request sent
 * without any body is validated as `{}` instead of failing "body must be object".
 */
export async function emptyBodyAsObject(request: FastifyRequest): Promise<void> {
  if (request.body === undefined) request.body = {}
}

/** The schema a service validates and serializes with, taken from the route's declaration. */
export function schemaOf(spec: RouteSpec): FastifySchema {
  const schema: FastifySchema = {}
  if (spec.params) schema.params = spec.params
  if (spec.query) schema.querystring = spec.query
  if (spec.body && spec.bodyType !== 'multipart') schema.body = spec.body
  if (spec.response) schema.response = { [spec.status]: spec.response }
  return schema
}

/**
 * Whether a route's workspace may also be named by its body's `organizationId` (the routes
 * whose workspace is the caller's context, and not a fork target's): then the handler acts only
 * when that field, if present, names the caller's workspace.
 */
export function bodyNamesWorkspace(spec: RouteSpec): boolean {
  if (spec.gateway || spec.workspace !== 'context' || spec.target !== undefined) return false
  const properties = (spec.body as { properties?: Record<string, unknown> } | undefined)?.properties
  return properties?.organizationId !== undefined
}

/**
 * The gateway reads a body's `organizationId` only for a user token (apps/gateway/src/body.ts);
 * an API key's workspace is its own and its body is streamed through unread. So the service,
 * having parsed and validated the body, refuses one naming another workspace: 404 as the gateway
 * answers for a workspace the caller cannot see.
 */
const sameWorkspace: preHandlerHookHandler = (request, _reply, done) => {
  const asked = (request.body as { organizationId?: unknown } | null | undefined)?.organizationId
  if (asked !== undefined && asked !== request.caller.organizationId) {
    done(new AppError('NOT_FOUND', 'organization not found'))
    return
  }
  done()
}

/**
 * Registers a service's handler for one declared public route (packages/contracts/src/routes):
 * method, path and the declared param, query, body and response schemas come from the
 * declaration, so a route is written once. The gateway has applied the credential, scope and
 * workspace rules; the handler still checks what it can from `request.caller`.
 */
export function route<const R extends RouteSpec>(
  app: Service,
  spec: R,
  handler: DeclaredHandler<R>,
  extras: RouteExtras = {},
): void {
  app.route({
    method: spec.method,
    url: spec.path,
    schema: schemaOf(spec),
    ...(extras.preValidation ? { preValidation: extras.preValidation } : {}),
    ...(bodyNamesWorkspace(spec) ? { preHandler: sameWorkspace } : {}),
    handler: handler as RouteHandlerMethod,
  })
}
