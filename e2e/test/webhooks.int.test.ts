import { NatsBus } from '@pm/bus'
import {
  EVENTS_STREAM,
  SUBJECTS,
  type VersionPublishedEvent,
  type Webhook,
  type WebhookDelivery,
} from '@pm/contracts'
import { newId } from '@pm/kit'
import { natsUrl } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call } from '../src/client.ts'
import { auditResponses, type ResponseAudit } from '../src/openapi.ts'
import { type Stack, startStack } from '../src/stack.ts'
import { verifyByHand, verifyWithLibrary, WebhookReceiver } from '../src/webhookReceiver.ts'
import {
  createApiKey,
  createPrompt,
  createWebhook,
  deliveryOf,
  listDeliveries,
  login,
  publishVersion,
  type Session,
} from '../src/webhooks.ts'

interface Data<T> {
  data: T
}
type ErrorReply = { error: { code: string; message: string } }

const eventOf = (body: string) => JSON.parse(body) as VersionPublishedEvent

describe('webhooks through the gateway (distributed mode, real NATS)', () => {
  let stack: Stack
  let audit: ResponseAudit
  let receiver: WebhookReceiver
  let bus: NatsBus
  let s: Session
  let promptId: string

  beforeAll(async () => {
    receiver = await WebhookReceiver.start()
    stack = await startStack({
      // Attempt 2 comes 50 ms after attempt 1, attempt 3 about 3 s after attempt 2: the window
      // in which the SIGKILL test kills webhooks (it does so within a poll of attempt 2).
      WEBHOOK_RETRY_SCALE: '0.01',
      WEBHOOK_POLL_MS: '100',
      // Its own durable consumer, so that stacks running side by side do not share events.
      WEBHOOK_CONSUMER: `webhooks-e2e-${newId()}`,
    })
    audit = auditResponses(stack.gateway)
    bus = await NatsBus.connect({
      url: await natsUrl(),
      stream: EVENTS_STREAM,
      streamSubjects: ['pm.events.>'],
      name: 'e2e-webhooks',
    })
    s = await login(stack.gateway)
    promptId = await createPrompt(stack.gateway, s, 'Webhook Prompt')
  }, 120_000)

  afterAll(async () => {
    audit?.stop()
    await bus?.close()
    await stack?.stop()
    await receiver?.close()
  })

  const hooks = () => `/api/v1/organizations/${s.organizationId}/webhooks`
  const remove = (id: string) => call(stack.gateway, 'DELETE', `${hooks()}/${id}`, { token: s.token })

  it('manages subscriptions for admins and organization:write keys only', async () => {
    const created = await createWebhook(stack.gateway, s, `${receiver.base}/manage`)
    expect(created.secret).toMatch(/^whsec_/)
    const id = created.webhook._id

    const writer = await createApiKey(stack.gateway, s, ['organization:write'])
    const listed = await call<Data<{ webhooks: Webhook[] }>>(stack.gateway, 'GET', hooks(), { token: writer })
    expect(listed.status).toBe(200)
    expect(listed.body.data.webhooks.map((w) => w._id)).toContain(id)
    expect(JSON.stringify(listed.body)).not.toContain(created.secret)

    const patched = await call<Data<Webhook>>(stack.gateway, 'PATCH', `${hooks()}/${id}`, {
      token: writer,
      body: { active: false, url: `${receiver.base}/manage-2` },
    })
    expect(patched.status).toBe(200)
    expect(patched.body.data).toMatchObject({ active: false, url: `${receiver.base}/manage-2` })

    const reader = await createApiKey(stack.gateway, s, ['organization:read', 'prompts:read'])
    const refused = await call<ErrorReply>(stack.gateway, 'GET', hooks(), { token: reader })
    expect(refused.status).toBe(403)
    expect(refused.body.error.code).toBe('INSUFFICIENT_SCOPE')
    expect((await call(stack.gateway, 'GET', hooks())).status).toBe(401)
    const elsewhere = await call<ErrorReply>(
      stack.gateway,
      'GET',
      `/api/v1/organizations/${newId()}/webhooks`,
      {
        token: s.token,
      },
    )
    expect(elsewhere.status).toBe(404)

    const deleted = await remove(id)
    expect(deleted.status).toBe(200)
    expect((await call(stack.gateway, 'GET', `${hooks()}/${id}`, { token: s.token })).status).toBe(404)
  })

  it('delivers environment.promoted, prompt.visibility.changed and prompt.deleted to the subscriptions that chose them', async () => {
    const all = await createWebhook(stack.gateway, s, `${receiver.base}/kinds-all`, {
      events: ['environment.promoted', 'prompt.visibility.changed', 'prompt.deleted'],
    })
    const byDefault = await createWebhook(stack.gateway, s, `${receiver.base}/kinds-default`)
    expect(byDefault.webhook.events).toEqual(['version.published'])
    const id = await createPrompt(stack.gateway, s, `Kinds ${newId()}`)
    const versionId = await publishVersion(stack.gateway, s, id, 'kinds')
    const asAdmin = { token: s.token }
    const promoted = await call(
      stack.gateway,
      'POST',
      `/api/v1/prompts/${id}/environments/production/promote`,
      {
        ...asAdmin,
        body: { versionId },
      },
    )
    expect(promoted.status).toBe(200)
    expect(
      (await call(stack.gateway, 'PATCH', `/api/v1/prompts/${id}`, { ...asAdmin, body: { isPublic: true } }))
        .status,
    ).toBe(200)
    expect((await call(stack.gateway, 'DELETE', `/api/v1/prompts/${id}/publish`, asAdmin)).status).toBe(200)
    expect((await call(stack.gateway, 'DELETE', `/api/v1/prompts/${id}`, asAdmin)).status).toBe(200)

    await vi.waitFor(() => expect(receiver.to('/kinds-all')).toHaveLength(4), {
      timeout: 15_000,
      interval: 50,
    })
    const events = receiver
      .to('/kinds-all')
      .map((req) => {
        expect(verifyByHand(req, all.secret)).toBe(true)
        const event = verifyWithLibrary(req, all.secret) as { type: string; data: Record<string, unknown> }
        expect(req.headers['x-service-event']).toBe(event.type)
        return event
      })
      .sort((a, b) => String(a.type).localeCompare(String(b.type)))
    const slug = events[0]?.data.slug
    expect(events).toMatchObject([
      {
        type: 'environment.promoted',
        organizationId: s.organizationId,
        data: {
          promptId: id,
          environment: 'production',
          versionId,
          version: 1,
          promotedBy: expect.stringMatching(/^[0-9a-f]{24}$/),
        },
      },
      { type: 'prompt.deleted', data: { promptId: id, slug } },
      { type: 'prompt.visibility.changed', data: { promptId: id, slug, isPublic: true } },
      { type: 'prompt.visibility.changed', data: { promptId: id, slug, isPublic: false } },
    ])
    // The default subscription got the publish only.
    await vi.waitFor(() => expect(receiver.to('/kinds-default').length).toBeGreaterThan(0), {
      timeout: 15_000,
    })
    const kinds = receiver.to('/kinds-default').map((r) => r.headers['x-service-event'])
    expect(new Set(kinds)).toEqual(new Set(['version.published']))
    await remove(all.webhook._id)
    await remove(byDefault.webhook._id)
  })

  it('delivers version.published for a publish, signed twice over', async () => {
    const { webhook, secret } = await createWebhook(stack.gateway, s, `${receiver.base}/signed`)
    const versionId = await publishVersion(stack.gateway, s, promptId, 'signed')

    await vi.waitFor(() => expect(receiver.to('/signed')).toHaveLength(1), { timeout: 15_000, interval: 50 })
    const [req] = receiver.to('/signed')
    if (!req) throw new Error('no delivery')
    // 1. By recomputing the HMAC of X-Service-Signature by hand.
    expect(verifyByHand(req, secret)).toBe(true)
    expect(verifyByHand({ ...req, body: `${req.body} ` }, secret)).toBe(false)
    // 2. With the standardwebhooks library (webhook-id, webhook-timestamp, webhook-signature).
    const verified = verifyWithLibrary(req, secret) as VersionPublishedEvent
    expect(verified).toMatchObject({
      type: 'version.published',
      organizationId: s.organizationId,
      data: { promptId, versionId, changeLog: 'signed', slug: 'webhook-prompt' },
    })
    expect(() => verifyWithLibrary(req, `whsec_${Buffer.from('another key').toString('base64')}`)).toThrow()
    expect(req.headers['x-service-event']).toBe('version.published')
    expect(req.headers['webhook-id']).toBe(verified.id)

    await vi.waitFor(async () => {
      const d = await deliveryOf(stack.gateway, s, webhook._id, versionId)
      expect(d).toMatchObject({ status: 'DELIVERED', attemptCount: 1, eventId: verified.id })
      expect(req.headers['x-service-delivery']).toBe(d?._id)
      expect(d?.attempts).toMatchObject([{ number: 1, statusCode: 200, success: true }])
    })

    // Test-send and redeliver, through the gateway.
    const base = `${hooks()}/${webhook._id}`
    const test = await call<Data<WebhookDelivery>>(stack.gateway, 'POST', `${base}/test`, { token: s.token })
    expect(test.status).toBe(200)
    expect(test.body.data).toMatchObject({ eventType: 'webhook.test', status: 'DELIVERED', attemptCount: 1 })
    expect(verifyWithLibrary(receiver.to('/signed')[1] ?? req, secret)).toMatchObject({
      type: 'webhook.test',
    })
    const d = await deliveryOf(stack.gateway, s, webhook._id, versionId)
    const again = await call<Data<WebhookDelivery>>(
      stack.gateway,
      'POST',
      `${base}/deliveries/${d?._id}/redeliver`,
      { token: s.token },
    )
    expect(again.status).toBe(202)
    expect(again.body.data).toMatchObject({ _id: d?._id, status: 'PENDING' })
    await vi.waitFor(() => expect(receiver.to('/signed')).toHaveLength(3), { timeout: 15_000 })
    const redelivered = receiver.to('/signed')[2]
    expect(redelivered?.headers['x-service-delivery']).toBe(d?._id)
    expect(redelivered?.headers['webhook-id']).toBe(verified.id)
    await remove(webhook._id)
  })

  it('retries a receiver that fails twice: three attempts, all logged, then no more', async () => {
    const { webhook, secret } = await createWebhook(stack.gateway, s, `${receiver.base}/flaky`)
    receiver.script('/flaky', [500, 502])
    const versionId = await publishVersion(stack.gateway, s, promptId, 'flaky')

    await vi.waitFor(
      async () =>
        expect((await deliveryOf(stack.gateway, s, webhook._id, versionId))?.status).toBe('DELIVERED'),
      { timeout: 30_000, interval: 100 },
    )
    const d = await deliveryOf(stack.gateway, s, webhook._id, versionId)
    expect(d?.attempts.map((a) => [a.number, a.statusCode, a.success])).toEqual([
      [1, 500, false],
      [2, 502, false],
      [3, 200, true],
    ])
    expect(d).toMatchObject({ attemptCount: 3, nextAttemptAt: null })
    const attempts = receiver.to('/flaky')
    expect(attempts).toHaveLength(3)
    for (const r of attempts) {
      expect(verifyByHand(r, secret)).toBe(true)
      expect(verifyWithLibrary(r, secret)).toMatchObject({ data: { versionId } })
      expect(r.headers['x-service-delivery']).toBe(d?._id)
    }

    // Success stopped the retries: the next event arrives, and nothing more of this one.
    const probe = await publishVersion(stack.gateway, s, promptId, 'probe')
    await vi.waitFor(() => expect(receiver.to('/flaky')).toHaveLength(4), { timeout: 15_000 })
    expect(eventOf(receiver.to('/flaky')[3]?.body ?? '{}').data.versionId).toBe(probe)
    await remove(webhook._id)
  })

  it('survives SIGKILL with a retry pending, and never makes a second delivery of an event', async () => {
    const { webhook, secret } = await createWebhook(stack.gateway, s, `${receiver.base}/kill`)
    receiver.script('/kill', [500, 500])
    const versionId = await publishVersion(stack.gateway, s, promptId, 'kill')

    // Two failed attempts logged; the third is due about 3 s later.
    await vi.waitFor(
      async () => {
        const d = await deliveryOf(stack.gateway, s, webhook._id, versionId)
        expect(d).toMatchObject({ status: 'PENDING', attemptCount: 2 })
      },
      { timeout: 15_000, interval: 50 },
    )
    await stack.processes.webhooks?.kill()
    const killedAt = Date.now()
    expect(receiver.to('/kill')).toHaveLength(2)
    await stack.restart('webhooks')

    await vi.waitFor(
      async () => {
        const d = await deliveryOf(stack.gateway, s, webhook._id, versionId)
        expect(d).toMatchObject({ status: 'DELIVERED', attemptCount: 3 })
        expect(d?.attempts.map((a) => a.statusCode)).toEqual([500, 500, 200])
      },
      { timeout: 30_000, interval: 100 },
    )
    const requests = receiver.to('/kill')
    expect(requests).toHaveLength(3)
    const [, , third] = requests
    if (!third) throw new Error('no third attempt')
    expect(third.receivedAt).toBeGreaterThan(killedAt)
    expect(verifyWithLibrary(third, secret)).toMatchObject({ data: { versionId } })

    // The same event arriving again (a redelivery, or a republish under another message id)
    // makes no new delivery; a later event still gets through, so the consumer has seen it.
    const event = eventOf(requests[0]?.body ?? '{}')
    await bus.publishDurable(SUBJECTS.versionPublished, event, `duplicate-${newId()}`)
    const probe = await publishVersion(stack.gateway, s, promptId, 'after-restart')
    await vi.waitFor(() => expect(receiver.to('/kill')).toHaveLength(4), { timeout: 15_000 })
    expect(eventOf(receiver.to('/kill')[3]?.body ?? '{}').data.versionId).toBe(probe)
    const all = await listDeliveries(stack.gateway, s, webhook._id, '?limit=100')
    expect(all.deliveries.filter((d) => d.eventId === event.id)).toHaveLength(1)
    expect(receiver.to('/kill').filter((r) => r.headers['webhook-id'] === event.id)).toHaveLength(3)
    await remove(webhook._id)
  })

  it('refuses private targets when they are not allowed, at registration and at delivery', async () => {
    // Registered while private targets are allowed (the receiver is on 127.0.0.1) ...
    const { webhook } = await createWebhook(stack.gateway, s, `${receiver.base}/ssrf`)
    stack.env.WEBHOOK_ALLOW_PRIVATE_TARGETS = 'false'
    try {
      await stack.restart('webhooks')
      const port = new URL(receiver.base).port
      for (const url of [
        'http://127.0.0.1/',
        'http://10.0.0.1/',
        'http://169.254.169.254/latest/meta-data/',
        'http://[::1]/',
        'http://[::ffff:127.0.0.1]/',
        'http://2130706433/',
        // A host name that resolves to a loopback address.
        `http://localhost:${port}/ssrf`,
      ]) {
        const res = await call<ErrorReply>(stack.gateway, 'POST', hooks(), { token: s.token, body: { url } })
        expect(res.status, url).toBe(400)
        expect(res.body.error.code).toBe('VALIDATION_ERROR')
        expect(res.body.error.message).toMatch(/non-public address/)
      }

      // ... and refused at delivery time once they are not: no request leaves.
      const versionId = await publishVersion(stack.gateway, s, promptId, 'ssrf')
      await vi.waitFor(
        async () => {
          const d = await deliveryOf(stack.gateway, s, webhook._id, versionId)
          expect(d?.attempts[0]?.error).toMatch(/refused target \(non_public_address\)/)
          expect(d?.attempts[0]?.statusCode).toBeNull()
        },
        { timeout: 15_000, interval: 100 },
      )
      expect(receiver.to('/ssrf')).toHaveLength(0)
    } finally {
      stack.env.WEBHOOK_ALLOW_PRIVATE_TARGETS = 'true'
      await remove(webhook._id)
    }
  })

  it('answered every request above as the OpenAPI document describes', async () => {
    expect(audit.seen.length).toBeGreaterThan(20)
    expect(await audit.problems()).toEqual([])
  })
})
