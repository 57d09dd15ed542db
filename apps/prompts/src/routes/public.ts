import { API_ROUTES, pagination } from '@pm/contracts'
import { route, type Service } from '@pm/kit'
import type { PromptsDeps } from '../deps.ts'
import { catalogEntry } from '../domain/views.ts'

/** The public catalog: no credentials; published content only, never a draft. */
export function publicRoutes(app: Service, { service }: PromptsDeps): void {
  route(app, API_ROUTES.listPublicPrompts, async (request) => {
    const q = request.query
    const { prompts, total } = await service.listPublic(q.search?.trim() || undefined, {
      page: q.page,
      limit: q.limit,
    })
    return { prompts, pagination: pagination(q.page, q.limit, total) }
  })

  route(app, API_ROUTES.getPublicPrompt, async (request) => {
    const { prompt, version } = await service.publicEntry(request.params.id)
    return catalogEntry(prompt, version)
  })
}
