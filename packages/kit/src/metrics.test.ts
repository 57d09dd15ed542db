import { describe, expect, it } from 'vitest'
import { Metrics, serveMetrics } from './metrics.ts'
import { createService } from './service.ts'

const SECRET = 'x'.repeat(32)

describe('Metrics', () => {
  it('keeps a registry per instance: two never share a sample', async () => {
    const a = new Metrics({ defaultMetrics: false })
    const b = new Metrics({ defaultMetrics: false })
    a.outboxSent.inc()
    expect(await a.scrape()).toContain('pm_outbox_events_sent_total 1')
    expect(await b.scrape()).not.toContain('pm_outbox_events_sent_total')
  })

  it("reads the outbox backlog: the oldest event's age, and 0 exactly when none waits", async () => {
    const m = new Metrics({ defaultMetrics: false })
    const now = Date.parse('2026-11-29T08:00:10.000Z')
    m.setOutboxBacklog({ count: 2, oldestCreatedAt: '2026-11-29T08:00:07.500Z' }, now)
    let text = await m.scrape()
    expect(text).toContain('pm_outbox_backlog_events 2')
    expect(text).toContain('pm_outbox_oldest_unsent_age_seconds 2.5')
    // A clock behind the event's time reads 0, not a negative age.
    m.setOutboxBacklog({ count: 1, oldestCreatedAt: '2026-11-29T08:00:11.000Z' }, now)
    expect(await m.scrape()).toContain('pm_outbox_oldest_unsent_age_seconds 0')
    m.setOutboxBacklog({ count: 0, oldestCreatedAt: null })
    text = await m.scrape()
    expect(text).toContain('pm_outbox_backlog_events 0')
    expect(text).toMatch(/^pm_outbox_oldest_unsent_age_seconds 0$/m)
  })

  it('follows a running total at scrape time, by the difference', async () => {
    const m = new Metrics({ defaultMetrics: false })
    const stats = { hits: 0 }
    m.onCollect(Metrics.follow(m.renderCache, { result: 'hit' }, () => stats.hits))
    stats.hits = 3
    expect(await m.scrape()).toContain('pm_render_cache_lookups_total{result="hit"} 3')
    stats.hits = 5
    expect(await m.scrape()).toContain('pm_render_cache_lookups_total{result="hit"} 5')
  })

  it('observes each request once, by route template, and labels unknown paths "unmatched"', async () => {
    const m = new Metrics({ defaultMetrics: false })
    const app = createService({
      name: 'svc',
      internalSecret: SECRET,
      logLevel: 'silent',
      requireContext: false,
      metrics: { registry: m, connections: { nats: () => false } },
    })
    app.get('/things/:id', async () => ({ ok: true }))
    await app.inject({ method: 'GET', url: '/things/1' })
    await app.inject({ method: 'GET', url: '/things/2' })
    await app.inject({ method: 'GET', url: '/random/path/123' })
    const text = await m.scrape()
    expect(text).toContain(
      'pm_http_request_duration_seconds_count{service="svc",route="/things/:id",method="GET",status="200"} 2',
    )
    expect(text).toContain('route="unmatched",method="GET",status="404"} 1')
    expect(text).not.toContain('/random')
    expect(text).toContain('pm_connection_up{service="svc",connection="nats"} 0')
    await app.close()
  })

  it('serves GET /metrics on its own port and nothing else', async () => {
    const m = new Metrics()
    const server = await serveMetrics(m, '127.0.0.1', 0)
    try {
      const res = await fetch(`http://127.0.0.1:${server.port}/metrics`)
      expect(res.status).toBe(200)
      expect(res.headers.get('content-type')).toContain('text/plain')
      expect(await res.text()).toContain('process_cpu_user_seconds_total')
      const other = await fetch(`http://127.0.0.1:${server.port}/health/live`)
      expect(other.status).toBe(404)
      await other.body?.cancel()
    } finally {
      await server.close()
    }
  })
})
