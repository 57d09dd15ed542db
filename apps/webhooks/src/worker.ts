import { randomBytes } from 'node:crypto'
import { backgroundRunner, type Metrics, newId, type SecretBox, type Tracing } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { sendDelivery } from './services/deliver.ts'
import { decideOutcome, GONE_REASON } from './domain/outcome.ts'
import { previousSecretUntil, signDelivery } from './domain/signature.ts'
import type { HostLookup } from './services/ssrf.ts'
import type { AttemptRecord, DeliveryRecord, SubscriptionRecord, WebhookStore } from './store/types.ts'

export const USER_AGENT = 'pm-webhooks/1'
const MAX_RESPONSE_BYTES = 4096
export const DISABLED_REASON = 'the webhook is disabled'
/** The error of an attempt stop() cut short; the delivery is due again at once. */
export const INTERRUPTED_REASON = 'interrupted by shutdown'

export interface WorkerOptions {
  store: WebhookStore
  /** Opens a subscription's signing secret for the moment of signing. */
  secrets: SecretBox
  log: FastifyBaseLogger
  allowPrivate: boolean
  timeoutMs: number
  retryScale: number
  pollMs: number
  concurrency: number
  /**
   * Deliveries of one organization in flight in this process at most (WEBHOOK_MAX_IN_FLIGHT_PER_ORG):
   * receivers that never answer hold their slots until the attempt's timeout, and without a share
   * one tenant's could hold all `concurrency` of them. Unset: no share.
   */
  maxPerOrganization?: number
  /** Host name resolver (tests stand in for DNS); the system's by default. */
  lookup?: HostLookup
  /** Attempts and finished deliveries are counted here when given. */
  metrics?: Metrics
  /** Each attempt is a span (webhooks.deliver) when given. */
  tracing?: Tracing
  /**
   * How often previous signing secrets whose overlap has ended are dropped from the store
   * (WebhookStore.dropExpiredPreviousSecrets); also once at start. Default a minute.
   */
  secretSweepMs?: number
}

const SECRET_SWEEP_MS = 60_000

const iso = (ms: number) => new Date(ms).toISOString()
const newToken = () => randomBytes(12).toString('hex')

function countAttempt(metrics: Metrics, status: DeliveryRecord['status'], attempts: number): void {
  const outcome = status === 'DELIVERED' ? 'delivered' : status === 'FAILED' ? 'failed' : 'retry'
  metrics.webhookAttempts.inc({ outcome })
  if (outcome !== 'retry') metrics.webhookDeliveries.observe({ outcome }, attempts)
}

/**
 * Sends due deliveries. The store is the queue: the worker claims due PENDING deliveries with
 * a lease (a conditional update, so replicas never claim the same one), attempts each, and
 * records the attempt and the next due time in one step. Nothing is held only in memory, so a
 * restart resumes every pending retry; a crash in the middle of an attempt leaves a lease that
 * expires, and the attempt is made again (at least once; receivers dedupe on `webhook-id`).
 * It polls every `pollMs`, and is woken early by new work and by retries due sooner.
 */
export class DeliveryWorker {
  private readonly opts: WorkerOptions
  /** Longer than any attempt can take, so a live worker never loses its lease. */
  readonly leaseMs: number
  private running = false
  private ticking = false
  private again = false
  private pollTimer: NodeJS.Timeout | undefined
  private sweepTimer: NodeJS.Timeout | undefined
  /** The sweep of expired previous secrets in flight, which stop() waits for. */
  private sweeping: Promise<void> | undefined
  private readonly wakeTimers = new Set<NodeJS.Timeout>()
  private readonly inFlight = new Set<Promise<void>>()
  /** Deliveries in flight by organization (maxPerOrganization). */
  private readonly orgInFlight = new Map<string, number>()
  /** Aborted by stop(): ends the attempts in flight (test-sends too) instead of waiting for them. */
  private shutdown = new AbortController()

  private readonly background = backgroundRunner()

  constructor(opts: WorkerOptions) {
    this.opts = opts
    this.leaseMs = opts.timeoutMs + 30_000
  }

  start(): void {
    if (this.running) return
    this.running = true
    if (this.shutdown.signal.aborted) this.shutdown = new AbortController()
    this.pollTimer = setInterval(() => this.kick(), this.opts.pollMs)
    this.sweepTimer = setInterval(() => this.sweepSecrets(), this.opts.secretSweepMs ?? SECRET_SWEEP_MS)
    this.kick()
    this.sweepSecrets()
    // After a restart, a retry due before the first poll is attempted on time.
    this.opts.store.nextDueAt().then(
      (at) => {
        if (at) this.wakeAt(at)
      },
      (err: unknown) => this.opts.log.error({ err }, 'webhook worker could not read the next due time'),
    )
  }

  /**
   * Stops claiming, interrupts the attempts in flight and waits for them to be recorded. An
   * attempt may take WEBHOOK_TIMEOUT_MS (15 s), longer than the process is given to stop
   * (SHUTDOWN_TIMEOUT_MS, 10 s): waiting for it would see the process killed with its lease held
   * and nothing recorded. An interrupted attempt is logged as such and due again at once, so the
   * next start sends it.
   */
  async stop(): Promise<void> {
    this.running = false
    if (this.pollTimer) clearInterval(this.pollTimer)
    if (this.sweepTimer) clearInterval(this.sweepTimer)
    for (const t of this.wakeTimers) clearTimeout(t)
    this.wakeTimers.clear()
    this.shutdown.abort(new Error(INTERRUPTED_REASON))
    await this.sweeping
    while (this.ticking || this.inFlight.size > 0) {
      await Promise.all([...this.inFlight])
      if (this.ticking) await new Promise((r) => setImmediate(r))
    }
  }

  /**
   * Look for due work now (new deliveries, a redelivery, a freed slot). Outside the caller's
   * context: an event's consumer that kicks the worker does not carry its claims and attempts.
   */
  kick(): void {
    this.background(() => this.kickHere())
  }

  private kickHere(): void {
    if (!this.running) return
    if (this.ticking) {
      this.again = true
      return
    }
    void this.tick()
  }

  private wakeAt(atIso: string): void {
    const delay = Date.parse(atIso) - Date.now()
    if (!this.running || delay >= this.opts.pollMs) return
    const timer = setTimeout(
      () => {
        this.wakeTimers.delete(timer)
        this.kick()
      },
      Math.max(0, delay),
    )
    this.wakeTimers.add(timer)
  }

  /**
   * Drops the previous secrets that sign no more. Every replica sweeps; the update is
   * idempotent, so two at once drop each secret once between them. Outside any caller's context.
   */
  private sweepSecrets(): void {
    this.background(() => {
      if (!this.running || this.sweeping) return
      this.sweeping = this.opts.store
        .dropExpiredPreviousSecrets(iso(Date.now()))
        .then(
          (dropped) => {
            if (dropped > 0)
              this.opts.log.info({ dropped }, 'dropped previous webhook secrets past their overlap')
          },
          (err: unknown) =>
            this.opts.log.error({ err }, 'webhook worker could not drop expired previous secrets'),
        )
        .finally(() => {
          this.sweeping = undefined
        })
    })
  }

  private async tick(): Promise<void> {
    this.ticking = true
    try {
      do {
        this.again = false
        const free = this.opts.concurrency - this.inFlight.size
        if (free <= 0) break
        const now = Date.now()
        const token = newToken()
        const { maxPerOrganization: max } = this.opts
        const share = max === undefined ? undefined : { max, inFlight: this.orgInFlight }
        const claimed = await this.opts.store.claimDue(iso(now), free, token, iso(now + this.leaseMs), share)
        for (const delivery of claimed) this.track(this.process(delivery, token), delivery.organizationId)
        // A full batch means there may be more due: look again once slots free up.
        if (claimed.length === free) this.again = true
      } while (this.again && this.running && this.inFlight.size < this.opts.concurrency)
    } catch (err) {
      this.opts.log.error({ err }, 'webhook worker could not claim deliveries')
    } finally {
      this.ticking = false
    }
  }

  private track(work: Promise<void>, organizationId: string): void {
    this.inFlight.add(work)
    this.orgInFlight.set(organizationId, (this.orgInFlight.get(organizationId) ?? 0) + 1)
    void work.finally(() => {
      this.inFlight.delete(work)
      const left = (this.orgInFlight.get(organizationId) ?? 1) - 1
      if (left > 0) this.orgInFlight.set(organizationId, left)
      else this.orgInFlight.delete(organizationId)
      this.kick()
    })
  }

  private async process(delivery: DeliveryRecord, token: string): Promise<void> {
    try {
      if (!this.running) {
        // Claimed as stop() began: not attempted, its lease freed for the next start.
        await this.opts.store.recordAttempt(delivery._id, token, null, {
          status: delivery.status,
          attemptCount: delivery.attemptCount,
          nextAttemptAt: delivery.nextAttemptAt,
          lastStatusCode: delivery.lastStatusCode,
          lastError: delivery.lastError,
          deliveredAt: delivery.deliveredAt,
          updatedAt: new Date().toISOString(),
        })
        return
      }
      const sub = await this.opts.store.getSubscriptionById(delivery.subscriptionId)
      if (!sub?.active) {
        // Deleted (its deliveries go with it) or switched off since the delivery was queued.
        await this.opts.store.recordAttempt(delivery._id, token, null, {
          status: 'FAILED',
          attemptCount: delivery.attemptCount,
          nextAttemptAt: null,
          lastStatusCode: delivery.lastStatusCode,
          lastError: DISABLED_REASON,
          deliveredAt: null,
          updatedAt: new Date().toISOString(),
        })
        return
      }
      await this.attempt(delivery, sub, token, { retries: true })
    } catch (err) {
      // The lease runs out and the delivery is attempted again.
      this.opts.log.error({ err, deliveryId: delivery._id }, 'webhook delivery failed unexpectedly')
    }
  }

  /**
   * One attempt of a delivery whose lease `token` holds: sign, send, record. Also used by
   * test-send (`retries: false`: one attempt, whatever its result).
   */
  attempt(
    delivery: DeliveryRecord,
    sub: SubscriptionRecord,
    token: string,
    opts: { retries: boolean },
  ): Promise<void> {
    const { tracing } = this.opts
    if (!tracing) return this.send(delivery, sub, token, opts)
    // The worker's attempts run in no request's or event's context (kick): each is a trace of its
    // own, as this service's sampler decides. A test-send runs in its request and continues that
    // request's trace, if any.
    return tracing.span('webhooks.deliver', () => this.send(delivery, sub, token, opts), {
      kind: 'client',
      root: opts.retries,
      attributes: {
        'pm.delivery.id': delivery._id,
        'pm.webhook.id': sub._id,
        'pm.delivery.attempt': delivery.attemptCount + 1,
      },
    })
  }

  private async send(
    delivery: DeliveryRecord,
    sub: SubscriptionRecord,
    token: string,
    opts: { retries: boolean },
  ): Promise<void> {
    const { store, log } = this.opts
    const started = Date.now()
    const previousUntil = previousSecretUntil(sub, new Date(started).toISOString())
    const headers = {
      ...signDelivery({
        secret: this.opts.secrets.open(sub.secret, sub._id),
        ...(previousUntil !== null && sub.previousSecret
          ? { previousSecret: this.opts.secrets.open(sub.previousSecret, sub._id) }
          : {}),
        eventId: delivery.eventId,
        body: delivery.body,
        timestampSeconds: Math.floor(started / 1000),
      }),
      'X-Service-Event': delivery.eventType,
      'X-Service-Delivery': delivery._id,
      'user-agent': USER_AGENT,
    }
    const result = await sendDelivery({
      url: sub.url,
      body: delivery.body,
      headers,
      allowPrivate: this.opts.allowPrivate,
      timeoutMs: this.opts.timeoutMs,
      signal: this.shutdown.signal,
      maxResponseBytes: MAX_RESPONSE_BYTES,
      ...(this.opts.lookup ? { lookup: this.opts.lookup } : {}),
    })
    const now = Date.now()
    const decision = decideOutcome(delivery, result, now, {
      retries: opts.retries,
      scale: this.opts.retryScale,
    })
    const attempt: AttemptRecord = {
      _id: newId(),
      deliveryId: delivery._id,
      subscriptionId: delivery.subscriptionId,
      number: decision.attemptCount,
      attemptedAt: iso(started),
      statusCode: result.status,
      success: decision.success,
      durationMs: result.durationMs,
      responseBody: result.responseBody,
      error: result.error ?? null,
    }
    const applied = await store.recordAttempt(delivery._id, token, attempt, {
      status: decision.status,
      attemptCount: decision.attemptCount,
      nextAttemptAt: decision.nextAttemptAt,
      lastStatusCode: decision.lastStatusCode,
      lastError: decision.lastError,
      deliveredAt: decision.deliveredAt,
      updatedAt: iso(now),
    })
    log.info(
      {
        deliveryId: delivery._id,
        webhookId: sub._id,
        eventId: delivery.eventId,
        attempt: decision.attemptCount,
        statusCode: result.status,
        outcome: decision.status,
        nextAttemptAt: decision.nextAttemptAt,
        error: result.error,
      },
      'webhook attempt',
    )
    if (!applied) log.warn({ deliveryId: delivery._id }, 'webhook delivery lease lost; outcome not applied')
    else if (this.opts.metrics) countAttempt(this.opts.metrics, decision.status, decision.attemptCount)
    if (result.status === 410 && !decision.disable) {
      log.info(
        { webhookId: sub._id },
        'webhook test-send answered 410 Gone; the subscription is left as it is',
      )
    }
    if (decision.disable) {
      // Only while it still sends to the URL that answered 410 and is on: a new URL, or a switch
      // made while the attempt was out, stands.
      const disabled = await store.updateSubscription(
        sub.organizationId,
        sub._id,
        { active: false, disabledAt: iso(now), disabledReason: GONE_REASON, updatedAt: iso(now) },
        [],
        { url: sub.url, active: true },
      )
      if (disabled) {
        await store.failPending(sub._id, `${DISABLED_REASON} (${GONE_REASON})`, iso(now))
        log.warn({ webhookId: sub._id }, 'webhook disabled: the receiver answered 410 Gone')
      } else {
        log.info({ webhookId: sub._id }, 'webhook answered 410 Gone but changed meanwhile; left as it is')
      }
    }
    if (decision.nextAttemptAt) this.wakeAt(decision.nextAttemptAt)
  }

  /** A fresh lease for a delivery created already claimed (test-send). */
  newLease(nowMs: number): { token: string; leaseUntil: string } {
    return { token: newToken(), leaseUntil: iso(nowMs + this.leaseMs) }
  }
}
