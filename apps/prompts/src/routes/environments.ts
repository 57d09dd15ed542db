import { EnvParams, Environments, IdParams, Pin, PromoteRequest } from '@pm/contracts'
import { requireOrganization, type Service } from '@pm/kit'
import type { PromptsDeps } from '../app.ts'
import { OrgQuery } from './common.ts'

export function environmentRoutes(app: Service, { service }: PromptsDeps): void {
  app.get(
    '/api/v1/prompts/:id/environments',
    { schema: { params: IdParams, querystring: OrgQuery, response: { 200: Environments } } },
    async (request) => service.environments(requireOrganization(request), request.params.id),
  )

  app.post(
    '/api/v1/prompts/:id/environments/:env/promote',
    { schema: { params: EnvParams, body: PromoteRequest, response: { 200: Pin } } },
    async (request) => {
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
    },
  )
}
