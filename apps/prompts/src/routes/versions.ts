import { AppError, IdParams, ObjectId, PromptVersion, PublishRequest, VersionList } from '@pm/contracts'
import { requireOrganization, requireUser, type Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { PromptsDeps } from '../app.ts'

const VersionParams = Type.Object({ id: ObjectId, versionId: ObjectId }, { additionalProperties: false })

export function versionRoutes(app: Service, { service }: PromptsDeps): void {
  const { store } = service

  app.post(
    '/api/v1/prompts/:id/publish',
    { schema: { params: IdParams, body: Type.Optional(PublishRequest), response: { 201: PromptVersion } } },
    async (request, reply) => {
      const userId = requireUser(request)
      const organizationId = requireOrganization(request)
      const version = await service.publish(
        organizationId,
        request.params.id,
        { _id: userId },
        request.body?.changeLog ?? '',
      )
      reply.code(201)
      return version
    },
  )

  app.post(
    '/api/v1/prompts/:id/save-and-publish',
    { schema: { params: IdParams, response: { 201: PromptVersion } } },
    async (request, reply) => {
      const userId = requireUser(request)
      const organizationId = requireOrganization(request)
      const version = await service.publish(organizationId, request.params.id, { _id: userId }, '')
      reply.code(201)
      return version
    },
  )

  app.get(
    '/api/v1/prompts/:id/versions',
    {
      schema: {
        params: IdParams,
        querystring: Type.Object({
          published: Type.Optional(Type.String()),
          organizationId: Type.Optional(ObjectId),
        }),
        response: { 200: VersionList },
      },
    },
    async (request) => {
      const prompt = await service.get(requireOrganization(request), request.params.id)
      const onlyPublished = request.query.published === 'true'
      const versions = await store.listVersions(prompt._id, onlyPublished ? 'publishedAt' : 'version')
      return { versions: onlyPublished ? versions.filter((v) => v.status === 'PUBLISHED') : versions }
    },
  )

  app.get(
    '/api/v1/prompts/:id/versions/:versionId',
    { schema: { params: VersionParams, response: { 200: PromptVersion } } },
    async (request) => {
      const prompt = await service.get(requireOrganization(request), request.params.id)
      const version = await store.getVersion(prompt._id, request.params.versionId)
      if (!version) throw new AppError('VERSION_NOT_FOUND', 'version not found')
      return version
    },
  )
}
