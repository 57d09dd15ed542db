import { Deleted, OrganizationParams } from '../api/index.ts'
import {
  CreatedWebhook,
  CreateWebhookRequest,
  DeliveryParams,
  ListDeliveriesQuery,
  RotateWebhookSecretRequest,
  UpdateWebhookRequest,
  Webhook,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookList,
  WebhookParams,
} from '../webhooks.ts'
import { ORG_PREFIX, keyOrUser, type RouteSpec } from './spec.ts'

/** An organization's webhooks and their deliveries (webhooks). */
export const WEBHOOK_ROUTES = {
  // ---- webhooks

  listWebhooks: {
    method: 'GET',
    path: `${ORG_PREFIX}/webhooks`,
    tag: 'webhooks',
    summary: 'Webhook subscriptions',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: OrganizationParams,
    status: 200,
    response: WebhookList,
    errors: ['FORBIDDEN'],
  },
  createWebhook: {
    method: 'POST',
    path: `${ORG_PREFIX}/webhooks`,
    tag: 'webhooks',
    summary: 'Subscribe an endpoint',
    description:
      'The answer is the only time the signing secret (`whsec_...`) is shown. `events` defaults to every event type; at most 25 ' +
      'subscriptions per organization (409 beyond).',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: OrganizationParams,
    body: CreateWebhookRequest,
    status: 201,
    response: CreatedWebhook,
    errors: ['FORBIDDEN', 'CONFLICT'],
  },
  getWebhook: {
    method: 'GET',
    path: `${ORG_PREFIX}/webhooks/:webhookId`,
    tag: 'webhooks',
    summary: 'One subscription',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: WebhookParams,
    status: 200,
    response: Webhook,
    errors: ['FORBIDDEN'],
  },
  updateWebhook: {
    method: 'PATCH',
    path: `${ORG_PREFIX}/webhooks/:webhookId`,
    tag: 'webhooks',
    summary: 'Change a subscription',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: WebhookParams,
    body: UpdateWebhookRequest,
    status: 200,
    response: Webhook,
    errors: ['FORBIDDEN'],
  },
  deleteWebhook: {
    method: 'DELETE',
    path: `${ORG_PREFIX}/webhooks/:webhookId`,
    tag: 'webhooks',
    summary: 'Delete a subscription',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: WebhookParams,
    status: 200,
    response: Deleted,
    errors: ['FORBIDDEN'],
  },
  rotateWebhookSecret: {
    method: 'POST',
    path: `${ORG_PREFIX}/webhooks/:webhookId/rotate-secret`,
    tag: 'webhooks',
    summary: 'Rotate the signing secret',
    description:
      'Answers a new signing secret (`whsec_...`), shown this once. The previous one keeps signing ' +
      'every delivery beside it for `keepPreviousForSeconds` (default 24 hours, at most 7 days, 0 ' +
      'to drop it at once): both headers then carry two signatures, so a receiver verifies with ' +
      'either secret while it switches. A rotation drops any earlier previous secret. The body ' +
      'may be left out. 409 when another rotation of the same subscription won.',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: WebhookParams,
    body: RotateWebhookSecretRequest,
    status: 200,
    response: CreatedWebhook,
    errors: ['FORBIDDEN', 'CONFLICT'],
  },
  testWebhook: {
    method: 'POST',
    path: `${ORG_PREFIX}/webhooks/:webhookId/test`,
    tag: 'webhooks',
    summary: 'Send a test delivery',
    description:
      'Makes one `webhook.test` attempt now (no retries), also on an inactive subscription, and ' +
      'answers the logged delivery.',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: WebhookParams,
    status: 200,
    response: WebhookDelivery,
    errors: ['FORBIDDEN'],
  },
  listWebhookDeliveries: {
    method: 'GET',
    path: `${ORG_PREFIX}/webhooks/:webhookId/deliveries`,
    tag: 'webhooks',
    summary: 'Deliveries of a subscription, with every attempt',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: WebhookParams,
    query: ListDeliveriesQuery,
    status: 200,
    response: WebhookDeliveryList,
    errors: ['FORBIDDEN'],
  },
  redeliverWebhookDelivery: {
    method: 'POST',
    path: `${ORG_PREFIX}/webhooks/:webhookId/deliveries/:deliveryId/redeliver`,
    tag: 'webhooks',
    summary: 'Deliver an event again',
    description:
      'Queues the same delivery again, due now, with a fresh retry round. 409 when the ' +
      'subscription is inactive or an attempt is in flight.',
    ...keyOrUser('webhooks', 'path', 'organization:write'),
    params: DeliveryParams,
    status: 202,
    response: WebhookDelivery,
    errors: ['FORBIDDEN', 'CONFLICT'],
  },
} as const satisfies Record<string, RouteSpec>
