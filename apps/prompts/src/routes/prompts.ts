import {
  AppError,
  CreatePromptRequest,
  IdParams,
  ListPromptsQuery,
  pagination,
  Prompt,
  PromptList,
  PromptWithStale,
  UpdatePromptRequest,
} from '@pm/contracts'
import { requireOrganization, type Service } from '@pm/kit'
import { syncVariables } from '@pm/template'
import { publicPrompt } from '../domain/prompts.ts'
import { slugify, uniqueSlug } from '../domain/slug.ts'
import type { PromptPatch } from '../store/types.ts'
import type { PromptsDeps } from '../app.ts'

export function promptRoutes(app: Service, { service }: PromptsDeps): void {
  const { store } = service

  app.get(
    '/api/v1/prompts',
    { schema: { querystring: ListPromptsQuery, response: { 200: PromptList } } },
    async (request) => {
      const organizationId = requireOrganization(request)
      const q = request.query
      const tags = q.tags
        ?.split(/[;,]/)
        .map((t) => t.trim())
        .filter(Boolean)
      const [{ prompts, total }, counts] = await Promise.all([
        store.listPrompts(
          { organizationId, search: q.search?.trim() || undefined, tags, visibility: q.visibility },
          { page: q.page, limit: q.limit },
        ),
        store.summary(organizationId),
      ])
      return {
        prompts: prompts.map(publicPrompt),
        pagination: pagination(q.page, q.limit, total),
        summary: {
          total: counts.total,
          public: counts.public,
          private: counts.total - counts.public,
          published: counts.published,
          unpublished: counts.total - counts.published,
        },
      }
    },
  )

  app.post(
    '/api/v1/prompts',
    { schema: { body: CreatePromptRequest, response: { 201: Prompt } } },
    async (request, reply) => {
      const organizationId = requireOrganization(request)
      const createdBy = request.caller.userId ?? request.caller.apiKeyId ?? 'unknown'
      const prompt = await service.create(organizationId, createdBy, request.body)
      reply.code(201)
      return publicPrompt(prompt)
    },
  )

  app.get(
    '/api/v1/prompts/:id',
    { schema: { params: IdParams, response: { 200: Prompt } } },
    async (request) => {
      return publicPrompt(await service.get(requireOrganization(request), request.params.id))
    },
  )

  app.patch(
    '/api/v1/prompts/:id',
    { schema: { params: IdParams, body: UpdatePromptRequest, response: { 200: PromptWithStale } } },
    async (request) => {
      const organizationId = requireOrganization(request)
      const current = await service.get(organizationId, request.params.id)
      const body = request.body
      const patch: PromptPatch = { updatedAt: new Date().toISOString() }
      if (body.name !== undefined && body.name.trim() !== current.name) {
        patch.name = body.name.trim()
        patch.slug = await uniqueSlug(
          slugify(patch.name),
          async (s) => s !== current.slug && (await store.isSlugTaken(organizationId, s)),
        )
      }
      if (body.description !== undefined) patch.description = body.description
      if (body.tags !== undefined) patch.tags = body.tags
      let staleVariables: string[] | undefined
      if (body.template !== undefined || body.variables !== undefined) {
        const template = body.template ?? current.template
        const synced = syncVariables(template, body.variables ?? current.variables)
        patch.template = template
        patch.variables = synced.variables
        staleVariables = synced.staleVariables
      }
      if (body.isPublic !== undefined) {
        if (body.isPublic && !current.currentVersionId) {
          throw new AppError('NO_PUBLISHED_VERSION', 'publish a version before making the prompt public')
        }
        patch.isPublic = body.isPublic
      }
      const updated = await store.updatePrompt(organizationId, current._id, patch)
      if (!updated) throw new AppError('NOT_FOUND', 'prompt not found')
      if (patch.isPublic !== undefined && patch.isPublic !== current.isPublic)
        service.changed(updated, 'visibility')
      return { ...publicPrompt(updated), ...(staleVariables ? { staleVariables } : {}) }
    },
  )

  app.delete('/api/v1/prompts/:id', { schema: { params: IdParams } }, async (request) => {
    const organizationId = requireOrganization(request)
    const deleted = await store.deletePrompt(organizationId, request.params.id)
    if (!deleted) throw new AppError('NOT_FOUND', 'prompt not found')
    service.changed({ _id: request.params.id, organizationId }, 'deleted')
    return { _id: request.params.id, deleted: true }
  })
}
