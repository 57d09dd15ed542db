import { createHmac, randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import {
  type AuditEntry,
  type CallerContext,
  CONTEXT_HEADER,
  type CreatedWebhook,
  SUBJECTS,
  type VersionPublishedEvent,
  type Webhook,
  type WebhookDelivery,
  type WebhookDeliveryList,
} from '@pm/contracts'
import { newId, type Service, signContext } from '@pm/kit'
import { Webhook as StandardWebhook } from 'standardwebhooks'
import { afterAll, afterEach, beforeAll, describe, expect, it, vi } from 'vitest'
import { buildApp, loadWebhooksConfig, SqliteWebhookStore, type WebhookStore } from '../src/app.ts'
import { verifyServiceSignature } from '../src/domain/signature.ts'
import type { HostLookup } from '../src/services/ssrf.ts'
import { WebhookReceiver as Receiver } from '@pm/testkit'

const SECRET = randomBytes(32).toString('hex')

interface Harness {
  app: Service
  bus: MemoryBus
  org: string
  call<T>(
    method: string,
    url: string,
    body?: unknown,
    caller?: Partial<CallerContext>,
  ): Promise<{ status: number; body: T }>
  close(): Promise<void>
}

async function harness(
  env: Record<string, string> = {},
  extra: { lookup?: HostLookup; dataDir?: string; bus?: MemoryBus; store?: WebhookStore } = {},
): Promise<Harness> {
  const bus = extra.bus ?? new MemoryBus(20)
  const config = loadWebhooksConfig({
    NODE_ENV: 'test',
    LOG_LEVEL: 'silent',
    INTERNAL_AUTH_SECRET: SECRET,
    DATA_DIR: extra.dataDir ?? mkdtempSync(join(tmpdir(), 'pm-webhooks-')),
    WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    WEBHOOK_RETRY_SCALE: '0.001',
    WEBHOOK_POLL_MS: '50',
    ...env,
  })
  const app = await buildApp({
    config,
    bus,
    ...(extra.lookup ? { lookup: extra.lookup } : {}),
    ...(extra.store ? { store: extra.store } : {}),
  })
  await app.ready()
  const org = newId()
  return {
    app,
    bus,
    org,
    async call<T>(method: string, url: string, body?: unknown, caller: Partial<CallerContext> = {}) {
      const context: CallerContext = {
        kind: 'user',
        userId: newId(),
        organizationId: org,
        role: 'ADMIN',
        scopes: ['organization:read', 'organization:write'],
        requestId: 'test',
        ...caller,
      }
      const res = await app.inject({
        method: method as 'GET',
        url,
        headers: { [CONTEXT_HEADER]: signContext(context, SECRET) },
        ...(body === undefined ? {} : { payload: body as object }),
      })
      return { status: res.statusCode, body: res.json() as T }
    },
    async close() {
      await app.close()
      if (!extra.bus) await bus.close()
    },
  }
}

function event(
  organizationId: string,
  overrides: Partial<VersionPublishedEvent> = {},
): VersionPublishedEvent {
  const versionId = newId()
  return {
    id: newId(),
    type: 'version.published',
    createdAt: new Date().toISOString(),
    organizationId,
    data: {
      promptId: newId(),
      name: 'Greeting',
      slug: 'greeting',
      versionId,
      version: 1,
      publishedAt: new Date().toISOString(),
      publishedBy: newId(),
      changeLog: 'first',
    },
    ...overrides,
  }
}

const publish = (h: Harness, e: VersionPublishedEvent, msgId = e.data.versionId) =>
  h.bus.publishDurable(SUBJECTS.versionPublished, e, msgId)

async function create(h: Harness, url: string, body: Record<string, unknown> = {}): Promise<CreatedWebhook> {
  const res = await h.call<CreatedWebhook>('POST', `/api/v1/organizations/${h.org}/webhooks`, {
    url,
    ...body,
  })
  expect(res.status).toBe(201)
  return res.body
}

async function deliveries(h: Harness, webhookId: string, query = ''): Promise<WebhookDelivery[]> {
  const res = await h.call<WebhookDeliveryList>(
    'GET',
    `/api/v1/organizations/${h.org}/webhooks/${webhookId}/deliveries${query}`,
  )
  expect(res.status).toBe(200)
  return res.body.deliveries
}

describe('webhooks service', () => {
  let receiver: Receiver
  let h: Harness

  beforeAll(async () => {
    receiver = await Receiver.start()
    h = await harness()
  })
  afterAll(async () => {
    await h?.close()
    await receiver?.close()
  })

  describe('access', () => {
    const path = () => `/api/v1/organizations/${h.org}/webhooks`

    it('lets ADMIN and OWNER users and organization:write keys in, and no one else', async () => {
      expect((await h.call('GET', path())).status).toBe(200)
      expect((await h.call('GET', path(), undefined, { role: 'OWNER' })).status).toBe(200)
      const member = await h.call<{ error: { code: string } }>('GET', path(), undefined, { role: 'MEMBER' })
      expect(member.status).toBe(403)
      expect(member.body.error.code).toBe('FORBIDDEN')
      const key = { kind: 'apiKey' as const, userId: undefined, role: undefined, apiKeyId: newId() }
      expect((await h.call('GET', path(), undefined, key)).status).toBe(200)
      const weak = await h.call<{ error: { code: string } }>('GET', path(), undefined, {
        ...key,
        scopes: ['organization:read', 'prompts:write'],
      })
      expect(weak.status).toBe(403)
      expect(weak.body.error.code).toBe('INSUFFICIENT_SCOPE')
    })

    it('answers 404 for another organization and 401 without a signed context', async () => {
      const other = await h.call<{ error: { code: string } }>(
        'GET',
        `/api/v1/organizations/${newId()}/webhooks`,
      )
      expect(other.status).toBe(404)
      expect(other.body.error.code).toBe('NOT_FOUND')
      const res = await h.app.inject({ method: 'GET', url: path() })
      expect(res.statusCode).toBe(401)
    })
  })

  describe('audit log', () => {
    it('records create, update and delete once each with the actor, and nothing for a refused change', async () => {
      const published: AuditEntry[] = []
      await h.bus.consume(SUBJECTS.auditEntry, 'test-audit', async (data) => {
        published.push(data as AuditEntry)
      })
      const org = newId()
      const user = { organizationId: org, userId: newId(), actorName: 'Ada' }
      const key = { ...user, kind: 'apiKey' as const, userId: undefined, role: undefined, apiKeyId: newId() }
      const path = `/api/v1/organizations/${org}/webhooks`
      const url = `${receiver.base}/audited/secret-token?key=hunter2`
      // Refused by validation or by the URL check: no entry.
      expect((await h.call('POST', path, { url: 'ftp://x', events: [] }, user)).status).toBe(400)
      expect((await h.call('POST', path, { url, events: ['nope'] }, user)).status).toBe(400)
      const created = await h.call<CreatedWebhook>('POST', path, { url }, user)
      expect(created.status).toBe(201)
      const id = created.body.webhook._id
      expect((await h.call('PATCH', `${path}/${id}`, {}, key)).status).toBe(400)
      expect((await h.call('PATCH', `${path}/${newId()}`, { active: false }, key)).status).toBe(404)
      expect(
        (await h.call('PATCH', `${path}/${id}`, { active: false }, { ...key, actorName: 'deploy key' }))
          .status,
      ).toBe(200)
      expect((await h.call('DELETE', `${path}/${id}`, undefined, user)).status).toBe(200)
      expect((await h.call('DELETE', `${path}/${id}`, undefined, user)).status).toBe(404)

      await vi.waitFor(() => expect(published.filter((e) => e.organizationId === org)).toHaveLength(3), {
        timeout: 5_000,
        interval: 20,
      })
      await new Promise((r) => setTimeout(r, 150))
      const mine = published.filter((e) => e.organizationId === org)
      expect(mine.map((e) => [e.action, e.actor.type, e.actor.id, e.actor.name, e.resource.id])).toEqual([
        ['webhook.created', 'user', user.userId, 'Ada', id],
        ['webhook.updated', 'apiKey', key.apiKeyId, 'deploy key', id],
        ['webhook.deleted', 'user', user.userId, 'Ada', id],
      ])
      // The target is named by its host: a token in its path or query stays out of the log.
      const host = new URL(receiver.base).host
      expect(mine.map((e) => e.summary)).toEqual([
        `created a webhook to ${host} for version.published`,
        `updated the webhook to ${host}: deactivated`,
        `deleted the webhook to ${host}`,
      ])
      expect(JSON.stringify(mine)).not.toMatch(/secret-token|hunter2/)
    })
  })

  describe('subscriptions', () => {
    it('creates a subscription and shows its secret once', async () => {
      const created = await create(h, `${receiver.base}/crud`)
      expect(created.secret).toMatch(/^whsec_[A-Za-z0-9+/]+={0,2}$/)
      expect(created.webhook).toMatchObject({
        organizationId: h.org,
        url: `${receiver.base}/crud`,
        events: ['version.published'],
        active: true,
        disabledAt: null,
      })
      const id = created.webhook._id
      const got = await h.call<Webhook>('GET', `/api/v1/organizations/${h.org}/webhooks/${id}`)
      expect(got.body).toEqual(created.webhook)
      expect(JSON.stringify(got.body)).not.toContain(created.secret)
      const list = await h.call<{ webhooks: Webhook[] }>('GET', `/api/v1/organizations/${h.org}/webhooks`)
      expect(list.body.webhooks.map((w) => w._id)).toContain(id)
      expect(JSON.stringify(list.body)).not.toContain('whsec_')
    })

    it('updates url, events and active, and deletes', async () => {
      const { webhook } = await create(h, `${receiver.base}/a`)
      const url = `/api/v1/organizations/${h.org}/webhooks/${webhook._id}`
      const patched = await h.call<Webhook>('PATCH', url, { url: `${receiver.base}/b`, active: false })
      expect(patched.status).toBe(200)
      expect(patched.body).toMatchObject({ url: `${receiver.base}/b`, active: false })
      expect((await h.call('PATCH', url, {})).status).toBe(400)
      expect((await h.call('PATCH', url, { secret: 'x' })).status).toBe(400)
      expect((await h.call('PATCH', url, { events: ['prompt.renamed'] })).status).toBe(400)
      const chosen = await h.call<Webhook>('PATCH', url, {
        events: ['prompt.deleted', 'environment.promoted'],
      })
      expect(chosen.body.events).toEqual(['prompt.deleted', 'environment.promoted'])
      const deleted = await h.call<{ _id: string; deleted: boolean }>('DELETE', url)
      expect(deleted.body).toEqual({ _id: webhook._id, deleted: true })
      expect((await h.call('GET', url)).status).toBe(404)
      expect((await h.call('DELETE', url)).status).toBe(404)
      expect((await h.call('PATCH', url, { active: true })).status).toBe(404)
    })

    it('validates the body', async () => {
      const path = `/api/v1/organizations/${h.org}/webhooks`
      for (const body of [
        {},
        { url: 'ftp://example.com/' },
        { url: 'not a url' },
        { url: 'https://example.com/', extra: true },
        { url: 'https://example.com/', events: [] },
        { url: 'https://user:pass@example.com/' },
      ]) {
        const res = await h.call<{ error: { code: string } }>('POST', path, body)
        expect(res.status, JSON.stringify(body)).toBe(400)
        expect(res.body.error.code).toBe('VALIDATION_ERROR')
      }
    })

    it('limits the number of subscriptions per organization, creates at once included', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pm-webhooks-'))
      const store = new SqliteWebhookStore(join(dataDir, 'webhooks.db'))
      const small = await harness({ WEBHOOK_MAX_PER_ORG: '2' }, { dataDir, store })
      const post = (url: string) =>
        small.call<{ error: { code: string } }>('POST', `/api/v1/organizations/${small.org}/webhooks`, {
          url,
        })
      try {
        await create(small, `${receiver.base}/1`)
        // A second create lands after this one has passed the bound and before it writes.
        const original = store.createSubscription.bind(store)
        let other: Promise<{ status: number }> | undefined
        const spy = vi.spyOn(store, 'createSubscription').mockImplementation(async (...args) => {
          if (!other) {
            other = post(`${receiver.base}/2b`)
            await other
          }
          return original(...args)
        })
        const second = await post(`${receiver.base}/2a`)
        spy.mockRestore()
        expect([second.status, (await other)?.status]).toEqual([409, 201])
        expect(second.body.error.code).toBe('CONFLICT')
        const third = await post(`${receiver.base}/3`)
        expect(third.status).toBe(409)
        expect(third.body.error.code).toBe('CONFLICT')
        expect(await store.countSubscriptions(small.org)).toBe(2)
      } finally {
        await small.close()
        await store.close()
      }
    })
  })

  describe('deliveries', () => {
    it('delivers version.published once per subscription, signed, with every header', async () => {
      const { webhook, secret } = await create(h, `${receiver.base}/signed`)
      const inactive = await create(h, `${receiver.base}/inactive`, { active: false })
      const e = event(h.org)
      await publish(h, e)
      // Other organizations' events do not reach this subscription.
      await publish(h, event(newId()))

      await vi.waitFor(() => expect(receiver.to('/signed')).toHaveLength(1), { timeout: 5_000, interval: 20 })
      const [req] = receiver.to('/signed')
      if (!req) throw new Error('no request')
      expect(req.body).toBe(JSON.stringify(e))
      expect(req.headers['content-type']).toBe('application/json')
      expect(req.headers['x-service-event']).toBe('version.published')
      expect(req.headers['webhook-id']).toBe(e.id)

      // The signature, recomputed by hand: HMAC-SHA256 of "<t>.<body>" with the key bytes.
      const sig = String(req.headers['x-service-signature'])
      const match = /^t=(\d+),v1=([0-9a-f]{64})$/.exec(sig)
      if (!match) throw new Error(`bad signature header ${sig}`)
      const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
      expect(match[2]).toBe(createHmac('sha256', key).update(`${match[1]}.${req.body}`).digest('hex'))
      expect(verifyServiceSignature(sig, req.body, secret)).toBe(true)
      // And by the Standard Webhooks library.
      expect(new StandardWebhook(secret).verify(req.body, req.headers as Record<string, string>)).toEqual(e)

      await vi.waitFor(async () => {
        const [d] = await deliveries(h, webhook._id)
        expect(d).toMatchObject({ status: 'DELIVERED', attemptCount: 1, eventId: e.id, payload: e })
      })
      const [d] = await deliveries(h, webhook._id)
      expect(req.headers['x-service-delivery']).toBe(d?._id)
      expect(d?.attempts).toMatchObject([{ number: 1, statusCode: 200, success: true, error: null }])
      expect(receiver.to('/inactive')).toHaveLength(0)
      expect(await deliveries(h, inactive.webhook._id)).toEqual([])

      // The same event again (a JetStream redelivery, or a republish under another message id).
      await publish(h, e, `again-${e.id}`)
      const probe = event(h.org)
      await publish(h, probe)
      await vi.waitFor(() => expect(receiver.to('/signed')).toHaveLength(2))
      expect(receiver.to('/signed').map((r) => r.headers['webhook-id'])).toEqual([e.id, probe.id])
      expect(await deliveries(h, webhook._id)).toHaveLength(2)
    })

    it('retries a failing receiver on the schedule and stops at the first success', async () => {
      const { webhook } = await create(h, `${receiver.base}/flaky`)
      receiver.script('/flaky', [500, 503])
      await publish(h, event(h.org))
      await vi.waitFor(
        async () => {
          const [d] = await deliveries(h, webhook._id)
          expect(d?.status).toBe('DELIVERED')
        },
        { timeout: 5_000, interval: 50 },
      )
      const [d] = await deliveries(h, webhook._id)
      expect(d?.attempts.map((a) => [a.number, a.statusCode, a.success])).toEqual([
        [1, 500, false],
        [2, 503, false],
        [3, 200, true],
      ])
      expect(d).toMatchObject({ attemptCount: 3, nextAttemptAt: null, lastError: null })
      const requests = receiver.to('/flaky')
      expect(requests).toHaveLength(3)
      // One delivery: the same ids at every attempt, a fresh signature each time.
      expect(new Set(requests.map((r) => r.headers['x-service-delivery'])).size).toBe(1)
      expect(new Set(requests.map((r) => r.headers['webhook-id'])).size).toBe(1)
    })

    it('records the final failure once the schedule is used up', async () => {
      // Scaled so that the whole ten-attempt schedule (about 3.5 days) takes about a second.
      const fast = await harness({ WEBHOOK_RETRY_SCALE: '0.000004', WEBHOOK_POLL_MS: '20' })
      try {
        const { webhook } = await create(fast, `${receiver.base}/down`)
        receiver.script('/down', Array(20).fill(500))
        await publish(fast, event(fast.org))
        await vi.waitFor(
          async () => {
            const [d] = await deliveries(fast, webhook._id)
            expect(d?.status).toBe('FAILED')
          },
          { timeout: 10_000, interval: 50 },
        )
        const [d] = await deliveries(fast, webhook._id)
        expect(d?.attempts).toHaveLength(10)
        expect(d).toMatchObject({
          attemptCount: 10,
          nextAttemptAt: null,
          lastStatusCode: 500,
          lastError: 'the receiver answered HTTP 500',
        })
        expect(receiver.to('/down')).toHaveLength(10)
      } finally {
        await fast.close()
      }
    })

    it('disables the subscription on 410 Gone', async () => {
      const { webhook } = await create(h, `${receiver.base}/gone`)
      receiver.script('/gone', [410])
      await publish(h, event(h.org))
      await vi.waitFor(async () => {
        const [d] = await deliveries(h, webhook._id)
        expect(d?.status).toBe('FAILED')
      })
      const got = await h.call<Webhook>('GET', `/api/v1/organizations/${h.org}/webhooks/${webhook._id}`)
      expect(got.body).toMatchObject({ active: false, disabledReason: 'the receiver answered 410 Gone' })
      expect(got.body.disabledAt).not.toBeNull()
      // Nothing more is sent to it.
      await publish(h, event(h.org))
      const probe = await create(h, `${receiver.base}/gone-probe`)
      await publish(h, event(h.org))
      await vi.waitFor(() => expect(receiver.to('/gone-probe')).toHaveLength(1))
      expect(receiver.to('/gone')).toHaveLength(1)
      expect(await deliveries(h, webhook._id)).toHaveLength(1)
      // Redelivery needs it switched back on; switching it on clears the reason.
      const redeliver = await h.call<{ error: { code: string } }>(
        'POST',
        `/api/v1/organizations/${h.org}/webhooks/${webhook._id}/deliveries/${(await deliveries(h, webhook._id))[0]?._id}/redeliver`,
      )
      expect(redeliver.status).toBe(409)
      const on = await h.call<Webhook>('PATCH', `/api/v1/organizations/${h.org}/webhooks/${webhook._id}`, {
        active: true,
      })
      expect(on.body).toMatchObject({ active: true, disabledAt: null, disabledReason: null })
      await h.call('DELETE', `/api/v1/organizations/${h.org}/webhooks/${probe.webhook._id}`)
    })

    it('reports a test-send answered 410 without switching the subscription off', async () => {
      // Retries 5 s apart: the first delivery is still waiting when the test-send is answered.
      const slow = await harness({ WEBHOOK_RETRY_SCALE: '1' })
      try {
        const { webhook } = await create(slow, `${receiver.base}/test-gone`)
        receiver.script('/test-gone', [500, 410])
        await publish(slow, event(slow.org))
        await vi.waitFor(async () =>
          expect((await deliveries(slow, webhook._id))[0]).toMatchObject({
            status: 'PENDING',
            attemptCount: 1,
          }),
        )
        const test = await slow.call<WebhookDelivery>(
          'POST',
          `/api/v1/organizations/${slow.org}/webhooks/${webhook._id}/test`,
        )
        expect(test.status).toBe(200)
        expect(test.body).toMatchObject({
          eventType: 'webhook.test',
          status: 'FAILED',
          lastStatusCode: 410,
          lastError: 'the receiver answered 410 Gone',
        })
        const got = await slow.call<Webhook>(
          'GET',
          `/api/v1/organizations/${slow.org}/webhooks/${webhook._id}`,
        )
        expect(got.body).toMatchObject({ active: true, disabledAt: null, disabledReason: null })
        const waiting = (await deliveries(slow, webhook._id)).find((d) => d.eventType === 'version.published')
        expect(waiting).toMatchObject({ status: 'PENDING', attemptCount: 1 })
      } finally {
        await slow.close()
      }
    })

    it('test-sends once, synchronously, and logs it', async () => {
      const { webhook, secret } = await create(h, `${receiver.base}/test-send`)
      const url = `/api/v1/organizations/${h.org}/webhooks/${webhook._id}/test`
      const ok = await h.call<WebhookDelivery>('POST', url)
      expect(ok.status).toBe(200)
      expect(ok.body).toMatchObject({ eventType: 'webhook.test', status: 'DELIVERED', attemptCount: 1 })
      const [req] = receiver.to('/test-send')
      expect(req?.headers['x-service-event']).toBe('webhook.test')
      expect(
        new StandardWebhook(secret).verify(req?.body ?? '', req?.headers as Record<string, string>),
      ).toMatchObject({
        type: 'webhook.test',
        organizationId: h.org,
      })
      receiver.script('/test-send', [500])
      const failed = await h.call<WebhookDelivery>('POST', url)
      expect(failed.body).toMatchObject({
        status: 'FAILED',
        attemptCount: 1,
        lastStatusCode: 500,
        nextAttemptAt: null,
      })
      expect((await deliveries(h, webhook._id)).map((d) => d.status)).toEqual(['FAILED', 'DELIVERED'])
      expect((await deliveries(h, webhook._id, '?status=FAILED')).map((d) => d._id)).toEqual([
        failed.body._id,
      ])
      expect((await h.call('POST', `/api/v1/organizations/${h.org}/webhooks/${newId()}/test`)).status).toBe(
        404,
      )
    })

    it('rotates the secret: shown once, both sign during the overlap, 0 drops the old one; audited; races answer 409', async () => {
      const audit: AuditEntry[] = []
      await h.bus.consume(SUBJECTS.auditEntry, 'test-audit-rotation', async (data) => {
        audit.push(data as AuditEntry)
      })
      const { webhook, secret: first } = await create(h, `${receiver.base}/rotated`)
      const base = `/api/v1/organizations/${h.org}/webhooks/${webhook._id}`
      /** The next test delivery's request, and which of `secrets` verify it (both headers agree). */
      const verifiedBy = async (secrets: string[]) => {
        expect((await h.call<WebhookDelivery>('POST', `${base}/test`)).status).toBe(200)
        const req = receiver.to('/rotated').at(-1)
        if (!req) throw new Error('no request')
        const headers = req.headers as Record<string, string>
        return secrets.map((secret) => {
          const standard = (() => {
            try {
              new StandardWebhook(secret).verify(req.body, headers)
              return true
            } catch {
              return false
            }
          })()
          expect(verifyServiceSignature(headers['x-service-signature'], req.body, secret)).toBe(standard)
          return standard
        })
      }

      // No body: the defaults (the previous secret signs for 24 hours more).
      const before = Date.now()
      const rotated = await h.call<CreatedWebhook>('POST', `${base}/rotate-secret`)
      expect(rotated.status).toBe(200)
      const second = rotated.body.secret
      expect(second).toMatch(/^whsec_/)
      expect(second).not.toBe(first)
      const until = Date.parse(rotated.body.webhook.previousSecretExpiresAt ?? '')
      expect(until - before).toBeGreaterThanOrEqual(86_400_000)
      expect(until - Date.now()).toBeLessThanOrEqual(86_400_000)
      const got = await h.call<Webhook>('GET', base)
      expect(got.body).toEqual(rotated.body.webhook)
      expect(JSON.stringify(got.body)).not.toMatch(/whsec_/)
      expect(await verifiedBy([second, first])).toEqual([true, true])
      const header = String(receiver.to('/rotated').at(-1)?.headers['x-service-signature'])
      expect(header).toMatch(/^t=\d+,v1=[0-9a-f]{64},v1=[0-9a-f]{64}$/)

      // A leaked secret: dropped at once, and the one before it with it.
      const dropped = await h.call<CreatedWebhook>('POST', `${base}/rotate-secret`, {
        keepPreviousForSeconds: 0,
      })
      expect(dropped.status).toBe(200)
      expect(dropped.body.webhook.previousSecretExpiresAt).toBeNull()
      const third = dropped.body.secret
      expect(await verifiedBy([third, second, first])).toEqual([true, false, false])

      for (const body of [
        { keepPreviousForSeconds: -1 },
        { keepPreviousForSeconds: 604_801 },
        { keepPreviousForSeconds: 1.5 },
        { extra: true },
      ]) {
        const res = await h.call<{ error: { code: string } }>('POST', `${base}/rotate-secret`, body)
        expect([res.status, res.body.error.code], JSON.stringify(body)).toEqual([400, 'VALIDATION_ERROR'])
      }
      expect(
        (await h.call('POST', `/api/v1/organizations/${h.org}/webhooks/${newId()}/rotate-secret`)).status,
      ).toBe(404)
      expect((await h.call('POST', `${base}/rotate-secret`, {}, { role: 'MEMBER' })).status).toBe(403)

      // Two at once: each answer is a 200 or a 409, and every secret a 200 handed out signs.
      const race = await Promise.all(
        [1, 2].map(() => h.call<CreatedWebhook>('POST', `${base}/rotate-secret`, {})),
      )
      const won = race.filter((r) => r.status === 200).map((r) => r.body.secret)
      expect(race.every((r) => r.status === 200 || r.status === 409)).toBe(true)
      expect(won.length).toBeGreaterThanOrEqual(1)
      expect(await verifiedBy(won)).toEqual(won.map(() => true))

      await vi.waitFor(
        () =>
          expect(
            audit.filter((e) => e.resource.id === webhook._id && e.action === 'webhook.secret_rotated'),
          ).toHaveLength(2 + won.length),
        { timeout: 5_000, interval: 20 },
      )
      const summaries = audit.filter((e) => e.action === 'webhook.secret_rotated').map((e) => e.summary)
      expect(summaries[1]).toBe(
        `rotated the signing secret of the webhook to ${new URL(receiver.base).host}; the previous secret signs no more`,
      )
      expect(JSON.stringify(audit)).not.toMatch(/whsec_/)
    })

    it('redelivers a delivery under the same ids, with a fresh retry round', async () => {
      const { webhook } = await create(h, `${receiver.base}/redeliver`)
      const e = event(h.org)
      await publish(h, e)
      await vi.waitFor(async () => expect((await deliveries(h, webhook._id))[0]?.status).toBe('DELIVERED'))
      const [first] = await deliveries(h, webhook._id)
      if (!first) throw new Error('no delivery')
      receiver.script('/redeliver', [500])
      const base = `/api/v1/organizations/${h.org}/webhooks/${webhook._id}/deliveries`
      const res = await h.call<WebhookDelivery>('POST', `${base}/${first._id}/redeliver`)
      expect(res.status).toBe(202)
      expect(res.body).toMatchObject({ _id: first._id, status: 'PENDING', attemptCount: 1 })
      await vi.waitFor(async () => {
        const [d] = await deliveries(h, webhook._id)
        expect(d?.attempts.map((a) => a.statusCode)).toEqual([200, 500, 200])
        expect(d?.status).toBe('DELIVERED')
      })
      const requests = receiver.to('/redeliver')
      expect(requests.map((r) => r.headers['x-service-delivery'])).toEqual([first._id, first._id, first._id])
      expect(requests.map((r) => r.headers['webhook-id'])).toEqual([e.id, e.id, e.id])
      expect((await h.call('POST', `${base}/${newId()}/redeliver`)).status).toBe(404)
    })

    it('delivers each event kind to the subscriptions that chose it (default: version.published only)', async () => {
      const byDefault = await create(h, `${receiver.base}/kinds-default`)
      expect(byDefault.webhook.events).toEqual(['version.published'])
      await create(h, `${receiver.base}/kinds-all`, {
        events: ['version.published', 'environment.promoted', 'prompt.visibility.changed', 'prompt.deleted'],
      })
      await create(h, `${receiver.base}/kinds-deleted`, { events: ['prompt.deleted'] })
      const promptId = newId()
      const at = new Date().toISOString()
      const promoted = {
        id: newId(),
        type: 'environment.promoted',
        createdAt: at,
        organizationId: h.org,
        data: {
          promptId,
          slug: 's',
          environment: 'production',
          versionId: newId(),
          version: 1,
          promotedBy: newId(),
        },
      }
      const visibility = {
        id: newId(),
        type: 'prompt.visibility.changed',
        createdAt: at,
        organizationId: h.org,
        data: { promptId, slug: 's', isPublic: true },
      }
      const deleted = {
        id: newId(),
        type: 'prompt.deleted',
        createdAt: at,
        organizationId: h.org,
        data: { promptId, slug: 's' },
      }
      await h.bus.publishDurable(SUBJECTS.environmentPromoted, promoted, promoted.id)
      await h.bus.publishDurable(SUBJECTS.promptVisibilityChanged, visibility, visibility.id)
      await h.bus.publishDurable(SUBJECTS.promptDeleted, deleted, deleted.id)
      const published = event(h.org)
      await publish(h, published)
      await vi.waitFor(() => expect(receiver.to('/kinds-all')).toHaveLength(4), { timeout: 5_000 })
      await vi.waitFor(() => expect(receiver.to('/kinds-deleted')).toHaveLength(1))
      await vi.waitFor(() => expect(receiver.to('/kinds-default')).toHaveLength(1))
      const kinds = (path: string) =>
        receiver
          .to(path)
          .map((r) => r.headers['x-service-event'])
          .sort()
      expect(kinds('/kinds-all')).toEqual([
        'environment.promoted',
        'prompt.deleted',
        'prompt.visibility.changed',
        'version.published',
      ])
      expect(kinds('/kinds-deleted')).toEqual(['prompt.deleted'])
      expect(kinds('/kinds-default')).toEqual(['version.published'])
      // Same envelope and signatures as version.published.
      const [req] = receiver.to('/kinds-deleted')
      if (!req) throw new Error('no request')
      expect(JSON.parse(req.body)).toEqual(deleted)
      expect(req.headers['webhook-id']).toBe(deleted.id)
      expect(String(req.headers['x-service-signature'])).toMatch(/^t=\d+,v1=[0-9a-f]{64}$/)
    })

    it('does not send a subscription the events from before it existed', async () => {
      const { webhook } = await create(h, `${receiver.base}/replay`)
      const old = event(h.org, { createdAt: new Date(Date.now() - 3_600_000).toISOString() })
      await publish(h, old)
      const fresh = event(h.org)
      await publish(h, fresh)
      await vi.waitFor(() => expect(receiver.to('/replay')).toHaveLength(1))
      expect(receiver.to('/replay')[0]?.headers['webhook-id']).toBe(fresh.id)
      expect((await deliveries(h, webhook._id)).map((d) => d.eventId)).toEqual([fresh.id])
    })

    it('ignores malformed events', async () => {
      const { webhook } = await create(h, `${receiver.base}/malformed`)
      await h.bus.publishDurable(SUBJECTS.versionPublished, { hello: 'world' }, newId())
      await h.bus.publishDurable(SUBJECTS.versionPublished, { ...event(h.org), type: 'other' }, newId())
      const probe = event(h.org)
      await publish(h, probe)
      await vi.waitFor(() => expect(receiver.to('/malformed')).toHaveLength(1))
      expect(receiver.to('/malformed')[0]?.headers['webhook-id']).toBe(probe.id)
      expect(await deliveries(h, webhook._id)).toHaveLength(1)
    })

    it('pages the delivery log', async () => {
      const { webhook } = await create(h, `${receiver.base}/paged`)
      for (let i = 0; i < 3; i++) await publish(h, event(h.org))
      await vi.waitFor(() => expect(receiver.to('/paged')).toHaveLength(3))
      const res = await h.call<WebhookDeliveryList>(
        'GET',
        `/api/v1/organizations/${h.org}/webhooks/${webhook._id}/deliveries?page=2&limit=2`,
      )
      expect(res.body.deliveries).toHaveLength(1)
      expect(res.body.pagination).toEqual({ page: 2, limit: 2, total: 3, totalPages: 2, hasNextPage: false })
      const bad = await h.call(
        'GET',
        `/api/v1/organizations/${h.org}/webhooks/${webhook._id}/deliveries?limit=101`,
      )
      expect(bad.status).toBe(400)
    })
  })

  describe('restart', () => {
    let other: Harness | undefined
    afterEach(async () => {
      await other?.close()
      other = undefined
    })

    it('resumes a pending retry from the store after a restart', async () => {
      const dataDir = mkdtempSync(join(tmpdir(), 'pm-webhooks-restart-'))
      const bus = new MemoryBus(20)
      // Retries due after 5 s * 0.2 = 1 s: long enough to stop the service in between.
      const env = { WEBHOOK_RETRY_SCALE: '0.2' }
      const first = await harness(env, { dataDir, bus })
      const { webhook } = await create(first, `${receiver.base}/restart`)
      receiver.script('/restart', [500])
      await publish(first, event(first.org))
      let pendingAt = ''
      await vi.waitFor(async () => {
        const [d] = await deliveries(first, webhook._id)
        expect(d).toMatchObject({ status: 'PENDING', attemptCount: 1 })
        pendingAt = d?.nextAttemptAt ?? ''
      })
      await first.close()
      expect(receiver.to('/restart')).toHaveLength(1)

      other = await harness(env, { dataDir, bus: new MemoryBus(20) })
      const call = <T>(m: string, u: string) => other?.call<T>(m, u, undefined, { organizationId: first.org })
      await vi.waitFor(
        async () => {
          const res = await call<WebhookDeliveryList>(
            'GET',
            `/api/v1/organizations/${first.org}/webhooks/${webhook._id}/deliveries`,
          )
          expect(res?.body.deliveries[0]).toMatchObject({ status: 'DELIVERED', attemptCount: 2 })
        },
        { timeout: 5_000, interval: 50 },
      )
      expect(receiver.to('/restart')).toHaveLength(2)
      expect(Date.now()).toBeGreaterThanOrEqual(Date.parse(pendingAt))
      await bus.close()
    })
  })
})

describe('address checks (private targets not allowed)', () => {
  let receiver: Receiver
  let h: Harness
  // A name that resolves to a public address at registration and to loopback afterwards
  // (DNS rebinding): the delivery-time check is the one that must catch it.
  const answers = new Map<string, string>([
    ['rebind.example.test', '93.184.216.34'],
    ['internal.example.test', '10.1.2.3'],
  ])
  const lookup: HostLookup = async (host) => {
    const address = answers.get(host)
    if (!address) throw new Error(`ENOTFOUND ${host}`)
    return [{ address, family: address.includes(':') ? 6 : 4 }]
  }

  beforeAll(async () => {
    receiver = await Receiver.start()
    h = await harness({ WEBHOOK_ALLOW_PRIVATE_TARGETS: 'false' }, { lookup })
  })
  afterAll(async () => {
    await h?.close()
    await receiver?.close()
  })

  it('refuses private, loopback, link-local and mapped addresses at registration', async () => {
    const port = new URL(receiver.base).port
    for (const url of [
      `http://127.0.0.1:${port}/`,
      'http://10.0.0.1/',
      'http://169.254.169.254/latest/meta-data/',
      'http://[::1]/',
      'http://[::ffff:127.0.0.1]/',
      'http://2130706433/',
      'http://0x7f.1/',
      'http://[fd00::1]/',
      'http://internal.example.test/hook',
    ]) {
      const res = await h.call<{ error: { code: string; message: string } }>(
        'POST',
        `/api/v1/organizations/${h.org}/webhooks`,
        { url },
      )
      expect(res.status, url).toBe(400)
      expect(res.body.error.code).toBe('VALIDATION_ERROR')
      expect(res.body.error.message).toMatch(/non-public address/)
    }
  })

  it('checks the address again at delivery time', async () => {
    const port = new URL(receiver.base).port
    const { webhook } = await create(h, `http://rebind.example.test:${port}/rebind`)
    answers.set('rebind.example.test', '127.0.0.1')
    await publish(h, event(h.org))
    await vi.waitFor(async () => {
      const [d] = await deliveries(h, webhook._id)
      expect(d?.attempts[0]?.error).toMatch(/refused target \(non_public_address\).*127\.0\.0\.1/)
      expect(d?.status).toBe('PENDING')
    })
    const test = await h.call<WebhookDelivery>(
      'POST',
      `/api/v1/organizations/${h.org}/webhooks/${webhook._id}/test`,
    )
    expect(test.body.attempts[0]?.error).toMatch(/non_public_address/)
    expect(receiver.requests).toHaveLength(0)
  })
})
