import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type Embedded, startEmbedded } from '@pm/embedded'
import { newId } from '@pm/kit'
import { freePort } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call } from '../src/client.ts'
import { type Sample, scrape, total } from '../src/metrics.ts'
import { ADMIN } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'
import { WebhookReceiver } from '../src/webhookReceiver.ts'
import {
  createApiKey,
  createPrompt,
  createWebhook,
  deliveryOf,
  login,
  publishVersion,
} from '../src/webhooks.ts'

const PUBLIC_POINTS = 3

/**
 * The scripted workload: one publish (one outbox event, one webhook delivery), one invoke
 * that misses render's cache and one that hits it, and public-catalog requests past their limit.
 */
async function workload(base: string, receiver: WebhookReceiver): Promise<void> {
  const s = await login(base)
  const key = await createApiKey(base, s, ['prompts:read', 'prompts:write'])
  const promptId = await createPrompt(base, s, `Metrics ${newId()}`)
  const hook = await createWebhook(base, s, `${receiver.base}/metrics-hook`)
  const versionId = await publishVersion(base, s, promptId)
  for (let i = 0; i < 2; i++) {
    const res = await call(base, 'POST', `/api/v1/prompts/${promptId}/invoke`, {
      token: key,
      body: { variables: { name: 'Ada' } },
    })
    expect(res.status).toBe(200)
  }
  await vi.waitFor(
    async () => expect((await deliveryOf(base, s, hook.webhook._id, versionId))?.status).toBe('DELIVERED'),
    { timeout: 20_000, interval: 100 },
  )
  let refused = 0
  for (let i = 0; i <= PUBLIC_POINTS; i++) {
    const res = await call(base, 'GET', '/api/v1/public/prompts')
    if (res.status === 429) refused++
  }
  expect(refused).toBeGreaterThan(0)
}

const delta = (before: Sample[], after: Sample[], name: string, labels: Record<string, string> = {}) =>
  total(after, name, labels) - total(before, name, labels)

describe('metrics (distributed mode): each process on its own METRICS_PORT', () => {
  let stack: Stack
  let receiver: WebhookReceiver

  beforeAll(async () => {
    receiver = await WebhookReceiver.start()
    stack = await startStack(
      {
        WEBHOOK_POLL_MS: '100',
        WEBHOOK_CONSUMER: `webhooks-metrics-${newId()}`,
        RATE_LIMIT_PUBLIC_POINTS: String(PUBLIC_POINTS),
      },
      { metrics: true },
    )
  }, 120_000)

  afterAll(async () => {
    await stack?.stop()
    await receiver?.close()
  })

  it('moves the counters of each service by the workload', async () => {
    const names = ['gateway', 'identity', 'prompts', 'render', 'webhooks']
    const scrapeAll = async () =>
      Object.fromEntries(
        await Promise.all(names.map(async (n) => [n, await scrape(stack.metricsPorts[n] ?? 0)] as const)),
      )
    const before = await scrapeAll()
    await workload(stack.gateway, receiver)
    // The outbox gauges are read at scrape time: once the event is sent both are back to 0
    // (the oldest-unsent age is read by its own query, so it is waited for too).
    await vi.waitFor(async () => {
      const outbox = await scrape(stack.metricsPorts.prompts ?? 0)
      expect(total(outbox, 'pm_outbox_backlog_events')).toBe(0)
      expect(total(outbox, 'pm_outbox_oldest_unsent_age_seconds')).toBe(0)
    })
    const after = await scrapeAll()
    const at = (n: string) => ({ b: before[n] ?? [], a: after[n] ?? [] })

    const prompts = at('prompts')
    expect(delta(prompts.b, prompts.a, 'pm_outbox_events_sent_total')).toBe(1)
    expect(total(prompts.a, 'pm_outbox_oldest_unsent_age_seconds')).toBe(0)
    const webhooks = at('webhooks')
    expect(delta(webhooks.b, webhooks.a, 'pm_webhook_attempts_total', { outcome: 'delivered' })).toBe(1)
    expect(
      delta(webhooks.b, webhooks.a, 'pm_webhook_deliveries_attempts_count', { outcome: 'delivered' }),
    ).toBe(1)
    const render = at('render')
    expect(delta(render.b, render.a, 'pm_render_cache_lookups_total', { result: 'miss' })).toBe(1)
    expect(delta(render.b, render.a, 'pm_render_cache_lookups_total', { result: 'hit' })).toBe(1)
    const gateway = at('gateway')
    expect(delta(gateway.b, gateway.a, 'pm_gateway_key_cache_lookups_total', { result: 'miss' })).toBe(1)
    expect(delta(gateway.b, gateway.a, 'pm_gateway_key_cache_lookups_total', { result: 'hit' })).toBe(1)
    expect(
      delta(gateway.b, gateway.a, 'pm_rate_limit_refusals_total', { limiter: 'public-ip' }),
    ).toBeGreaterThan(0)
    // Request durations by route template, method and status, at the gateway and behind it.
    const invoke = { route: '/api/v1/prompts/:id/invoke', method: 'POST', status: '200' }
    expect(
      delta(gateway.b, gateway.a, 'pm_http_request_duration_seconds_count', {
        service: 'gateway',
        ...invoke,
      }),
    ).toBe(2)
    expect(
      delta(render.b, render.a, 'pm_http_request_duration_seconds_count', { service: 'render', ...invoke }),
    ).toBe(2)
    expect(
      delta(gateway.b, gateway.a, 'pm_http_request_duration_seconds_count', {
        route: '/api/v1/public/prompts',
        status: '429',
      }),
    ).toBeGreaterThan(0)
    // Connection state and the runtime's default metrics.
    expect(total(gateway.a, 'pm_connection_up', { service: 'gateway', connection: 'redis' })).toBe(1)
    for (const n of names) {
      expect(total(after[n] ?? [], 'pm_connection_up', { service: n, connection: 'nats' }), n).toBe(1)
      expect(total(after[n] ?? [], 'process_cpu_user_seconds_total'), n).toBeGreaterThan(0)
      expect(
        (after[n] ?? []).some((s) => s.name === 'nodejs_heap_size_used_bytes'),
        n,
      ).toBe(true)
    }
  }, 60_000)

  it('never serves /metrics on a public or service port', async () => {
    // The gateway's public port: 404. A service's API port: not there either (401 first, as
    // for any path without the gateway's signed context).
    for (const [name, port] of Object.entries(stack.ports)) {
      const res = await fetch(`http://127.0.0.1:${port}/metrics`)
      expect(res.status, name).toBe(name === 'gateway' ? 404 : 401)
      expect(await res.text(), name).not.toContain('process_cpu')
    }
    const other = await fetch(`http://127.0.0.1:${stack.metricsPorts.gateway}/api/v1/openapi.json`)
    expect(other.status).toBe(404)
    await other.body?.cancel()
  })
})

describe('metrics (embedded default): every service from one registry', () => {
  let embedded: Embedded
  let dataDir: string
  let receiver: WebhookReceiver
  let metricsPort: number

  beforeAll(async () => {
    receiver = await WebhookReceiver.start()
    dataDir = mkdtempSync(join(tmpdir(), 'pm-metrics-'))
    metricsPort = await freePort()
    embedded = await startEmbedded({
      PORT: String(await freePort()),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      METRICS_PORT: String(metricsPort),
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_POLL_MS: '100',
      RATE_LIMIT_PUBLIC_POINTS: String(PUBLIC_POINTS),
    })
  }, 60_000)

  afterAll(async () => {
    await embedded?.close()
    await receiver?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('serves the counters of all five services on METRICS_PORT only', async () => {
    expect(embedded.metricsPort).toBe(metricsPort)
    const before = await scrape(metricsPort)
    await workload(embedded.url, receiver)
    const after = await scrape(metricsPort)
    expect(delta(before, after, 'pm_outbox_events_sent_total')).toBe(1)
    expect(delta(before, after, 'pm_webhook_attempts_total', { outcome: 'delivered' })).toBe(1)
    expect(delta(before, after, 'pm_render_cache_lookups_total', { result: 'miss' })).toBe(1)
    expect(delta(before, after, 'pm_gateway_key_cache_lookups_total', { result: 'hit' })).toBe(1)
    expect(delta(before, after, 'pm_rate_limit_refusals_total', { limiter: 'public-ip' })).toBeGreaterThan(0)
    for (const service of ['gateway', 'identity', 'prompts', 'render', 'webhooks']) {
      expect(
        delta(before, after, 'pm_http_request_duration_seconds_count', { service }),
        service,
      ).toBeGreaterThan(0)
    }
    // One runtime, one set of default metrics.
    expect(after.filter((s) => s.name === 'process_cpu_user_seconds_total')).toHaveLength(1)

    const publicPort = await fetch(`${embedded.url}/metrics`)
    expect(publicPort.status).toBe(404)
    await publicPort.body?.cancel()
  }, 60_000)
})
