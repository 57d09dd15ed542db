import type { AuditEntry } from '@pm/contracts'
import type { AuditOutbox } from '@pm/kit'
import type { DeliveryStatus } from '@pm/contracts'

export interface SubscriptionRecord {
  _id: string
  organizationId: string
  url: string
  events: string[]
  active: boolean
  /**
   * The signing secret (`whsec_...`) sealed with the service's SecretBox, bound to `_id`
   * (`enc:v1:...`); opened only to sign a delivery. A value from before secrets at rest is
   * clear until the start-up migration (resealSecrets) seals it.
   */
  secret: string
  /**
   * After a rotation that kept it: the secret before, sealed like `secret`, which also signs
   * deliveries until `previousSecretExpiresAt`. null (or absent, in a document written before
   * rotation existed) when one secret signs. Dropped by the next rotation.
   */
  previousSecret?: string | null
  previousSecretExpiresAt?: string | null
  createdAt: string
  updatedAt: string
  disabledAt: string | null
  disabledReason: string | null
}

export type SubscriptionPatch = Partial<
  Pick<SubscriptionRecord, 'url' | 'events' | 'active' | 'disabledAt' | 'disabledReason'>
> & { updatedAt: string }

/** What a rotation writes: the new sealed secret, and the one before it while it keeps signing. */
export interface SecretRotation {
  secret: string
  previousSecret: string | null
  previousSecretExpiresAt: string | null
  updatedAt: string
}

export interface DeliveryRecord {
  _id: string
  organizationId: string
  subscriptionId: string
  eventId: string
  eventType: string
  /** The exact bytes sent at every attempt (the signatures cover them). */
  body: string
  status: DeliveryStatus
  attemptCount: number
  /**
   * attemptCount when the current retry round began (0, or the count at the last
   * redelivery): the retry schedule is indexed by the attempts made since.
   */
  roundStart: number
  /** ISO-8601 (UTC, milliseconds): compared as strings, which orders them in time. */
  nextAttemptAt: string | null
  /** A worker's claim: only the holder of `leaseToken` may record the outcome until `leaseUntil`. */
  leaseToken: string | null
  leaseUntil: string | null
  lastStatusCode: number | null
  lastError: string | null
  createdAt: string
  updatedAt: string
  deliveredAt: string | null
}

export interface AttemptRecord {
  _id: string
  deliveryId: string
  subscriptionId: string
  number: number
  attemptedAt: string
  statusCode: number | null
  success: boolean
  durationMs: number
  responseBody: string
  error: string | null
}

/** What an attempt changes on its delivery. */
export type DeliveryOutcome = Pick<
  DeliveryRecord,
  'status' | 'attemptCount' | 'nextAttemptAt' | 'lastStatusCode' | 'lastError' | 'deliveredAt' | 'updatedAt'
>

export interface Page {
  page: number
  limit: number
}

/** How many deliveries an organization may have in flight, and how many each has now. */
export interface OrganizationShare {
  max: number
  inFlight: ReadonlyMap<string, number>
}

/**
 * The webhooks service's data: subscriptions, deliveries (one per event and subscription,
 * enforced by a unique index) and the attempts of each delivery. Deliveries double as the
 * work queue: a worker claims due ones with a lease, so a restart picks up pending retries
 * and replicas never send the same attempt twice.
 */
export interface WebhookStore extends AuditOutbox {
  /**
   * `audit`: the change's audit entries (DESIGN section 15), written into the audit outbox in the
   * same transaction, and only when the change is made.
   */
  /**
   * With `maxPerOrganization`: false, and nothing written, when the workspace already holds that
   * many subscriptions, counted in the insert's own transaction (creates at once do not pass the
   * bound together).
   */
  createSubscription(
    sub: SubscriptionRecord,
    audit?: AuditEntry[],
    maxPerOrganization?: number,
  ): Promise<boolean>
  getSubscription(organizationId: string, id: string): Promise<SubscriptionRecord | null>
  /** Without a workspace check: for the delivery worker. */
  getSubscriptionById(id: string): Promise<SubscriptionRecord | null>
  /** Oldest first. */
  listSubscriptions(organizationId: string): Promise<SubscriptionRecord[]>
  countSubscriptions(organizationId: string): Promise<number>
  /** Active subscriptions of the workspace that asked for this event type. */
  subscriptionsFor(organizationId: string, eventType: string): Promise<SubscriptionRecord[]>
  /**
   * Null when the subscription is not in the workspace, or, with `expected`, when its `url` or
   * `active` is no longer that (changed since the caller read it: compare-and-set).
   */
  updateSubscription(
    organizationId: string,
    id: string,
    patch: SubscriptionPatch,
    audit?: AuditEntry[],
    expected?: Pick<SubscriptionRecord, 'url' | 'active'>,
  ): Promise<SubscriptionRecord | null>
  /**
   * Replaces the signing secret when it is still `expected` (compare-and-set: of two rotations
   * at once, one wins), with the audit entries in the same write. Null when the subscription is
   * not there or its secret changed meanwhile.
   */
  rotateSecret(
    organizationId: string,
    id: string,
    expected: string,
    next: SecretRotation,
    audit?: AuditEntry[],
  ): Promise<SubscriptionRecord | null>
  /**
   * Forgets every previous signing secret whose overlap ended at or before `now` (ISO-8601): it
   * signs nothing any more, so no copy of it is kept (the delivery worker calls this once a
   * minute). Leaves `updatedAt` and writes no audit entry: nothing a user set changes. Returns
   * how many were dropped.
   */
  dropExpiredPreviousSecrets(now: string): Promise<number>
  /** Removes the subscription with its deliveries and their attempts; false when it was not there. */
  deleteSubscription(organizationId: string, id: string, audit?: AuditEntry[]): Promise<boolean>

  /**
   * Inserts the deliveries whose (eventId, subscriptionId) is new and skips the others, so an
   * event that arrives twice makes no second delivery. Returns how many were inserted.
   */
  createDeliveries(deliveries: DeliveryRecord[]): Promise<number>
  getDelivery(organizationId: string, subscriptionId: string, id: string): Promise<DeliveryRecord | null>
  /** Newest first. */
  listDeliveries(
    organizationId: string,
    subscriptionId: string,
    status: DeliveryStatus | undefined,
    page: Page,
  ): Promise<{ deliveries: DeliveryRecord[]; total: number }>
  /** Attempts of these deliveries, in attempt order. */
  listAttempts(deliveryIds: string[]): Promise<AttemptRecord[]>

  /**
   * Claims up to `limit` PENDING deliveries due at `now` whose lease is free or expired:
   * sets their lease to (`token`, `leaseUntil`) and returns them as claimed, oldest due first.
   * With `perOrganization`, an organization gets at most `max` deliveries in flight, counting
   * the `inFlight` it has already: its other due deliveries are passed over for the next
   * organizations' (one tenant's slow receivers do not take every slot).
   */
  claimDue(
    now: string,
    limit: number,
    token: string,
    leaseUntil: string,
    perOrganization?: OrganizationShare,
  ): Promise<DeliveryRecord[]>
  /** The earliest nextAttemptAt of a PENDING delivery, or null (lets a worker sleep until then). */
  nextDueAt(): Promise<string | null>
  /**
   * Logs the attempt (always: it happened) and, if `token` still holds the lease, applies the
   * outcome and frees the lease. Returns false when the lease had been lost.
   */
  recordAttempt(
    deliveryId: string,
    token: string,
    attempt: AttemptRecord | null,
    outcome: DeliveryOutcome,
  ): Promise<boolean>
  /**
   * Queues a finished or waiting delivery again, due at `now`, starting a new retry round.
   * Null when it does not exist (in this workspace and subscription) or is leased right now.
   */
  requeueDelivery(
    organizationId: string,
    subscriptionId: string,
    id: string,
    now: string,
  ): Promise<DeliveryRecord | 'leased' | null>
  /** Marks the subscription's waiting (unleased) deliveries FAILED with `reason`. Returns how many. */
  failPending(subscriptionId: string, reason: string, now: string): Promise<number>

  /**
   * Rewrites stored secrets: `reseal` gets each subscription's id and stored secret (the current
   * one, and a previous one still kept) and returns the value to store instead, or null to leave
   * it. A subscription whose secrets changed meanwhile is left as it is
   * (compare-and-set). Leaves no earlier value readable in the store's files where the backend
   * allows it. Returns how many were rewritten.
   */
  resealSecrets(reseal: (id: string, stored: string) => string | null): Promise<number>

  check(): Promise<void>
  close(): Promise<void>
}

/**
 * An organization's share of the deliveries in flight while one claim is made: `take` counts one
 * more for it (false when it is at its share), `full` names those at it. Without a share, every
 * delivery is taken.
 */
export function organizationShare(share: OrganizationShare | undefined): {
  take(organizationId: string): boolean
  full(): string[]
} {
  const counts = new Map(share?.inFlight ?? [])
  const full = new Set<string>()
  for (const [org, n] of counts) if (share && n >= share.max) full.add(org)
  return {
    take(organizationId) {
      if (!share) return true
      const n = counts.get(organizationId) ?? 0
      if (n >= share.max) {
        full.add(organizationId)
        return false
      }
      counts.set(organizationId, n + 1)
      if (n + 1 >= share.max) full.add(organizationId)
      return true
    },
    full: () => [...full],
  }
}
