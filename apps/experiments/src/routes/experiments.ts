import { API_ROUTES } from '@pm/contracts'
import { auditContextOf, requireOrganization, route, type Service } from '@pm/kit'
import type { ExperimentsDeps } from '../deps.ts'

export function experimentRoutes(app: Service, { service }: ExperimentsDeps): void {
  route(app, API_ROUTES.listExperiments, async (request) => {
    const { page, limit, promptId } = request.query
    return service.listExperiments(requireOrganization(request), { page, limit }, promptId)
  })

  route(app, API_ROUTES.createExperiment, async (request, reply) => {
    const accepted = await service.createExperiment(
      request.caller,
      requireOrganization(request),
      request.body,
      auditContextOf(request),
    )
    reply.code(202)
    return accepted
  })

  route(app, API_ROUTES.getExperiment, async (request) =>
    service.getExperiment(requireOrganization(request), request.params.id),
  )

  route(app, API_ROUTES.cancelExperiment, async (request) =>
    service.cancel(requireOrganization(request), request.params.id, auditContextOf(request)),
  )

  route(app, API_ROUTES.listExperimentResults, async (request) => {
    const { page, limit, variant, failed } = request.query
    return service.results(
      requireOrganization(request),
      request.params.id,
      { page, limit },
      {
        ...(variant !== undefined ? { variant } : {}),
        ...(failed !== undefined ? { failed } : {}),
      },
    )
  })
}
