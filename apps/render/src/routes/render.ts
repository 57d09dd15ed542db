import {
  AppError,
  CONTEXT_HEADER,
  IdParams,
  InjectRequest,
  InjectResult,
  InvokeQuery,
  InvokeRequest,
  InvokeResult,
} from '@pm/contracts'
import { requireOrganization, type Service } from '@pm/kit'
import { renderCompiled, renderTemplate } from '@pm/template'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { RenderDeps } from '../app.ts'

function baseRequest(request: FastifyRequest, promptId: string) {
  return {
    promptId,
    organizationId: request.caller.organizationId,
    contextHeader: String(request.headers[CONTEXT_HEADER]),
    requestId: request.id,
  }
}

export function renderRoutes(app: Service, { resolver }: RenderDeps): void {
  app.post(
    '/api/v1/prompts/:id/invoke',
    {
      schema: {
        params: IdParams,
        querystring: InvokeQuery,
        body: Type.Optional(InvokeRequest),
        response: { 200: InvokeResult },
      },
    },
    async (request, reply) => {
      requireOrganization(request)
      const body = request.body ?? {}
      const queryVersion = request.query.version
      if (queryVersion !== undefined && body.version !== undefined && queryVersion !== body.version) {
        throw new AppError('VALIDATION_ERROR', 'version in query and body differ', [
          { path: '/body/version', message: 'differs from the query' },
        ])
      }
      const snapshot = await resolver.resolve({
        ...baseRequest(request, request.params.id),
        version: queryVersion ?? body.version,
        env: request.query.env,
        publicOnly: false,
      })
      const values = body.variables ?? {}
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
    },
  )

  app.post(
    '/api/v1/prompts/:id/inject',
    { schema: { params: IdParams, body: Type.Optional(InjectRequest), response: { 200: InjectResult } } },
    async (request) => {
      requireOrganization(request)
      const draft = await resolver.draft({ ...baseRequest(request, request.params.id), publicOnly: false })
      const values = request.body?.variables ?? {}
      const outcome = renderTemplate(draft.template, draft.variables, values, 'inject')
      return {
        renderedContent: outcome.renderedContent,
        unresolvedVariables: outcome.unresolved,
        variables: values,
      }
    },
  )

  app.post(
    '/api/v1/public/prompts/:id/invoke',
    {
      schema: {
        params: IdParams,
        body: Type.Optional(
          Type.Object(
            { variables: Type.Optional(Type.Record(Type.String(), Type.Unknown())) },
            { additionalProperties: false },
          ),
        ),
        response: { 200: InvokeResult },
      },
    },
    async (request, reply) => {
      const snapshot = await resolver.resolve({
        ...baseRequest(request, request.params.id),
        publicOnly: true,
      })
      const values = request.body?.variables ?? {}
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
    },
  )
}
