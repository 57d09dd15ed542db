import { API_ROUTES } from '@pm/contracts'
import { route, type Service } from '@pm/kit'
import type { PromptsDeps } from '../deps.ts'

/** The published content invoke would render, for clients that render locally. */
export function resolveRoutes(app: Service, { service }: PromptsDeps): void {
  route(app, API_ROUTES.resolvePrompt, async (request) => {
    const { version, env } = request.query
    return service.resolve(request.caller, { id: request.params.id }, { version, env }, false)
  })
  route(app, API_ROUTES.resolvePromptBySlug, async (request) => {
    const { version, env } = request.query
    return service.resolve(request.caller, { slug: request.params.slug }, { version, env }, false)
  })
}
