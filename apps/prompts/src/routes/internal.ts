import {
  AppError,
  DraftPrompt,
  EnvironmentName,
  IdParams,
  ObjectId,
  ResolvedPrompt,
  SlugParams,
} from '@pm/contracts'
import { requireOrganization, type Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { PromptsDeps } from '../deps.ts'
import { contentFields } from '../domain/content.ts'

const ResolveQuery = Type.Object(
  {
    version: Type.Optional(Type.Integer({ minimum: 1 })),
    env: Type.Optional(EnvironmentName),
    public: Type.Optional(Type.Boolean()),
    /** With `public` on the slug route: the workspace of the public prompt whose reference this is. */
    org: Type.Optional(ObjectId),
  },
  { additionalProperties: false },
)

const SplitCounts = Type.Object(
  {
    counts: Type.Array(
      Type.Object(
        {
          splitId: ObjectId,
          variant: Type.Integer({ minimum: 0, maximum: 4 }),
          count: Type.Integer({ minimum: 1, maximum: 1_000_000_000 }),
        },
        { additionalProperties: false },
      ),
      { maxItems: 500 },
    ),
  },
  { additionalProperties: false },
)

/** Routes for the render service (called with the caller context it received). */
export function internalRoutes(app: Service, { service }: PromptsDeps): void {
  // Render's invocations per split variant (DESIGN section 15), signed as the 'service' caller.
  app.post('/internal/splits/counts', { schema: { body: SplitCounts } }, async (request, reply) => {
    if (request.caller.kind !== 'service') throw new AppError('NOT_FOUND', 'not found')
    await service.addSplitCounts(request.body.counts)
    reply.code(204)
  })

  app.get(
    '/internal/prompts/:id/resolve',
    {
      schema: {
        params: IdParams,
        querystring: ResolveQuery,
        response: { 200: ResolvedPrompt },
      },
    },
    async (request) => {
      const { version, env } = request.query
      return service.resolve(
        request.caller,
        { id: request.params.id },
        { version, env },
        request.query.public === true,
      )
    },
  )

  // By slug, in the caller's workspace (the public catalog is reached by id only).
  app.get(
    '/internal/prompts/slug/:slug/resolve',
    { schema: { params: SlugParams, querystring: ResolveQuery, response: { 200: ResolvedPrompt } } },
    async (request) => {
      const { version, env } = request.query
      // `public` with `org`: a reference of a public prompt, answered only when it is public too.
      const { org } = request.query
      if (request.query.public === true) {
        return service.resolve(
          request.caller,
          { slug: request.params.slug, ...(org ? { organizationId: org } : {}) },
          { version, env },
          true,
        )
      }
      return service.resolve(request.caller, { slug: request.params.slug }, { version, env }, false)
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
        slug: prompt.slug,
        template: prompt.template,
        variables: prompt.variables,
        ...contentFields(prompt),
      }
    },
  )
}
