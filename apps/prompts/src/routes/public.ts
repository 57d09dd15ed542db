import { IdParams, pagination, PublicListQuery, PublicPrompt, PublicPromptList } from '@pm/contracts'
import type { Service } from '@pm/kit'
import type { PromptsDeps } from '../app.ts'
import { catalogEntry } from '../domain/prompts.ts'

/** The public catalog: no credentials; published content only, never a draft. */
export function publicRoutes(app: Service, { service }: PromptsDeps): void {
  app.get(
    '/api/v1/public/prompts',
    { schema: { querystring: PublicListQuery, response: { 200: PublicPromptList } } },
    async (request) => {
      const q = request.query
      const { prompts, total } = await service.listPublic(q.search?.trim() || undefined, {
        page: q.page,
        limit: q.limit,
      })
      return { prompts, pagination: pagination(q.page, q.limit, total) }
    },
  )

  app.get(
    '/api/v1/public/prompts/:id',
    { schema: { params: IdParams, response: { 200: PublicPrompt } } },
    async (request) => {
      const { prompt, version } = await service.publicEntry(request.params.id)
      return catalogEntry(prompt, version)
    },
  )
}
