import {
  AppError,
  CONTEXT_HEADER,
  IdParams,
  InjectRequest,
  InjectResult,
  InvokeQuery,
  InvokeRequest,
  InvokeResult,
  ObjectId,
} from '@pm/contracts'
import { requireOrganization, type Service } from '@pm/kit'
import { renderCompiled, renderTemplate } from '@pm/template'
import { Type } from '@sinclair/typebox'
import type { FastifyReply, FastifyRequest } from 'fastify'
import type { RenderDeps } from '../app.ts'
import type { ResolveRequest, Snapshot } from '../domain/resolver.ts'

const InjectQuery = Type.Object({ organizationId: Type.Optional(ObjectId) }, { additionalProperties: false })
const NoQuery = Type.Object({}, { additionalProperties: false })
// A request without a body reaches the validator as null: "no body" means "no variables".
const PublicInvokeRequest = Type.Object(
  { variables: Type.Optional(Type.Record(Type.String(), Type.Unknown())) },
  { additionalProperties: false },
)

function lookup(request: FastifyRequest, promptId: string): Omit<ResolveRequest, 'publicOnly'> {
  return {
    promptId,
    organizationId: request.caller.organizationId,
    contextHeader: String(request.headers[CONTEXT_HEADER]),
    requestId: request.id,
  }
}

/** Renders a published snapshot; required variables are the prompt's contract, enforced here. */
function invokeResult(
  snapshot: Snapshot,
  values: Record<string, unknown>,
  reply: FastifyReply,
): InvokeResult {
  const outcome = renderCompiled(snapshot.compiled, snapshot.variables, values, 'invoke')
  if (outcome.missingRequired.length > 0) {
    throw new AppError(
      'MISSING_REQUIRED_VARIABLES',
      `missing required variables: ${outcome.missingRequired.join(', ')}`,
      outcome.missingRequired,
    )
  }
  reply.header('x-service-version', String(snapshot.version))
  return {
    renderedContent: outcome.renderedContent,
    variables: values,
    promptId: snapshot.promptId,
    versionId: snapshot.versionId,
    version: snapshot.version,
  }
}

export function renderRoutes(app: Service, { resolver }: RenderDeps): void {
  app.post(
    '/api/v1/prompts/:id/invoke',
    {
      schema: {
        params: IdParams,
        querystring: InvokeQuery,
        body: Type.Union([Type.Ref(InvokeRequest), Type.Null()]),
        response: { 200: InvokeResult },
      },
    },
    async (request, reply) => {
      requireOrganization(request)
      const body = request.body ?? {}
      const { env } = request.query
      const queryVersion = request.query.version
      if (queryVersion !== undefined && body.version !== undefined && queryVersion !== body.version) {
        throw new AppError('VALIDATION_ERROR', 'version in query and body differ', [
          { path: '/body/version', message: 'differs from the query' },
        ])
      }
      const version = queryVersion ?? body.version
      if (version !== undefined && env !== undefined) {
        throw new AppError('VALIDATION_ERROR', 'give version or env, not both', [
          { path: '/query/env', message: 'cannot be combined with version' },
        ])
      }
      const snapshot = await resolver.resolve({
        ...lookup(request, request.params.id),
        version,
        env,
        publicOnly: false,
      })
      return invokeResult(snapshot, body.variables ?? {}, reply)
    },
  )

  app.post(
    '/api/v1/prompts/:id/inject',
    {
      schema: {
        params: IdParams,
        querystring: InjectQuery,
        body: Type.Union([Type.Ref(InjectRequest), Type.Null()]),
        response: { 200: InjectResult },
      },
    },
    async (request) => {
      requireOrganization(request)
      const draft = await resolver.draft({ ...lookup(request, request.params.id), publicOnly: false })
      const values = request.body?.variables ?? {}
      const outcome = renderTemplate(draft.template, draft.variables, values, 'inject')
      return {
        renderedContent: outcome.renderedContent,
        unresolvedVariables: outcome.unresolved,
        variables: values,
      }
    },
  )

  // No credentials: the prompts service answers only for a public prompt, with its current version.
  app.post(
    '/api/v1/public/prompts/:id/invoke',
    {
      schema: {
        params: IdParams,
        querystring: NoQuery,
        body: Type.Union([PublicInvokeRequest, Type.Null()]),
        response: { 200: InvokeResult },
      },
    },
    async (request, reply) => {
      const snapshot = await resolver.resolve({ ...lookup(request, request.params.id), publicOnly: true })
      return invokeResult(snapshot, request.body?.variables ?? {}, reply)
    },
  )
}
