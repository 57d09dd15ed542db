import { type Static, Type } from '@sinclair/typebox'
import { Nullable, ObjectId, PageQuery, Pagination, Timestamp } from './common.ts'
import { EVENT_TYPES } from './events.ts'

/** Event types a subscription can ask for. */
export const WebhookEventType = Type.Union(
  EVENT_TYPES.map((t) => Type.Literal(t)),
  { $id: 'WebhookEventType' },
)

/**
 * The `type` of the event sent by "test-send": not a subscribable event, so a receiver can
 * tell a test from a real publication without looking at the data.
 */
export const TEST_EVENT_TYPE = 'webhook.test'

export const WEBHOOK_URL_MAX = 2048
export const WebhookUrl = Type.String({ minLength: 1, maxLength: WEBHOOK_URL_MAX, pattern: '^https?://' })

export const Webhook = Type.Object(
  {
    _id: ObjectId,
    organizationId: ObjectId,
    url: Type.String(),
    events: Type.Array(Type.Ref(WebhookEventType)),
    active: Type.Boolean(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    /** Set when the service turned the subscription off (a receiver answered 410 Gone). */
    disabledAt: Nullable(Timestamp),
    disabledReason: Nullable(Type.String()),
    /**
     * After a rotation that kept the previous signing secret: until when deliveries are signed
     * with both (the current one first). null when one secret signs.
     */
    previousSecretExpiresAt: Nullable(Timestamp),
  },
  { $id: 'Webhook' },
)
export type Webhook = Static<typeof Webhook>

export const CreateWebhookRequest = Type.Object(
  {
    url: WebhookUrl,
    /** Defaults to `["version.published"]`. */
    events: Type.Optional(Type.Array(Type.Ref(WebhookEventType), { minItems: 1, uniqueItems: true })),
    active: Type.Optional(Type.Boolean()),
  },
  { $id: 'CreateWebhookRequest', additionalProperties: false },
)
export type CreateWebhookRequest = Static<typeof CreateWebhookRequest>

export const UpdateWebhookRequest = Type.Object(
  {
    url: Type.Optional(WebhookUrl),
    events: Type.Optional(Type.Array(Type.Ref(WebhookEventType), { minItems: 1, uniqueItems: true })),
    active: Type.Optional(Type.Boolean()),
  },
  { $id: 'UpdateWebhookRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateWebhookRequest = Static<typeof UpdateWebhookRequest>

/** The longest a rotated-out secret may keep signing beside the new one: 7 days. */
export const WEBHOOK_SECRET_OVERLAP_MAX_SECONDS = 7 * 24 * 3600
/** How long it does when the request does not say: 24 hours. */
export const WEBHOOK_SECRET_OVERLAP_DEFAULT_SECONDS = 24 * 3600

export const RotateWebhookSecretRequest = Type.Object(
  {
    /**
     * How long the previous secret keeps signing deliveries beside the new one, so receivers can
     * switch without refusing any; 0 drops it at once (a leaked secret). Default 86400 (24 h).
     */
    keepPreviousForSeconds: Type.Optional(
      Type.Integer({ minimum: 0, maximum: WEBHOOK_SECRET_OVERLAP_MAX_SECONDS }),
    ),
  },
  { $id: 'RotateWebhookSecretRequest', additionalProperties: false },
)
export type RotateWebhookSecretRequest = Static<typeof RotateWebhookSecretRequest>

/** Returned once, at creation or rotation: the only time the signing secret is shown. */
export const CreatedWebhook = Type.Object(
  { webhook: Type.Ref(Webhook), secret: Type.String({ pattern: '^whsec_' }) },
  { $id: 'CreatedWebhook' },
)
export type CreatedWebhook = Static<typeof CreatedWebhook>

export const WebhookList = Type.Object({ webhooks: Type.Array(Type.Ref(Webhook)) }, { $id: 'WebhookList' })
export type WebhookList = Static<typeof WebhookList>

export const DELIVERY_STATUSES = ['PENDING', 'DELIVERED', 'FAILED'] as const
export type DeliveryStatus = (typeof DELIVERY_STATUSES)[number]

export const WebhookDeliveryAttempt = Type.Object(
  {
    _id: ObjectId,
    /** 1-based and counted over the delivery's whole life, redeliveries included. */
    number: Type.Integer({ minimum: 1 }),
    attemptedAt: Timestamp,
    /** null when no HTTP status arrived: refused target, network error or timeout. */
    statusCode: Nullable(Type.Integer()),
    success: Type.Boolean(),
    durationMs: Type.Integer({ minimum: 0 }),
    /** The start of the receiver's answer, capped (kept for debugging only). */
    responseBody: Type.String(),
    error: Nullable(Type.String()),
  },
  { $id: 'WebhookDeliveryAttempt' },
)
export type WebhookDeliveryAttempt = Static<typeof WebhookDeliveryAttempt>

export const WebhookDelivery = Type.Object(
  {
    /** Also sent as `X-Service-Delivery`. */
    _id: ObjectId,
    webhookId: ObjectId,
    organizationId: ObjectId,
    /** Also sent as `webhook-id`: the same across retries and redeliveries. */
    eventId: Type.String(),
    eventType: Type.String(),
    status: Type.Union(DELIVERY_STATUSES.map((s) => Type.Literal(s))),
    attemptCount: Type.Integer({ minimum: 0 }),
    /** When the next attempt is due; null once the delivery is DELIVERED or FAILED. */
    nextAttemptAt: Nullable(Timestamp),
    lastStatusCode: Nullable(Type.Integer()),
    lastError: Nullable(Type.String()),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    deliveredAt: Nullable(Timestamp),
    /** The event exactly as it was (and will be) sent. */
    payload: Type.Unknown(),
    attempts: Type.Array(Type.Ref(WebhookDeliveryAttempt)),
  },
  { $id: 'WebhookDelivery' },
)
export type WebhookDelivery = Static<typeof WebhookDelivery>

export const WebhookDeliveryList = Type.Object(
  { deliveries: Type.Array(Type.Ref(WebhookDelivery)), pagination: Type.Ref(Pagination) },
  { $id: 'WebhookDeliveryList' },
)
export type WebhookDeliveryList = Static<typeof WebhookDeliveryList>

export const ListDeliveriesQuery = Type.Object(
  {
    ...PageQuery,
    status: Type.Optional(Type.Union(DELIVERY_STATUSES.map((s) => Type.Literal(s)))),
  },
  { $id: 'ListDeliveriesQuery', additionalProperties: false },
)
export type ListDeliveriesQuery = Static<typeof ListDeliveriesQuery>

export const WebhookParams = Type.Object(
  { id: ObjectId, webhookId: ObjectId },
  { additionalProperties: false },
)
export const DeliveryParams = Type.Object(
  { id: ObjectId, webhookId: ObjectId, deliveryId: ObjectId },
  { additionalProperties: false },
)
