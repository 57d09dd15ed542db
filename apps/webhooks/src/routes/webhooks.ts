import { API_ROUTES, AppError } from '@pm/contracts'
import { auditContextOf, emptyBodyAsObject, route, type Service } from '@pm/kit'
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

export function webhookRoutes(app: Service, deps: { webhooks: Webhooks }): void {
  const { webhooks } = deps

  route(app, API_ROUTES.listWebhooks, async (request) => {
    const org = requireManager(request, request.params.id)
    return { webhooks: await webhooks.list(org) }
  })

  route(app, API_ROUTES.createWebhook, async (request, reply) => {
    const org = requireManager(request, request.params.id)
    const created = await webhooks.create(org, request.body, auditContextOf(request))
    reply.code(201)
    return created
  })

  route(app, API_ROUTES.getWebhook, async (request) => {
    const org = requireManager(request, request.params.id)
    return webhooks.get(org, request.params.webhookId)
  })

  route(app, API_ROUTES.updateWebhook, async (request) => {
    const org = requireManager(request, request.params.id)
    return webhooks.update(org, request.params.webhookId, request.body, auditContextOf(request))
  })

  route(app, API_ROUTES.deleteWebhook, async (request) => {
    const org = requireManager(request, request.params.id)
    return webhooks.remove(org, request.params.webhookId, auditContextOf(request))
  })

  route(
    app,
    API_ROUTES.rotateWebhookSecret,
    async (request) => {
      const org = requireManager(request, request.params.id)
      return webhooks.rotateSecret(org, request.params.webhookId, request.body, auditContextOf(request))
    },
    { preValidation: emptyBodyAsObject },
  )

  route(app, API_ROUTES.testWebhook, async (request) => {
    const org = requireManager(request, request.params.id)
    return webhooks.testSend(org, request.params.webhookId)
  })

  route(app, API_ROUTES.listWebhookDeliveries, async (request) => {
    const org = requireManager(request, request.params.id)
    return webhooks.listDeliveries(org, request.params.webhookId, request.query)
  })

  route(app, API_ROUTES.redeliverWebhookDelivery, async (request, reply) => {
    const org = requireManager(request, request.params.id)
    const delivery = await webhooks.redeliver(org, request.params.webhookId, request.params.deliveryId)
    reply.code(202)
    return delivery
  })
}
