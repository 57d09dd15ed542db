import { API_ROUTES } from '@pm/contracts'
import { emptyBodyAsObject, requireOrganization, requireUser, route, type Service } from '@pm/kit'
import type { PromptsDeps } from '../deps.ts'
import { publicPrompt } from '../domain/views.ts'
import { auditContextOf } from './common.ts'

export function versionRoutes(app: Service, { service }: PromptsDeps): void {
  route(
    app,
    API_ROUTES.publishPrompt,
    async (request, reply) => {
      const userId = requireUser(request)
      const version = await service.publish(
        requireOrganization(request),
        request.params.id,
        { _id: userId },
        request.body.changeLog ?? '',
        auditContextOf(request),
      )
      reply.code(201)
      return version
    },
    { preValidation: emptyBodyAsObject },
  )

  route(
    app,
    API_ROUTES.saveAndPublish,
    async (request, reply) => {
      // The draft as the server holds it is published: the request carries no content.
      const userId = requireUser(request)
      const version = await service.publish(
        requireOrganization(request),
        request.params.id,
        { _id: userId },
        '',
        auditContextOf(request),
      )
      reply.code(201)
      return version
    },
    { preValidation: emptyBodyAsObject },
  )

  route(app, API_ROUTES.unpublishPrompt, async (request) => {
    return publicPrompt(
      await service.unpublish(requireOrganization(request), request.params.id, auditContextOf(request)),
    )
  })

  route(app, API_ROUTES.listVersions, async (request) => {
    const onlyPublished = request.query.published === 'true'
    return {
      versions: await service.listVersions(requireOrganization(request), request.params.id, onlyPublished),
    }
  })

  // Declared before /versions/:versionId only for the reader: the router prefers the static segment.
  route(app, API_ROUTES.diffVersions, async (request) => {
    return service.diff(requireOrganization(request), request.params.id, request.query.from, request.query.to)
  })

  route(app, API_ROUTES.getVersion, async (request) => {
    const prompt = await service.get(requireOrganization(request), request.params.id)
    return service.version(prompt, request.params.versionId)
  })

  route(
    app,
    API_ROUTES.restoreVersion,
    async (request) => {
      const prompt = await service.restore(
        requireOrganization(request),
        request.params.id,
        request.params.versionId,
        auditContextOf(request),
      )
      return publicPrompt(prompt)
    },
    { preValidation: emptyBodyAsObject },
  )
}
