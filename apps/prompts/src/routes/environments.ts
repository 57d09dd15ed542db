import { API_ROUTES } from '@pm/contracts'
import { requireOrganization, route, type Service } from '@pm/kit'
import type { PromptsDeps } from '../deps.ts'
import { promoteTarget } from '../domain/release.ts'
import { auditContextOf } from './common.ts'

export function environmentRoutes(app: Service, { service }: PromptsDeps): void {
  route(app, API_ROUTES.getEnvironments, async (request) =>
    service.environments(requireOrganization(request), request.params.id),
  )

  route(app, API_ROUTES.getEnvironmentHistory, async (request) =>
    service.environmentHistory(requireOrganization(request), request.params.id, request.params.env, {
      page: request.query.page,
      limit: request.query.limit,
    }),
  )

  // A user token or an API key with prompts:write (the gateway checked the scope); a protected
  // environment is checked by the service.
  route(app, API_ROUTES.promoteVersion, async (request) =>
    service.promote(
      request.caller,
      requireOrganization(request),
      request.params.id,
      request.params.env,
      promoteTarget(request.body),
      auditContextOf(request),
    ),
  )
}
