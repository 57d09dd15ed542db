import {
  DiffQuery,
  IdParams,
  ListVersionsQuery,
  Prompt,
  PromptVersion,
  PublishRequest,
  SaveAndPublishRequest,
  VersionDiff,
  VersionList,
} from '@pm/contracts'
import { requireOrganization, requireUser, type Service } from '@pm/kit'
import type { PromptsDeps } from '../app.ts'
import { publicPrompt } from '../domain/prompts.ts'
import { emptyBodyAsObject, OrgBody, OrgQuery, VersionParams } from './common.ts'

export function versionRoutes(app: Service, { service }: PromptsDeps): void {
  const { store } = service

  app.post(
    '/api/v1/prompts/:id/publish',
    {
      preValidation: emptyBodyAsObject,
      schema: { params: IdParams, body: PublishRequest, response: { 201: PromptVersion } },
    },
    async (request, reply) => {
      const userId = requireUser(request)
      const version = await service.publish(
        requireOrganization(request),
        request.params.id,
        { _id: userId },
        request.body.changeLog ?? '',
      )
      reply.code(201)
      return version
    },
  )

  app.post(
    '/api/v1/prompts/:id/save-and-publish',
    {
      preValidation: emptyBodyAsObject,
      schema: {
        params: IdParams,
        body: SaveAndPublishRequest,
        response: { 201: PromptVersion },
      },
    },
    async (request, reply) => {
      // The draft as the server holds it is published: the request carries no content.
      const userId = requireUser(request)
      const version = await service.publish(
        requireOrganization(request),
        request.params.id,
        { _id: userId },
        '',
      )
      reply.code(201)
      return version
    },
  )

  app.delete(
    '/api/v1/prompts/:id/publish',
    { schema: { params: IdParams, querystring: OrgQuery, response: { 200: Prompt } } },
    async (request) => {
      return publicPrompt(await service.unpublish(requireOrganization(request), request.params.id))
    },
  )

  app.get(
    '/api/v1/prompts/:id/versions',
    { schema: { params: IdParams, querystring: ListVersionsQuery, response: { 200: VersionList } } },
    async (request) => {
      const prompt = await service.get(requireOrganization(request), request.params.id)
      const onlyPublished = request.query.published === 'true'
      const versions = await store.listVersions(prompt._id, onlyPublished ? 'publishedAt' : 'version')
      return { versions: onlyPublished ? versions.filter((v) => v.status === 'PUBLISHED') : versions }
    },
  )

  // Declared before /versions/:versionId only for the reader: the router prefers the static segment.
  app.get(
    '/api/v1/prompts/:id/versions/diff',
    { schema: { params: IdParams, querystring: DiffQuery, response: { 200: VersionDiff } } },
    async (request) => {
      return service.diff(
        requireOrganization(request),
        request.params.id,
        request.query.from,
        request.query.to,
      )
    },
  )

  app.get(
    '/api/v1/prompts/:id/versions/:versionId',
    { schema: { params: VersionParams, querystring: OrgQuery, response: { 200: PromptVersion } } },
    async (request) => {
      const prompt = await service.get(requireOrganization(request), request.params.id)
      return service.version(prompt, request.params.versionId)
    },
  )

  app.post(
    '/api/v1/prompts/:id/versions/:versionId/restore',
    {
      preValidation: emptyBodyAsObject,
      schema: { params: VersionParams, body: OrgBody, response: { 200: Prompt } },
    },
    async (request) => {
      const prompt = await service.restore(
        requireOrganization(request),
        request.params.id,
        request.params.versionId,
      )
      return publicPrompt(prompt)
    },
  )
}
