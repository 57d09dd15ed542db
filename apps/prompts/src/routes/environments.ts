import { API_ROUTES } from '@pm/contracts'
import { requireOrganization, route, type Service } from '@pm/kit'
import type { PromptsDeps } from '../deps.ts'

export function environmentRoutes(app: Service, { service }: PromptsDeps): void {
  route(app, API_ROUTES.getEnvironments, async (request) =>
    service.environments(requireOrganization(request), request.params.id),
  )

  route(app, API_ROUTES.promoteVersion, async (request) => {
    const { caller } = request
    // A user token or an API key with prompts:write (the gateway checked the scope).
    const promotedBy = caller.userId ?? caller.apiKeyId ?? 'unknown'
    return service.promote(
      requireOrganization(request),
      request.params.id,
      request.params.env,
      request.body.versionId,
      promotedBy,
    )
  })
}
