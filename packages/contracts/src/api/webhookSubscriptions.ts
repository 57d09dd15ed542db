import { type Static, Type } from '@sinclair/typebox'
import { ObjectId, PageQuery, Pagination, Timestamp } from '../common.ts'
import { EVENT_TYPES } from '../events.ts'

/**
 * Webhook subscription and delivery shapes (DESIGN section 6) as the public surface shows
 * them. The webhooks branch adds its own `webhooks.ts`; this file has a different name so the
 * two do not clash, and the lead keeps one of each.
 */

const EventType = Type.Union(EVENT_TYPES.map((e) => Type.Literal(e)))
const Events = Type.Array(EventType, { minItems: 1, uniqueItems: true })
const TargetUrl = Type.String({ format: 'uri', pattern: '^https?://', maxLength: 2048 })

export const WebhookSubscription = Type.Object(
  {
    _id: ObjectId,
    organizationId: ObjectId,
    url: Type.String(),
    events: Type.Array(EventType),
    active: Type.Boolean(),
    description: Type.String(),
    /** Why the service turned it off (a 410 from the receiver), when it did. */
    disabledReason: Type.Union([Type.String(), Type.Null()]),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'WebhookSubscription' },
)
export type WebhookSubscription = Static<typeof WebhookSubscription>

/** Returned once, at creation: the only time the signing secret is shown. */
export const CreatedWebhookSubscription = Type.Object(
  { webhook: Type.Ref(WebhookSubscription), secret: Type.String({ pattern: '^whsec_' }) },
  { $id: 'CreatedWebhookSubscription' },
)
export type CreatedWebhookSubscription = Static<typeof CreatedWebhookSubscription>

export const WebhookSubscriptionList = Type.Object(
  { webhooks: Type.Array(Type.Ref(WebhookSubscription)) },
  { $id: 'WebhookSubscriptionList' },
)
export type WebhookSubscriptionList = Static<typeof WebhookSubscriptionList>

export const CreateWebhookRequest = Type.Object(
  {
    url: TargetUrl,
    events: Events,
    active: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { $id: 'CreateWebhookRequest', additionalProperties: false },
)
export type CreateWebhookRequest = Static<typeof CreateWebhookRequest>

export const UpdateWebhookRequest = Type.Object(
  {
    url: Type.Optional(TargetUrl),
    events: Type.Optional(Events),
    active: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.String({ maxLength: 500 })),
  },
  { $id: 'UpdateWebhookRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateWebhookRequest = Static<typeof UpdateWebhookRequest>

export const DeliveryAttempt = Type.Object(
  {
    attempt: Type.Integer({ minimum: 1 }),
    at: Timestamp,
    /** null when no response arrived (refused target, network error, timeout). */
    statusCode: Type.Union([Type.Integer(), Type.Null()]),
    error: Type.Union([Type.String(), Type.Null()]),
    durationMs: Type.Integer(),
  },
  { $id: 'DeliveryAttempt' },
)
export type DeliveryAttempt = Static<typeof DeliveryAttempt>

export const DELIVERY_STATUSES = ['PENDING', 'SUCCEEDED', 'FAILED'] as const

export const WebhookDelivery = Type.Object(
  {
    _id: ObjectId,
    webhookId: ObjectId,
    eventId: Type.String(),
    eventType: Type.String(),
    status: Type.Union(DELIVERY_STATUSES.map((s) => Type.Literal(s))),
    attempts: Type.Array(Type.Ref(DeliveryAttempt)),
    nextAttemptAt: Type.Union([Timestamp, Type.Null()]),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'WebhookDelivery' },
)
export type WebhookDelivery = Static<typeof WebhookDelivery>

export const WebhookDeliveryList = Type.Object(
  { deliveries: Type.Array(Type.Ref(WebhookDelivery)), pagination: Type.Ref(Pagination) },
  { $id: 'WebhookDeliveryList' },
)
export type WebhookDeliveryList = Static<typeof WebhookDeliveryList>

export const WebhookParams = Type.Object(
  { id: ObjectId, webhookId: ObjectId },
  { additionalProperties: false },
)
export const DeliveryParams = Type.Object(
  { id: ObjectId, webhookId: ObjectId, deliveryId: ObjectId },
  { additionalProperties: false },
)
export const DeliveryListQuery = Type.Object(
  {
    ...PageQuery,
    status: Type.Optional(Type.Union(DELIVERY_STATUSES.map((s) => Type.Literal(s)))),
  },
  { additionalProperties: false },
)
