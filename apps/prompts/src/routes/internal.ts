import { DraftPrompt, EnvironmentName, IdParams, ResolvedPrompt } from '@pm/contracts'
import { requireOrganization, type Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { PromptsDeps } from '../app.ts'

/** Routes for the render service (called with the caller context it received). */
export function internalRoutes(app: Service, { service }: PromptsDeps): void {
  app.get(
    '/internal/prompts/:id/resolve',
    {
      schema: {
        params: IdParams,
        querystring: Type.Object(
          {
            version: Type.Optional(Type.Integer({ minimum: 1 })),
            env: Type.Optional(EnvironmentName),
            public: Type.Optional(Type.Boolean()),
          },
          { additionalProperties: false },
        ),
        response: { 200: ResolvedPrompt },
      },
    },
    async (request) => {
      const { version, env } = request.query
      return service.resolve(
        request.caller,
        request.params.id,
        { version, env },
        request.query.public === true,
      )
    },
  )

  app.get(
    '/internal/prompts/:id/draft',
    { schema: { params: IdParams, response: { 200: DraftPrompt } } },
    async (request) => {
      const prompt = await service.get(requireOrganization(request), request.params.id)
      return {
        promptId: prompt._id,
        organizationId: prompt.organizationId,
        template: prompt.template,
        variables: prompt.variables,
      }
    },
  )
}
