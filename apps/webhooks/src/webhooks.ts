import {
  AppError,
  type CreatedWebhook,
  type CreateWebhookRequest,
  DEFAULT_EVENT_TYPES,
  WEBHOOK_SECRET_OVERLAP_DEFAULT_SECONDS,
  type DeliveryStatus,
  isEventType,
  pagination,
  type RotateWebhookSecretRequest,
  type ServiceEvent,
  TEST_EVENT_TYPE,
  type UpdateWebhookRequest,
  type Webhook,
  type WebhookDelivery,
  type WebhookDeliveryList,
} from '@pm/contracts'
import { type AuditContext, auditEntry, newId, type SecretBox } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { generateSecret, previousSecretUntil } from './domain/signature.ts'
import { checkTargetUrl, type HostLookup, SsrfError } from './services/ssrf.ts'
import type { AttemptRecord, DeliveryRecord, SubscriptionRecord, WebhookStore } from './store/types.ts'
import { DISABLED_REASON, type DeliveryWorker } from './worker.ts'

/** How far the prompts service's clock may be behind ours when comparing event and subscription times. */
export const CLOCK_SKEW_MS = 5 * 60_000

export interface WebhooksOptions {
  store: WebhookStore
  /** Seals each new signing secret, bound to its subscription, before it is stored. */
  secrets: SecretBox
  worker: DeliveryWorker
  log: FastifyBaseLogger
  allowPrivate: boolean
  maxPerOrganization: number
  lookup?: HostLookup
  /** Told when audit entries were written (the relay publishes them at once). */
  onAudit?: () => void
}

/**
 * How a subscription's target is named in the audit log: its host only. A receiver's path or
 * query often carries a token of its own (chat and CI hooks), which the log must not spread.
 */
function targetOf(url: string): string {
  try {
    return new URL(url).host
  } catch {
    return 'an invalid URL'
  }
}

export function publicWebhook(sub: SubscriptionRecord): Webhook {
  return {
    _id: sub._id,
    organizationId: sub.organizationId,
    url: sub.url,
    events: sub.events as Webhook['events'],
    active: sub.active,
    createdAt: sub.createdAt,
    updatedAt: sub.updatedAt,
    disabledAt: sub.disabledAt,
    disabledReason: sub.disabledReason,
    previousSecretExpiresAt: previousSecretUntil(sub, new Date().toISOString()),
  }
}

export function publicDelivery(d: DeliveryRecord, attempts: AttemptRecord[]): WebhookDelivery {
  return {
    _id: d._id,
    webhookId: d.subscriptionId,
    organizationId: d.organizationId,
    eventId: d.eventId,
    eventType: d.eventType,
    status: d.status,
    attemptCount: d.attemptCount,
    nextAttemptAt: d.nextAttemptAt,
    lastStatusCode: d.lastStatusCode,
    lastError: d.lastError,
    createdAt: d.createdAt,
    updatedAt: d.updatedAt,
    deliveredAt: d.deliveredAt,
    payload: JSON.parse(d.body) as unknown,
    attempts: attempts
      .filter((a) => a.deliveryId === d._id)
      .map((a) => ({
        _id: a._id,
        number: a.number,
        attemptedAt: a.attemptedAt,
        statusCode: a.statusCode,
        success: a.success,
        durationMs: a.durationMs,
        responseBody: a.responseBody,
        error: a.error,
      })),
  }
}

/** Enough of the event to route it; anything else about it is passed on as it came. */
export function isServiceEvent(data: unknown): data is ServiceEvent {
  if (typeof data !== 'object' || data === null) return false
  const e = data as Record<string, unknown>
  return (
    typeof e.id === 'string' &&
    e.id.length > 0 &&
    isEventType(e.type) &&
    typeof e.organizationId === 'string' &&
    typeof e.data === 'object' &&
    e.data !== null
  )
}

function newDelivery(
  sub: SubscriptionRecord,
  eventId: string,
  eventType: string,
  body: string,
  now: string,
  lease: { token: string; leaseUntil: string } | null,
): DeliveryRecord {
  return {
    _id: newId(),
    organizationId: sub.organizationId,
    subscriptionId: sub._id,
    eventId,
    eventType,
    body,
    status: 'PENDING',
    attemptCount: 0,
    roundStart: 0,
    nextAttemptAt: now,
    leaseToken: lease?.token ?? null,
    leaseUntil: lease?.leaseUntil ?? null,
    lastStatusCode: null,
    lastError: null,
    createdAt: now,
    updatedAt: now,
    deliveredAt: null,
  }
}

/** Subscriptions, the deliveries of events to them, and the operator's tools (test-send, redeliver). */
export class Webhooks {
  private readonly opts: WebhooksOptions

  constructor(opts: WebhooksOptions) {
    this.opts = opts
  }

  /**
   * Refuses, at registration, a URL that already points at a non-public address. The check
   * that matters runs again before every attempt (DNS answers change); a host that does not
   * resolve yet is accepted and simply fails its attempts until it does.
   */
  private async checkUrl(url: string): Promise<void> {
    try {
      await checkTargetUrl(url, {
        allowPrivate: this.opts.allowPrivate,
        ...(this.opts.lookup ? { lookup: this.opts.lookup } : {}),
      })
    } catch (err) {
      if (!(err instanceof SsrfError) || err.reason === 'unresolvable_host') return
      throw new AppError('VALIDATION_ERROR', `url is not allowed: ${err.message}`, [
        { path: 'body/url', message: err.message },
      ])
    }
  }

  private async subscription(organizationId: string, id: string): Promise<SubscriptionRecord> {
    const sub = await this.opts.store.getSubscription(organizationId, id)
    if (!sub) throw new AppError('NOT_FOUND', 'webhook not found')
    return sub
  }

  /** The change's entry, or none without a context (DESIGN section 15). */
  private audit(
    ctx: AuditContext | undefined,
    organizationId: string,
    action: 'webhook.created' | 'webhook.updated' | 'webhook.deleted' | 'webhook.secret_rotated',
    id: string,
    summary: string,
  ) {
    return ctx ? [auditEntry(ctx, organizationId, action, { type: 'webhook', id }, summary)] : []
  }

  private audited(entries: unknown[]): void {
    if (entries.length > 0) this.opts.onAudit?.()
  }

  async create(
    organizationId: string,
    input: CreateWebhookRequest,
    audit?: AuditContext,
  ): Promise<CreatedWebhook> {
    await this.checkUrl(input.url)
    const { store, maxPerOrganization } = this.opts
    const now = new Date().toISOString()
    const secret = generateSecret()
    const id = newId()
    const sub: SubscriptionRecord = {
      _id: id,
      organizationId,
      url: input.url,
      events: input.events ?? [...DEFAULT_EVENT_TYPES],
      active: input.active ?? true,
      secret: this.opts.secrets.seal(secret, id),
      previousSecret: null,
      previousSecretExpiresAt: null,
      createdAt: now,
      updatedAt: now,
      disabledAt: null,
      disabledReason: null,
    }
    const entries = this.audit(
      audit,
      organizationId,
      'webhook.created',
      id,
      `created a webhook to ${targetOf(sub.url)} for ${sub.events.join(', ')}${sub.active ? '' : ' (inactive)'}`,
    )
    // The bound is checked in the insert's own transaction: creates at once do not pass it together.
    if (!(await store.createSubscription(sub, entries, maxPerOrganization))) {
      throw new AppError(
        'CONFLICT',
        `an organization can have at most ${maxPerOrganization} webhooks; delete one first`,
      )
    }
    this.audited(entries)
    this.opts.log.info({ webhookId: sub._id, organizationId }, 'webhook created')
    return { webhook: publicWebhook(sub), secret }
  }

  async list(organizationId: string): Promise<Webhook[]> {
    return (await this.opts.store.listSubscriptions(organizationId)).map(publicWebhook)
  }

  async get(organizationId: string, id: string): Promise<Webhook> {
    return publicWebhook(await this.subscription(organizationId, id))
  }

  async update(
    organizationId: string,
    id: string,
    input: UpdateWebhookRequest,
    audit?: AuditContext,
  ): Promise<Webhook> {
    const current = await this.subscription(organizationId, id)
    if (input.url !== undefined) await this.checkUrl(input.url)
    const now = new Date().toISOString()
    const said: string[] = []
    if (input.url !== undefined) said.push(`target ${targetOf(input.url)}`)
    if (input.events !== undefined) said.push(`events ${input.events.join(', ')}`)
    if (input.active !== undefined) said.push(input.active ? 'activated' : 'deactivated')
    const entries = this.audit(
      audit,
      organizationId,
      'webhook.updated',
      id,
      `updated the webhook to ${targetOf(current.url)}: ${said.join('; ')}`,
    )
    const updated = await this.opts.store.updateSubscription(
      organizationId,
      id,
      {
        ...(input.url !== undefined ? { url: input.url } : {}),
        ...(input.events !== undefined ? { events: input.events } : {}),
        ...(input.active !== undefined ? { active: input.active } : {}),
        // Switched on: no reason it was switched off stays, whatever `current` said (the worker
        // may have switched it off after it was read).
        ...(input.active === true ? { disabledAt: null, disabledReason: null } : {}),
        updatedAt: now,
      },
      entries,
    )
    if (!updated) throw new AppError('NOT_FOUND', 'webhook not found')
    this.audited(entries)
    // A switched-off subscription receives nothing, queued retries included.
    if (input.active === false && current.active) await this.opts.store.failPending(id, DISABLED_REASON, now)
    return publicWebhook(updated)
  }

  /**
   * A new signing secret, answered this once. The one before keeps signing beside it for
   * `keepPreviousForSeconds` (default 24 h; 0 drops it at once); an older previous one is
   * dropped. Of two rotations at once one wins and the other is a 409: each would hand out a
   * secret, and only one can be the subscription's.
   */
  async rotateSecret(
    organizationId: string,
    id: string,
    input: RotateWebhookSecretRequest,
    audit?: AuditContext,
  ): Promise<CreatedWebhook> {
    const current = await this.subscription(organizationId, id)
    const keep = input.keepPreviousForSeconds ?? WEBHOOK_SECRET_OVERLAP_DEFAULT_SECONDS
    const nowMs = Date.now()
    const secret = generateSecret()
    const until = keep > 0 ? new Date(nowMs + keep * 1000).toISOString() : null
    const entries = this.audit(
      audit,
      organizationId,
      'webhook.secret_rotated',
      id,
      `rotated the signing secret of the webhook to ${targetOf(current.url)}; ${
        until === null ? 'the previous secret signs no more' : `the previous secret also signs until ${until}`
      }`,
    )
    const rotated = await this.opts.store.rotateSecret(
      organizationId,
      id,
      current.secret,
      {
        // Sealed bound to the subscription like the current one, so the sealed value moves as it is.
        secret: this.opts.secrets.seal(secret, id),
        previousSecret: until === null ? null : current.secret,
        previousSecretExpiresAt: until,
        updatedAt: new Date(nowMs).toISOString(),
      },
      entries,
    )
    if (!rotated) {
      await this.subscription(organizationId, id)
      throw new AppError('CONFLICT', 'the secret was rotated by another request at the same time; try again')
    }
    this.audited(entries)
    this.opts.log.info({ webhookId: id, organizationId, previousUntil: until }, 'webhook secret rotated')
    return { webhook: publicWebhook(rotated), secret }
  }

  async remove(
    organizationId: string,
    id: string,
    audit?: AuditContext,
  ): Promise<{ _id: string; deleted: true }> {
    const current = await this.subscription(organizationId, id)
    const entries = this.audit(
      audit,
      organizationId,
      'webhook.deleted',
      id,
      `deleted the webhook to ${targetOf(current.url)}`,
    )
    if (!(await this.opts.store.deleteSubscription(organizationId, id, entries))) {
      throw new AppError('NOT_FOUND', 'webhook not found')
    }
    this.audited(entries)
    this.opts.log.info({ webhookId: id, organizationId }, 'webhook deleted')
    return { _id: id, deleted: true }
  }

  private async view(d: DeliveryRecord): Promise<WebhookDelivery> {
    return publicDelivery(d, await this.opts.store.listAttempts([d._id]))
  }

  /**
   * Sends a `webhook.test` event now, once, and answers with the logged delivery: a way to
   * check a receiver (its URL, its signature check) before real events arrive. Works on an
   * inactive subscription too, so a receiver can be checked before it is switched on.
   */
  async testSend(organizationId: string, id: string): Promise<WebhookDelivery> {
    const sub = await this.subscription(organizationId, id)
    const { store, worker } = this.opts
    const nowMs = Date.now()
    const now = new Date(nowMs).toISOString()
    const event = {
      id: newId(),
      type: TEST_EVENT_TYPE,
      createdAt: now,
      organizationId,
      data: { webhookId: sub._id, message: 'This is a test delivery.' },
    }
    // Created already leased to this request, so the worker leaves it alone.
    const lease = worker.newLease(nowMs)
    const delivery = newDelivery(sub, event.id, TEST_EVENT_TYPE, JSON.stringify(event), now, lease)
    await store.createDeliveries([delivery])
    await worker.attempt(delivery, sub, lease.token, { retries: false })
    const after = await store.getDelivery(organizationId, sub._id, delivery._id)
    if (!after) throw new AppError('NOT_FOUND', 'webhook not found')
    return this.view(after)
  }

  async listDeliveries(
    organizationId: string,
    id: string,
    query: { page: number; limit: number; status?: DeliveryStatus },
  ): Promise<WebhookDeliveryList> {
    const sub = await this.subscription(organizationId, id)
    const { store } = this.opts
    const { deliveries, total } = await store.listDeliveries(organizationId, sub._id, query.status, query)
    const attempts = await store.listAttempts(deliveries.map((d) => d._id))
    return {
      deliveries: deliveries.map((d) => publicDelivery(d, attempts)),
      pagination: pagination(query.page, query.limit, total),
    }
  }

  /**
   * Queues a delivery again, due now, with a fresh retry schedule; it keeps its id and its
   * attempt log, and receivers see the same `webhook-id`.
   */
  async redeliver(organizationId: string, id: string, deliveryId: string): Promise<WebhookDelivery> {
    const sub = await this.subscription(organizationId, id)
    if (!sub.active)
      throw new AppError('CONFLICT', 'the webhook is disabled; activate it before redelivering')
    const result = await this.opts.store.requeueDelivery(
      organizationId,
      sub._id,
      deliveryId,
      new Date().toISOString(),
    )
    if (result === null) throw new AppError('NOT_FOUND', 'delivery not found')
    if (result === 'leased') throw new AppError('CONFLICT', 'an attempt of this delivery is in progress')
    this.opts.worker.kick()
    return this.view(result)
  }

  /**
   * The durable consumer's handler: one delivery per active subscription that wants the event.
   * Resolving acknowledges the message; a store failure throws and JetStream sends the event
   * again, and the unique (eventId, subscriptionId) index keeps the deliveries made the first
   * time from being made twice.
   */
  async onEvent(data: unknown): Promise<number> {
    if (!isServiceEvent(data)) {
      // Acknowledged anyway: a malformed event would fail the same way forever.
      this.opts.log.warn({ event: data }, 'ignoring a malformed event')
      return 0
    }
    const { store, worker } = this.opts
    const eventAt = Date.parse(data.createdAt)
    // A subscription gets the events that happen once it exists: a replayed stream (a new
    // consumer starts from the beginning) must not flood it with last week's publications.
    const subs = (await store.subscriptionsFor(data.organizationId, data.type)).filter(
      (sub) => Number.isNaN(eventAt) || Date.parse(sub.createdAt) - CLOCK_SKEW_MS <= eventAt,
    )
    if (subs.length === 0) return 0
    const now = new Date().toISOString()
    const body = JSON.stringify(data)
    const created = await store.createDeliveries(
      subs.map((sub) => newDelivery(sub, data.id, data.type, body, now, null)),
    )
    if (created > 0) worker.kick()
    return created
  }
}
