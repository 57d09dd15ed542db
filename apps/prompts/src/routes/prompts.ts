import {
  CreatePromptRequest,
  IdParams,
  ListPromptsQuery,
  ObjectId,
  pagination,
  Prompt,
  PromptList,
  PromptWithStale,
  UpdatePromptRequest,
  UpdateVariableRequest,
  VariableList,
} from '@pm/contracts'
import { requireOrganization, type Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { PromptsDeps } from '../app.ts'
import { publicPrompt } from '../domain/prompts.ts'
import { OrgQuery, VariableParams } from './common.ts'

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
    { schema: { params: IdParams, querystring: OrgQuery, response: { 200: Prompt } } },
    async (request) => {
      return publicPrompt(await service.get(requireOrganization(request), request.params.id))
    },
  )

  app.patch(
    '/api/v1/prompts/:id',
    { schema: { params: IdParams, body: UpdatePromptRequest, response: { 200: PromptWithStale } } },
    async (request) => {
      const { prompt, staleVariables } = await service.update(
        requireOrganization(request),
        request.params.id,
        request.body,
      )
      return { ...publicPrompt(prompt), ...(staleVariables ? { staleVariables } : {}) }
    },
  )

  app.delete(
    '/api/v1/prompts/:id',
    {
      schema: {
        params: IdParams,
        querystring: OrgQuery,
        response: { 200: Type.Object({ _id: ObjectId, deleted: Type.Literal(true) }) },
      },
    },
    async (request) => {
      await service.delete(requireOrganization(request), request.params.id)
      return { _id: request.params.id, deleted: true as const }
    },
  )

  app.get(
    '/api/v1/prompts/:id/variables',
    { schema: { params: IdParams, querystring: OrgQuery, response: { 200: VariableList } } },
    async (request) => {
      return (await service.get(requireOrganization(request), request.params.id)).variables
    },
  )

  app.patch(
    '/api/v1/prompts/:id/variables/:name',
    { schema: { params: VariableParams, body: UpdateVariableRequest, response: { 200: Prompt } } },
    async (request) => {
      const prompt = await service.updateVariable(
        requireOrganization(request),
        request.params.id,
        request.params.name,
        request.body,
      )
      return publicPrompt(prompt)
    },
  )
}
