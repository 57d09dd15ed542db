import type { RouteSpec } from '@pm/contracts'
import type { TypeBoxTypeProvider } from '@fastify/type-provider-typebox'
import type { TSchema } from '@sinclair/typebox'
import type {
  ContextConfigDefault,
  FastifyBaseLogger,
  FastifySchema,
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
    handler: handler as RouteHandlerMethod,
  })
}
