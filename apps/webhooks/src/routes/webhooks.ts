import {
  AppError,
  CreatedWebhook,
  CreateWebhookRequest,
  DeliveryParams,
  IdParams,
  ListDeliveriesQuery,
  ObjectId,
  UpdateWebhookRequest,
  Webhook,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookList,
  WebhookParams,
} from '@pm/contracts'
import type { Service } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import type { FastifyRequest } from 'fastify'
import type { Webhooks } from '../webhooks.ts'

/**
 * Webhook management: a user who is ADMIN or OWNER of the organization, or an API key with
 * organization:write. The gateway has already checked that the caller acts in `:id` (and the
 * key's scope); this repeats what it can, so the service holds its own line.
 */
function requireManager(request: FastifyRequest, organizationId: string): string {
  const { caller } = request
  if (caller.organizationId !== organizationId) throw new AppError('NOT_FOUND', 'organization not found')
  if (caller.kind === 'user') {
    if (caller.role !== 'OWNER' && caller.role !== 'ADMIN') {
      throw new AppError('FORBIDDEN', 'only an ADMIN or OWNER of the organization may manage webhooks')
    }
    return organizationId
  }
  if (caller.kind === 'apiKey') {
    if (!caller.scopes.includes('organization:write')) {
      throw new AppError('INSUFFICIENT_SCOPE', 'this API key needs the organization:write scope')
    }
    return organizationId
  }
  throw new AppError('FORBIDDEN', 'webhooks are managed by organization admins and API keys')
}

const Deleted = Type.Object({ _id: ObjectId, deleted: Type.Literal(true) })

export function webhookRoutes(app: Service, deps: { webhooks: Webhooks }): void {
  const { webhooks } = deps
  const base = '/api/v1/organizations/:id/webhooks'

  app.get(base, { schema: { params: IdParams, response: { 200: WebhookList } } }, async (request) => {
    const org = requireManager(request, request.params.id)
    return { webhooks: await webhooks.list(org) }
  })

  app.post(
    base,
    { schema: { params: IdParams, body: CreateWebhookRequest, response: { 201: CreatedWebhook } } },
    async (request, reply) => {
      const org = requireManager(request, request.params.id)
      const created = await webhooks.create(org, request.body)
      reply.code(201)
      return created
    },
  )

  app.get(
    `${base}/:webhookId`,
    { schema: { params: WebhookParams, response: { 200: Webhook } } },
    async (request) => {
      const org = requireManager(request, request.params.id)
      return webhooks.get(org, request.params.webhookId)
    },
  )

  app.patch(
    `${base}/:webhookId`,
    { schema: { params: WebhookParams, body: UpdateWebhookRequest, response: { 200: Webhook } } },
    async (request) => {
      const org = requireManager(request, request.params.id)
      return webhooks.update(org, request.params.webhookId, request.body)
    },
  )

  app.delete(
    `${base}/:webhookId`,
    { schema: { params: WebhookParams, response: { 200: Deleted } } },
    async (request) => {
      const org = requireManager(request, request.params.id)
      return webhooks.remove(org, request.params.webhookId)
    },
  )

  app.post(
    `${base}/:webhookId/test`,
    { schema: { params: WebhookParams, response: { 200: WebhookDelivery } } },
    async (request) => {
      const org = requireManager(request, request.params.id)
      return webhooks.testSend(org, request.params.webhookId)
    },
  )

  app.get(
    `${base}/:webhookId/deliveries`,
    {
      schema: {
        params: WebhookParams,
        querystring: ListDeliveriesQuery,
        response: { 200: WebhookDeliveryList },
      },
    },
    async (request) => {
      const org = requireManager(request, request.params.id)
      return webhooks.listDeliveries(org, request.params.webhookId, request.query)
    },
  )

  app.post(
    `${base}/:webhookId/deliveries/:deliveryId/redeliver`,
    { schema: { params: DeliveryParams, response: { 202: WebhookDelivery } } },
    async (request, reply) => {
      const org = requireManager(request, request.params.id)
      const delivery = await webhooks.redeliver(org, request.params.webhookId, request.params.deliveryId)
      reply.code(202)
      return delivery
    },
  )
}
