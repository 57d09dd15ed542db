import { API_ROUTES } from '@pm/contracts'
import { requireOrganization, route, type Service } from '@pm/kit'
import type { PromptsDeps } from '../deps.ts'
import { auditContextOf } from './common.ts'
import { publicPrompt } from '../domain/views.ts'

export function promptRoutes(app: Service, { service }: PromptsDeps): void {
  route(app, API_ROUTES.listPrompts, async (request) =>
    service.list(requireOrganization(request), request.query),
  )

  route(app, API_ROUTES.createPrompt, async (request, reply) => {
    const organizationId = requireOrganization(request)
    const createdBy = request.caller.userId ?? request.caller.apiKeyId ?? 'unknown'
    const prompt = await service.create(
      organizationId,
      createdBy,
      request.body,
      undefined,
      undefined,
      auditContextOf(request),
    )
    reply.code(201)
    return publicPrompt(prompt)
  })

  route(app, API_ROUTES.getPrompt, async (request) => {
    return publicPrompt(await service.get(requireOrganization(request), request.params.id))
  })

  route(app, API_ROUTES.getPromptBySlug, async (request) => {
    return publicPrompt(await service.getBySlug(requireOrganization(request), request.params.slug))
  })

  route(app, API_ROUTES.updatePrompt, async (request) => {
    const { prompt, staleVariables } = await service.update(
      requireOrganization(request),
      request.params.id,
      request.body,
      auditContextOf(request),
      request.query.force === 'true',
    )
    return { ...publicPrompt(prompt), ...(staleVariables ? { staleVariables } : {}) }
  })

  route(app, API_ROUTES.deletePrompt, async (request) => {
    await service.delete(
      requireOrganization(request),
      request.params.id,
      request.query.force === 'true',
      auditContextOf(request),
    )
    return { _id: request.params.id, deleted: true as const }
  })

  route(app, API_ROUTES.listPromptDependents, async (request) => ({
    dependents: await service.dependents(requireOrganization(request), request.params.id),
  }))

  route(app, API_ROUTES.listVariables, async (request) => {
    return (await service.get(requireOrganization(request), request.params.id)).variables
  })

  route(app, API_ROUTES.updateVariable, async (request) => {
    const prompt = await service.updateVariable(
      requireOrganization(request),
      request.params.id,
      request.params.name,
      request.body,
      auditContextOf(request),
    )
    return publicPrompt(prompt)
  })
}
