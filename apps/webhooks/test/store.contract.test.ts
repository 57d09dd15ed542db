import { newId } from '@pm/kit'
import { connectMongo } from '@pm/kit/mongo'
import { storeBackends } from '@pm/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import { MongoWebhookStore } from '../src/store/mongo.ts'
import { SqliteWebhookStore } from '../src/store/sqlite.ts'
import type {
  AttemptRecord,
  DeliveryOutcome,
  DeliveryRecord,
  SubscriptionRecord,
  WebhookStore,
} from '../src/store/types.ts'

const backends = await storeBackends<WebhookStore>({
  sqlite: (file) => new SqliteWebhookStore(file),
  mongo: async (url, db) => {
    const store = new MongoWebhookStore(await connectMongo(url), db)
    await store.init()
    return store
  },
})

const T0 = Date.parse('2030-01-01T00:00:00.000Z')
const at = (offsetMs: number) => new Date(T0 + offsetMs).toISOString()

function subscription(
  organizationId: string,
  overrides: Partial<SubscriptionRecord> = {},
): SubscriptionRecord {
  return {
    _id: newId(),
    organizationId,
    url: 'https://hooks.example.com/in',
    events: ['version.published'],
    active: true,
    secret: 'whsec_c2VjcmV0',
    previousSecret: null,
    previousSecretExpiresAt: null,
    createdAt: at(0),
    updatedAt: at(0),
    disabledAt: null,
    disabledReason: null,
    ...overrides,
  }
}

function delivery(sub: SubscriptionRecord, overrides: Partial<DeliveryRecord> = {}): DeliveryRecord {
  const eventId = newId()
  return {
    _id: newId(),
    organizationId: sub.organizationId,
    subscriptionId: sub._id,
    eventId,
    eventType: 'version.published',
    body: JSON.stringify({ id: eventId }),
    status: 'PENDING',
    attemptCount: 0,
    roundStart: 0,
    nextAttemptAt: at(0),
    leaseToken: null,
    leaseUntil: null,
    lastStatusCode: null,
    lastError: null,
    createdAt: at(0),
    updatedAt: at(0),
    deliveredAt: null,
    ...overrides,
  }
}

function attempt(d: DeliveryRecord, number: number, statusCode: number | null): AttemptRecord {
  return {
    _id: newId(),
    deliveryId: d._id,
    subscriptionId: d.subscriptionId,
    number,
    attemptedAt: at(number),
    statusCode,
    success: statusCode === 200,
    durationMs: 3,
    responseBody: 'ok',
    error: statusCode === null ? 'ECONNREFUSED' : null,
  }
}

const retryLater = (attemptCount: number, nextAttemptAt: string): DeliveryOutcome => ({
  status: 'PENDING',
  attemptCount,
  nextAttemptAt,
  lastStatusCode: 500,
  lastError: 'the receiver answered HTTP 500',
  deliveredAt: null,
  updatedAt: at(1),
})

for (const backend of backends) {
  describe.skipIf(!backend.available)(`WebhookStore contract: ${backend.name}`, () => {
    let store: WebhookStore
    const open = async () => {
      store = await backend.open()
      return store
    }
    afterEach(async () => {
      await store?.close()
    })

    it('rewrites the secrets the reseal callback changes, and only those', async () => {
      const s = await open()
      const org = newId()
      const a = subscription(org, { secret: 'whsec_YQ==' })
      const b = subscription(org, { secret: 'enc:v1:sealed' })
      await s.createSubscription(a)
      await s.createSubscription(b)
      const seen = new Map<string, string>()
      const n = await s.resealSecrets((id, stored) => {
        seen.set(id, stored)
        return stored.startsWith('whsec_') ? `enc:v1:${id}` : null
      })
      expect(n).toBe(1)
      expect(seen.get(a._id)).toBe('whsec_YQ==')
      expect(seen.get(b._id)).toBe('enc:v1:sealed')
      expect((await s.getSubscriptionById(a._id))?.secret).toBe(`enc:v1:${a._id}`)
      expect((await s.getSubscriptionById(b._id))?.secret).toBe('enc:v1:sealed')
    })

    it('reseals a rotated-out secret that still signs, beside the current one', async () => {
      const s = await open()
      const sub = subscription(newId(), {
        secret: 'enc:v1:current',
        previousSecret: 'whsec_cHJldmlvdXM=',
        previousSecretExpiresAt: at(60_000),
      })
      await s.createSubscription(sub)
      const n = await s.resealSecrets((id, stored) =>
        stored.startsWith('whsec_') ? `enc:v1:${id}:prev` : null,
      )
      expect(n).toBe(1)
      const after = await s.getSubscriptionById(sub._id)
      expect([after?.secret, after?.previousSecret, after?.previousSecretExpiresAt]).toEqual([
        'enc:v1:current',
        `enc:v1:${sub._id}:prev`,
        at(60_000),
      ])
    })

    it('rotates a secret only from the one expected (of two rotations at once, one wins), within its workspace', async () => {
      const s = await open()
      const org = newId()
      const sub = subscription(org, { secret: 'enc:v1:first' })
      await s.createSubscription(sub)
      const rotation = {
        secret: 'enc:v1:second',
        previousSecret: 'enc:v1:first',
        previousSecretExpiresAt: at(3_600_000),
        updatedAt: at(1_000),
      }
      expect(await s.rotateSecret(newId(), sub._id, 'enc:v1:first', rotation)).toBeNull()
      const rotated = await s.rotateSecret(org, sub._id, 'enc:v1:first', rotation)
      expect(rotated).toMatchObject({ _id: sub._id, ...rotation })
      // The loser of a race still expects the first secret.
      expect(
        await s.rotateSecret(org, sub._id, 'enc:v1:first', { ...rotation, secret: 'enc:v1:third' }),
      ).toBeNull()
      // A rotation that drops the previous one at once.
      const dropped = await s.rotateSecret(org, sub._id, 'enc:v1:second', {
        secret: 'enc:v1:third',
        previousSecret: null,
        previousSecretExpiresAt: null,
        updatedAt: at(2_000),
      })
      expect(dropped).toMatchObject({
        secret: 'enc:v1:third',
        previousSecret: null,
        previousSecretExpiresAt: null,
      })
      expect(await s.getSubscriptionById(sub._id)).toMatchObject({
        secret: 'enc:v1:third',
        previousSecret: null,
      })
    })

    it('drops the previous secrets whose overlap has ended, and only those', async () => {
      const s = await open()
      const org = newId()
      const ended = subscription(org, {
        secret: 'enc:v1:a2',
        previousSecret: 'enc:v1:a1',
        previousSecretExpiresAt: at(1_000),
        updatedAt: at(500),
      })
      const endsNow = subscription(org, {
        secret: 'enc:v1:b2',
        previousSecret: 'enc:v1:b1',
        previousSecretExpiresAt: at(5_000),
      })
      const signing = subscription(org, {
        secret: 'enc:v1:c2',
        previousSecret: 'enc:v1:c1',
        previousSecretExpiresAt: at(5_001),
      })
      const none = subscription(org, { secret: 'enc:v1:d' })
      for (const sub of [ended, endsNow, signing, none]) await s.createSubscription(sub)

      expect(await s.dropExpiredPreviousSecrets(at(5_000))).toBe(2)
      const after = async (id: string) => {
        const sub = await s.getSubscriptionById(id)
        return [sub?.secret, sub?.previousSecret, sub?.previousSecretExpiresAt, sub?.updatedAt]
      }
      expect(await after(ended._id)).toEqual(['enc:v1:a2', null, null, at(500)])
      expect(await after(endsNow._id)).toEqual(['enc:v1:b2', null, null, at(0)])
      expect(await after(signing._id)).toEqual(['enc:v1:c2', 'enc:v1:c1', at(5_001), at(0)])
      expect(await after(none._id)).toEqual(['enc:v1:d', null, null, at(0)])
      // Nothing left to drop; a minute later the last one goes too.
      expect(await s.dropExpiredPreviousSecrets(at(5_000))).toBe(0)
      expect(await s.dropExpiredPreviousSecrets(at(65_000))).toBe(1)
      expect(await after(signing._id)).toEqual(['enc:v1:c2', null, null, at(0)])
    })

    it('keeps subscriptions per workspace and finds the active ones for an event type', async () => {
      const s = await open()
      const org = newId()
      const a = subscription(org, { createdAt: at(1) })
      const b = subscription(org, { createdAt: at(2), active: false })
      const c = subscription(org, { createdAt: at(3), events: ['other.event'] })
      const elsewhere = subscription(newId())
      for (const sub of [a, b, c, elsewhere]) await s.createSubscription(sub)

      expect(await s.getSubscription(org, a._id)).toEqual(a)
      expect(await s.getSubscription(newId(), a._id)).toBeNull()
      expect(await s.getSubscriptionById(elsewhere._id)).toEqual(elsewhere)
      expect((await s.listSubscriptions(org)).map((x) => x._id)).toEqual([a._id, b._id, c._id])
      expect(await s.countSubscriptions(org)).toBe(3)
      expect((await s.subscriptionsFor(org, 'version.published')).map((x) => x._id)).toEqual([a._id])
      expect(await s.subscriptionsFor(newId(), 'version.published')).toEqual([])
    })

    it('updates a subscription only within its workspace', async () => {
      const s = await open()
      const org = newId()
      const a = subscription(org)
      await s.createSubscription(a)
      expect(await s.updateSubscription(newId(), a._id, { active: false, updatedAt: at(5) })).toBeNull()
      const updated = await s.updateSubscription(org, a._id, {
        url: 'https://other.example.com/',
        events: ['version.published'],
        active: false,
        disabledAt: at(5),
        disabledReason: 'gone',
        updatedAt: at(5),
      })
      expect(updated).toEqual({
        ...a,
        url: 'https://other.example.com/',
        active: false,
        disabledAt: at(5),
        disabledReason: 'gone',
        updatedAt: at(5),
      })
      const cleared = await s.updateSubscription(org, a._id, {
        active: true,
        disabledAt: null,
        disabledReason: null,
        updatedAt: at(6),
      })
      expect(cleared).toMatchObject({ active: true, disabledAt: null, disabledReason: null })
    })

    it('creates a subscription only below the bound it is given, counted in its workspace', async () => {
      const s = await open()
      const org = newId()
      await s.createSubscription(subscription(newId()))
      expect(await s.createSubscription(subscription(org), [], 2)).toBe(true)
      expect(await s.createSubscription(subscription(org), [], 2)).toBe(true)
      const refused = subscription(org)
      expect(await s.createSubscription(refused, [], 2)).toBe(false)
      expect(await s.getSubscription(org, refused._id)).toBeNull()
      expect(await s.countSubscriptions(org)).toBe(2)
      // Many at once against a bound of 3: exactly one more passes.
      const many = Array.from({ length: 5 }, () => s.createSubscription(subscription(org), [], 3))
      expect((await Promise.all(many)).filter(Boolean)).toHaveLength(1)
      expect(await s.countSubscriptions(org)).toBe(3)
    })

    it('updates a subscription only while its url and active are the expected ones, when named', async () => {
      const s = await open()
      const org = newId()
      const a = subscription(org)
      await s.createSubscription(a)
      const off = { active: false, disabledAt: at(5), disabledReason: 'gone', updatedAt: at(5) }
      // Another URL, or switched off meanwhile: nothing written, no audit entry.
      const entry = {
        id: newId(),
        at: at(5),
        organizationId: org,
        actor: { type: 'user' as const, id: newId(), name: 'someone' },
        action: 'webhook.updated' as const,
        resource: { type: 'webhook', id: a._id },
        summary: 'not written',
        requestId: 'r',
        ip: '127.0.0.1',
      }
      expect(
        await s.updateSubscription(org, a._id, off, [entry], { url: 'https://x.example.com/', active: true }),
      ).toBeNull()
      expect(await s.updateSubscription(org, a._id, off, [], { url: a.url, active: false })).toBeNull()
      expect(await s.getSubscription(org, a._id)).toEqual(a)
      expect((await s.pendingAudit(100)).filter((e) => e.id === entry.id)).toEqual([])
      expect(await s.updateSubscription(org, a._id, off, [], { url: a.url, active: true })).toEqual({
        ...a,
        ...off,
      })
    })

    it('creates one delivery per (event, subscription), however often it is asked', async () => {
      const s = await open()
      const org = newId()
      const [a, b] = [subscription(org), subscription(org)]
      await s.createSubscription(a)
      await s.createSubscription(b)
      const first = delivery(a)
      expect(await s.createDeliveries([first, delivery(b, { eventId: first.eventId })])).toBe(2)
      // The same event again (a redelivered message): new ids, same (eventId, subscriptionId).
      expect(
        await s.createDeliveries([
          delivery(a, { eventId: first.eventId }),
          delivery(b, { eventId: first.eventId }),
          delivery(b),
        ]),
      ).toBe(1)
      expect(await s.createDeliveries([])).toBe(0)
      const page = await s.listDeliveries(org, a._id, undefined, { page: 1, limit: 10 })
      expect(page.total).toBe(1)
      expect(page.deliveries[0]).toEqual(first)
      expect((await s.listDeliveries(org, b._id, undefined, { page: 1, limit: 10 })).total).toBe(2)
    })

    it('claims due deliveries once, under a lease', async () => {
      const s = await open()
      const sub = subscription(newId())
      await s.createSubscription(sub)
      const due1 = delivery(sub, { nextAttemptAt: at(-2000) })
      const due2 = delivery(sub, { nextAttemptAt: at(-1000) })
      const later = delivery(sub, { nextAttemptAt: at(60_000) })
      const done = delivery(sub, { status: 'DELIVERED', nextAttemptAt: null })
      await s.createDeliveries([later, due2, done, due1])

      expect(await s.nextDueAt()).toBe(at(-2000))
      const claimed = await s.claimDue(at(0), 10, 'tok-a', at(30_000))
      expect(claimed.map((d) => d._id)).toEqual([due1._id, due2._id])
      expect(claimed[0]).toMatchObject({ leaseToken: 'tok-a', leaseUntil: at(30_000) })
      // A second worker finds nothing while the leases run.
      expect(await s.claimDue(at(1000), 10, 'tok-b', at(31_000))).toEqual([])
      // Limits are honoured.
      expect(await s.claimDue(at(120_000), 1, 'tok-c', at(150_000))).toHaveLength(1)
    })

    it("keeps an organization to its share of deliveries in flight, passing over its others for the next organization's", async () => {
      const s = await open()
      const a = subscription(newId())
      const b = subscription(newId())
      await s.createSubscription(a)
      await s.createSubscription(b)
      const ofA = [-5000, -4000, -3000, -2000, -1000].map((ms) => delivery(a, { nextAttemptAt: at(ms) }))
      const ofB = [-500, -400].map((ms) => delivery(b, { nextAttemptAt: at(ms) }))
      await s.createDeliveries([...ofB, ...ofA])
      // A has one in flight already and a share of two: one more of A, then B's, oldest first.
      const share = { max: 2, inFlight: new Map([[a.organizationId, 1]]) }
      const claimed = await s.claimDue(at(0), 6, 'tok', at(30_000), share)
      expect(claimed.map((d) => d._id)).toEqual([ofA[0]?._id, ofB[0]?._id, ofB[1]?._id])
      // Within one claim too: B's share of 2 is not exceeded by a limit that would allow more.
      const c = subscription(newId())
      await s.createSubscription(c)
      const ofC = [-300, -200, -100].map((ms) => delivery(c, { nextAttemptAt: at(ms) }))
      await s.createDeliveries(ofC)
      const next = await s.claimDue(at(0), 10, 'tok2', at(30_000), { max: 2, inFlight: new Map() })
      expect(next.map((d) => d._id)).toEqual([ofA[1]?._id, ofA[2]?._id, ofC[0]?._id, ofC[1]?._id])
      // Without a share, the oldest due whatever their organization.
      const rest = await s.claimDue(at(0), 10, 'tok3', at(30_000))
      expect(rest.map((d) => d._id)).toEqual([ofA[3]?._id, ofA[4]?._id, ofC[2]?._id])
    })

    it('lets a delivery whose lease expired be claimed again (a crashed worker)', async () => {
      const s = await open()
      const sub = subscription(newId())
      await s.createSubscription(sub)
      const d = delivery(sub)
      await s.createDeliveries([d])
      expect(await s.claimDue(at(0), 5, 'dead', at(1000))).toHaveLength(1)
      const again = await s.claimDue(at(1000), 5, 'alive', at(5000))
      expect(again.map((x) => x.leaseToken)).toEqual(['alive'])
      // The crashed worker's late write is refused; its attempt is still logged.
      expect(await s.recordAttempt(d._id, 'dead', attempt(d, 1, 200), retryLater(1, at(9)))).toBe(false)
      expect(await s.recordAttempt(d._id, 'alive', attempt(d, 1, 500), retryLater(1, at(10_000)))).toBe(true)
      expect(await s.listAttempts([d._id])).toHaveLength(2)
    })

    it('records attempts and outcomes, and frees the lease', async () => {
      const s = await open()
      const sub = subscription(newId())
      await s.createSubscription(sub)
      const d = delivery(sub)
      const other = delivery(sub)
      await s.createDeliveries([d, other])
      await s.claimDue(at(0), 5, 'tok', at(30_000))

      expect(await s.recordAttempt(d._id, 'tok', attempt(d, 1, 500), retryLater(1, at(5000)))).toBe(true)
      const after = await s.getDelivery(sub.organizationId, sub._id, d._id)
      expect(after).toMatchObject({
        status: 'PENDING',
        attemptCount: 1,
        nextAttemptAt: at(5000),
        lastStatusCode: 500,
        leaseToken: null,
        leaseUntil: null,
      })
      // Not due yet; then due, and claimed for the second attempt.
      expect(await s.claimDue(at(4000), 5, 'tok2', at(34_000))).toEqual([])
      const [again] = await s.claimDue(at(5000), 5, 'tok2', at(35_000))
      expect(again?._id).toBe(d._id)
      const delivered: DeliveryOutcome = {
        status: 'DELIVERED',
        attemptCount: 2,
        nextAttemptAt: null,
        lastStatusCode: 200,
        lastError: null,
        deliveredAt: at(5001),
        updatedAt: at(5001),
      }
      expect(await s.recordAttempt(d._id, 'tok2', attempt(d, 2, 200), delivered)).toBe(true)
      expect(await s.getDelivery(sub.organizationId, sub._id, d._id)).toMatchObject(delivered)
      expect((await s.listAttempts([d._id, other._id])).map((a) => [a.deliveryId, a.number])).toEqual([
        [d._id, 1],
        [d._id, 2],
      ])
      // Without an attempt (the subscription was switched off): outcome only.
      const failed: DeliveryOutcome = { ...delivered, status: 'FAILED', attemptCount: 0, deliveredAt: null }
      expect(await s.recordAttempt(other._id, 'tok', null, failed)).toBe(true)
      expect(await s.listAttempts([other._id])).toEqual([])
      expect(await s.nextDueAt()).toBeNull()
    })

    it('lists deliveries newest first, by status, with pages', async () => {
      const s = await open()
      const sub = subscription(newId())
      await s.createSubscription(sub)
      const ds = [0, 1, 2, 3, 4].map((i) =>
        delivery(sub, { createdAt: at(i * 1000), status: i % 2 === 0 ? 'DELIVERED' : 'PENDING' }),
      )
      await s.createDeliveries(ds)
      const page1 = await s.listDeliveries(sub.organizationId, sub._id, undefined, { page: 1, limit: 2 })
      expect(page1.total).toBe(5)
      expect(page1.deliveries.map((d) => d._id)).toEqual([ds[4]?._id, ds[3]?._id])
      const page3 = await s.listDeliveries(sub.organizationId, sub._id, undefined, { page: 3, limit: 2 })
      expect(page3.deliveries.map((d) => d._id)).toEqual([ds[0]?._id])
      const pending = await s.listDeliveries(sub.organizationId, sub._id, 'PENDING', { page: 1, limit: 10 })
      expect(pending.total).toBe(2)
      expect(await s.listDeliveries(newId(), sub._id, undefined, { page: 1, limit: 10 })).toEqual({
        deliveries: [],
        total: 0,
      })
      expect(await s.getDelivery(newId(), sub._id, ds[0]?._id ?? '')).toBeNull()
    })

    it('requeues a finished delivery with a new retry round, but not one being attempted', async () => {
      const s = await open()
      const sub = subscription(newId())
      await s.createSubscription(sub)
      const d = delivery(sub, { status: 'FAILED', attemptCount: 10, nextAttemptAt: null, lastError: 'x' })
      const busy = delivery(sub)
      await s.createDeliveries([d, busy])
      await s.claimDue(at(0), 5, 'tok', at(30_000))

      const requeued = await s.requeueDelivery(sub.organizationId, sub._id, d._id, at(100))
      expect(requeued).toMatchObject({
        _id: d._id,
        status: 'PENDING',
        attemptCount: 10,
        roundStart: 10,
        nextAttemptAt: at(100),
        leaseToken: null,
      })
      expect(await s.requeueDelivery(sub.organizationId, sub._id, busy._id, at(100))).toBe('leased')
      expect(await s.requeueDelivery(sub.organizationId, sub._id, newId(), at(100))).toBeNull()
      expect(await s.requeueDelivery(newId(), sub._id, d._id, at(100))).toBeNull()
      // Once the lease has run out, it can be requeued.
      expect(await s.requeueDelivery(sub.organizationId, sub._id, busy._id, at(30_000))).toMatchObject({
        status: 'PENDING',
      })
    })

    it('fails the waiting deliveries of a subscription', async () => {
      const s = await open()
      const sub = subscription(newId())
      const other = subscription(sub.organizationId)
      await s.createSubscription(sub)
      await s.createSubscription(other)
      const waiting = delivery(sub, { nextAttemptAt: at(60_000) })
      const leased = delivery(sub)
      const delivered = delivery(sub, { status: 'DELIVERED', nextAttemptAt: null })
      const elsewhere = delivery(other, { nextAttemptAt: at(60_000) })
      await s.createDeliveries([waiting, delivered, elsewhere])
      await s.createDeliveries([leased])
      await s.claimDue(at(0), 1, 'tok', at(30_000))

      expect(await s.failPending(sub._id, 'disabled', at(10))).toBe(1)
      const get = (d: DeliveryRecord) => s.getDelivery(d.organizationId, d.subscriptionId, d._id)
      expect(await get(waiting)).toMatchObject({
        status: 'FAILED',
        nextAttemptAt: null,
        lastError: 'disabled',
      })
      expect(await get(leased)).toMatchObject({ status: 'PENDING' })
      expect(await get(delivered)).toMatchObject({ status: 'DELIVERED' })
      expect(await get(elsewhere)).toMatchObject({ status: 'PENDING' })
    })

    it('deletes a subscription with its deliveries and attempts', async () => {
      const s = await open()
      const sub = subscription(newId())
      await s.createSubscription(sub)
      const d = delivery(sub)
      await s.createDeliveries([d])
      await s.claimDue(at(0), 1, 'tok', at(30_000))
      await s.recordAttempt(d._id, 'tok', attempt(d, 1, 200), retryLater(1, at(1)))
      expect(await s.deleteSubscription(newId(), sub._id)).toBe(false)
      expect(await s.deleteSubscription(sub.organizationId, sub._id)).toBe(true)
      expect(await s.getSubscription(sub.organizationId, sub._id)).toBeNull()
      expect(await s.getDelivery(sub.organizationId, sub._id, d._id)).toBeNull()
      expect(await s.listAttempts([d._id])).toEqual([])
      expect(await s.deleteSubscription(sub.organizationId, sub._id)).toBe(false)
    })

    it('never hands the same delivery to two concurrent claimers', async () => {
      const s = await open()
      const sub = subscription(newId())
      await s.createSubscription(sub)
      await s.createDeliveries(Array.from({ length: 30 }, () => delivery(sub)))
      const claims = await Promise.all(
        Array.from({ length: 6 }, (_, i) => s.claimDue(at(0), 10, `tok-${i}`, at(30_000))),
      )
      const ids = claims.flat().map((d) => d._id)
      expect(ids).toHaveLength(30)
      expect(new Set(ids).size).toBe(30)
    })
  })
}
