import { createServer, type IncomingMessage, type Server } from 'node:http'
import { mkdtempSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { newId, SecretBox } from '@pm/kit'
import { WebhookReceiver } from '@pm/testkit'
import type { FastifyBaseLogger } from 'fastify'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { generateSecret } from '../src/domain/signature.ts'
import { SqliteWebhookStore } from '../src/store/sqlite.ts'
import type { DeliveryRecord, SubscriptionRecord } from '../src/store/types.ts'
import { Webhooks } from '../src/webhooks.ts'
import { DeliveryWorker, INTERRUPTED_REASON } from '../src/worker.ts'

const quiet = { info: () => {}, warn: () => {}, error: () => {} } as unknown as FastifyBaseLogger

/** An active subscription of a new organization to `url`, its secret sealed by `secrets`. */
function subscriptionTo(url: string, secrets: SecretBox): SubscriptionRecord {
  const now = new Date().toISOString()
  const _id = newId()
  return {
    _id,
    organizationId: newId(),
    url,
    events: ['version.published'],
    active: true,
    secret: secrets.seal(generateSecret(), _id),
    createdAt: now,
    updatedAt: now,
    disabledAt: null,
    disabledReason: null,
  }
}

/** A worker on `store` with four slots, attempts of up to 15 s and no polling to speak of. */
function workerOn(
  store: SqliteWebhookStore,
  secrets: SecretBox,
  extra: Partial<ConstructorParameters<typeof DeliveryWorker>[0]> = {},
): DeliveryWorker {
  return new DeliveryWorker({
    store,
    secrets,
    log: quiet,
    allowPrivate: true,
    timeoutMs: 15_000,
    retryScale: 1,
    pollMs: 60_000,
    concurrency: 4,
    ...extra,
  })
}

/** A PENDING delivery to `sub`, due at `at`, not attempted yet. */
function deliveryTo(
  sub: SubscriptionRecord,
  at: string,
  overrides: Partial<DeliveryRecord> = {},
): DeliveryRecord {
  return {
    _id: newId(),
    organizationId: sub.organizationId,
    subscriptionId: sub._id,
    eventId: newId(),
    eventType: 'version.published',
    body: '{}',
    status: 'PENDING',
    attemptCount: 0,
    roundStart: 0,
    nextAttemptAt: at,
    leaseToken: null,
    leaseUntil: null,
    lastStatusCode: null,
    lastError: null,
    createdAt: at,
    updatedAt: at,
    deliveredAt: null,
    ...overrides,
  }
}

describe('DeliveryWorker.stop', () => {
  // A receiver that reads the request and never answers.
  const arrived: IncomingMessage[] = []
  let server: Server
  let url: string
  beforeAll(async () => {
    server = createServer((req) => {
      arrived.push(req)
      req.resume()
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/hang`
  })
  afterAll(async () => {
    server.closeAllConnections()
    await new Promise<void>((resolve) => server.close(() => resolve()))
  })

  it("keeps one organization's receivers that never answer to its share of the slots", async () => {
    const store = new SqliteWebhookStore(
      join(mkdtempSync(join(tmpdir(), 'pm-webhooks-worker-')), 'webhooks.db'),
    )
    const secrets = new SecretBox(SecretBox.generateKey())
    const healthy = createServer((req, res) => {
      req.resume()
      req.on('end', () => res.end('ok'))
    })
    await new Promise<void>((resolve) => healthy.listen(0, '127.0.0.1', resolve))
    const healthyUrl = `http://127.0.0.1:${(healthy.address() as AddressInfo).port}/in`
    const hanging = subscriptionTo(url, secrets)
    const other = subscriptionTo(healthyUrl, secrets)
    await store.createSubscription(hanging)
    await store.createSubscription(other)
    const before = arrived.length
    // Six of the hanging organization's, due first, then the other organization's one.
    await store.createDeliveries(
      Array.from({ length: 6 }, (_, i) =>
        deliveryTo(hanging, new Date(Date.now() - 10_000 + i).toISOString()),
      ),
    )
    const theirs = deliveryTo(other, new Date(Date.now() - 5_000).toISOString())
    await store.createDeliveries([theirs])
    const worker = workerOn(store, secrets, { maxPerOrganization: 2 })
    try {
      worker.start()
      // Delivered while the hanging receiver holds two slots, not all four.
      await vi.waitFor(
        async () =>
          expect(await store.getDelivery(other.organizationId, other._id, theirs._id)).toMatchObject({
            status: 'DELIVERED',
          }),
        { timeout: 5_000, interval: 20 },
      )
      expect(arrived.length - before).toBe(2)
    } finally {
      await worker.stop()
      await store.close()
      healthy.closeAllConnections()
      healthy.close()
      // The next test counts what reaches the hanging receiver from its own worker.
      arrived.splice(before)
    }
  })

  it('interrupts an attempt in flight, logs it and leaves the delivery due now, unleased', async () => {
    const store = new SqliteWebhookStore(
      join(mkdtempSync(join(tmpdir(), 'pm-webhooks-worker-')), 'webhooks.db'),
    )
    const secrets = new SecretBox(SecretBox.generateKey())
    const now = new Date().toISOString()
    const sub = subscriptionTo(url, secrets)
    await store.createSubscription(sub)
    const delivery = deliveryTo(sub, now)
    await store.createDeliveries([delivery])
    // The defaults' proportions: an attempt may take longer than the process is given to stop.
    const worker = workerOn(store, secrets)
    try {
      worker.start()
      await vi.waitFor(() => expect(arrived).toHaveLength(1), { timeout: 5_000, interval: 20 })
      const stopping = Date.now()
      await worker.stop()
      expect(Date.now() - stopping).toBeLessThan(2_000)

      const after = await store.getDelivery(sub.organizationId, sub._id, delivery._id)
      expect(after).toMatchObject({
        status: 'PENDING',
        attemptCount: 1,
        lastError: INTERRUPTED_REASON,
        leaseToken: null,
        leaseUntil: null,
      })
      expect(Date.parse(after?.nextAttemptAt ?? '')).toBeLessThanOrEqual(Date.now())
      expect(await store.nextDueAt()).toBe(after?.nextAttemptAt)
      const attempts = await store.listAttempts([delivery._id])
      expect(attempts).toMatchObject([
        { number: 1, statusCode: null, success: false, error: INTERRUPTED_REASON },
      ])
      // The next start claims it at once.
      const claimed = await store.claimDue(
        new Date().toISOString(),
        10,
        'next',
        new Date(Date.now() + 60_000).toISOString(),
      )
      expect(claimed.map((d) => d._id)).toEqual([delivery._id])
    } finally {
      await worker.stop()
      await store.close()
    }
  })
})

describe('a 410 Gone and a change of the subscription at once', () => {
  let receiver: WebhookReceiver
  let store: SqliteWebhookStore
  let worker: DeliveryWorker
  let webhooks: Webhooks
  const secrets = new SecretBox(SecretBox.generateKey())
  beforeAll(async () => {
    receiver = await WebhookReceiver.start()
    store = new SqliteWebhookStore(join(mkdtempSync(join(tmpdir(), 'pm-webhooks-gone-')), 'webhooks.db'))
    // Never started: each attempt is made by the test.
    const common = { store, secrets, log: quiet, allowPrivate: true }
    worker = new DeliveryWorker({
      ...common,
      timeoutMs: 5_000,
      retryScale: 1,
      pollMs: 60_000,
      concurrency: 1,
    })
    webhooks = new Webhooks({ ...common, worker, maxPerOrganization: 10 })
  })
  afterAll(async () => {
    await store.close()
    await receiver.close()
  })

  /** An active subscription to `path`, which answers 410, and a delivery to it leased to the test. */
  async function gone(path: string) {
    receiver.script(path, [410])
    const now = new Date().toISOString()
    const sub = subscriptionTo(`${receiver.base}${path}`, secrets)
    await store.createSubscription(sub)
    const lease = worker.newLease(Date.now())
    const delivery = (leased: boolean): DeliveryRecord =>
      deliveryTo(sub, now, leased ? { leaseToken: lease.token, leaseUntil: lease.leaseUntil } : {})
    const attempted = delivery(true)
    const waiting = delivery(false)
    await store.createDeliveries([attempted, waiting])
    return { sub, waiting, attempt: () => worker.attempt(attempted, sub, lease.token, { retries: true }) }
  }

  /** Runs `between` once, at the next updateSubscription, before it writes. */
  function landBetween(between: () => Promise<unknown>) {
    const original = store.updateSubscription.bind(store)
    let pending = true
    const spy = vi.spyOn(store, 'updateSubscription').mockImplementation(async (...args) => {
      if (pending) {
        pending = false
        await between()
      }
      return original(...args)
    })
    return () => spy.mockRestore()
  }

  it('a new URL saved while the attempt was out stays on, its waiting deliveries with it', async () => {
    const { sub, waiting, attempt } = await gone('/gone-moved')
    const url = `${receiver.base}/moved`
    const restore = landBetween(() =>
      store.updateSubscription(sub.organizationId, sub._id, { url, updatedAt: new Date().toISOString() }),
    )
    await attempt()
    restore()
    expect(await store.getSubscription(sub.organizationId, sub._id)).toMatchObject({
      url,
      active: true,
      disabledAt: null,
      disabledReason: null,
    })
    expect(await store.getDelivery(sub.organizationId, sub._id, waiting._id)).toMatchObject({
      status: 'PENDING',
    })
  })

  it('switching on clears the reason of a switch-off the worker made after the switch-on read it', async () => {
    const { sub, waiting, attempt } = await gone('/gone-on')
    const restore = landBetween(attempt)
    const on = await webhooks.update(sub.organizationId, sub._id, { active: true })
    restore()
    expect(on).toMatchObject({ active: true, disabledAt: null, disabledReason: null })
    // The worker did switch it off in between (the URL unchanged): its waiting deliveries failed.
    expect(await store.getDelivery(sub.organizationId, sub._id, waiting._id)).toMatchObject({
      status: 'FAILED',
    })
  })
})
