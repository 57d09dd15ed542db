import type { VersionPublishedEvent } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { type Stack, startStack } from '../src/stack.ts'
import { verifyByHand, verifyWithLibrary, WebhookReceiver } from '../src/webhookReceiver.ts'
import {
  createPrompt,
  createWebhook,
  listDeliveries,
  login,
  publishVersion,
  type Session,
} from '../src/webhooks.ts'

const VERSIONS = 1000
const PATHS = ['/load-a', '/load-b', '/load-c'] as const
const PUBLISHERS = 8

describe('webhooks under load: 1,000 published versions, 3 subscriptions', () => {
  let stack: Stack
  let receiver: WebhookReceiver
  let s: Session

  beforeAll(async () => {
    receiver = await WebhookReceiver.start()
    stack = await startStack({
      WEBHOOK_CONSUMER: `webhooks-load-${newId()}`,
      WEBHOOK_CONCURRENCY: '32',
      // 3,000 attempt lines and 1,000 request lines per service would only cost time here.
      LOG_LEVEL: 'warn',
    })
    s = await login(stack.gateway)
  }, 120_000)

  afterAll(async () => {
    await stack?.stop()
    await receiver?.close()
  })

  it('makes 3,000 deliveries: all logged, none lost, none duplicated', async () => {
    const subs = []
    for (const path of PATHS) subs.push(await createWebhook(stack.gateway, s, `${receiver.base}${path}`))
    // Publishes go through the gateway and the prompts service (outbox, JetStream), like a user's.
    const prompts = await Promise.all(
      Array.from({ length: PUBLISHERS }, (_, i) => createPrompt(stack.gateway, s, `Load ${i}`)),
    )
    const started = Date.now()
    const versionIds = (
      await Promise.all(
        prompts.map(async (promptId, i) => {
          const ids: string[] = []
          for (let n = i; n < VERSIONS; n += PUBLISHERS)
            ids.push(await publishVersion(stack.gateway, s, promptId))
          return ids
        }),
      )
    ).flat()
    const published = Date.now()
    expect(new Set(versionIds).size).toBe(VERSIONS)

    await vi.waitFor(() => expect(receiver.requests.length).toBeGreaterThanOrEqual(VERSIONS * PATHS.length), {
      timeout: 120_000,
      interval: 250,
    })
    const delivered = Date.now()
    console.log(
      `published ${VERSIONS} versions in ${published - started} ms; ` +
        `${receiver.requests.length} deliveries received ${delivered - started} ms after the first publish`,
    )

    for (const [i, path] of PATHS.entries()) {
      const requests = receiver.to(path)
      const secret = subs[i]?.secret ?? ''
      // Exactly one request per version: none lost, none duplicated.
      expect(requests).toHaveLength(VERSIONS)
      const events = requests.map((r) => JSON.parse(r.body) as VersionPublishedEvent)
      expect(new Set(events.map((e) => e.id)).size).toBe(VERSIONS)
      expect(new Set(events.map((e) => e.data.versionId))).toEqual(new Set(versionIds))
      expect(new Set(requests.map((r) => r.headers['x-service-delivery'])).size).toBe(VERSIONS)
      for (const r of requests) {
        expect(verifyByHand(r, secret)).toBe(true)
        verifyWithLibrary(r, secret)
      }
    }

    // The log agrees: 1,000 deliveries per subscription, all DELIVERED at the first attempt.
    for (const sub of subs) {
      const all = await listDeliveries(stack.gateway, s, sub.webhook._id, '?limit=1')
      expect(all.pagination.total).toBe(VERSIONS)
      const done = await listDeliveries(stack.gateway, s, sub.webhook._id, '?status=DELIVERED&limit=100')
      expect(done.pagination.total).toBe(VERSIONS)
      for (const d of done.deliveries) expect(d.attempts).toMatchObject([{ number: 1, statusCode: 200 }])
    }
    // Nothing is still queued, so nothing more can arrive.
    expect(receiver.requests).toHaveLength(VERSIONS * PATHS.length)
  }, 240_000)
})
