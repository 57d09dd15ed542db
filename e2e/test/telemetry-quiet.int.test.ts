import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { OtlpReceiver } from '../src/otlpReceiver.ts'
import { ADMIN, runSlice } from '../src/slice.ts'
import { builtDashboard } from '../src/dashboardBuild.ts'

/**
 * The embedded default's telemetry on a fresh, idle install (issue 31): the metrics the
 * operations guide alerts on exist at 0 before their first event, the dashboard's hashed
 * assets share one route label and its page loads are labelled, and an idle service (pollers
 * at 100 ms, probes, scrapes) exports no span, even after traced requests kicked its pollers.
 */
describe('telemetry of a fresh, idle embedded default', () => {
  let proc: RunningProcess
  let otlp: OtlpReceiver
  let base: string
  let metricsUrl: string
  let dataDir: string

  const scrape = async () => (await fetch(metricsUrl)).text()

  beforeAll(async () => {
    const dashboardDir = builtDashboard()
    otlp = await OtlpReceiver.start()
    dataDir = mkdtempSync(join(tmpdir(), 'pm-telemetry-'))
    const port = await freePort()
    const metricsPort = await freePort()
    base = `http://127.0.0.1:${port}`
    metricsUrl = `http://127.0.0.1:${metricsPort}/metrics`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      DASHBOARD_DIR: dashboardDir,
      METRICS_PORT: String(metricsPort),
      OTEL_EXPORTER_OTLP_ENDPOINT: otlp.url,
      OUTBOX_POLL_MS: '100',
      WEBHOOK_POLL_MS: '100',
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
  }, 180_000)

  afterAll(async () => {
    await proc?.stop()
    await otlp?.close()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  it('has the counters and gauges the alerts read, at 0, before any event', async () => {
    const text = await scrape()
    for (const series of [
      'pm_rate_limit_refusals_total{limiter="api-key"} 0',
      'pm_rate_limit_refusals_total{limiter="login-ip"} 0',
      'pm_webhook_attempts_total{outcome="failed"} 0',
      'pm_webhook_attempts_total{outcome="delivered"} 0',
      'pm_webhook_deliveries_attempts_count{outcome="failed"} 0',
      'pm_outbox_events_sent_total 0',
      'pm_outbox_backlog_events 0',
      'pm_render_cache_lookups_total{result="miss"} 0',
      'pm_gateway_key_cache_lookups_total{result="hit"} 0',
    ]) {
      expect(text.split('\n'), series).toContain(series)
    }
  })

  it('labels the dashboard’s hashed assets as one route and its page loads as /*', async () => {
    const page = await fetch(`${base}/prompts`)
    expect(page.status).toBe(200)
    const assets = [...(await page.text()).matchAll(/(?:src|href)="(\/assets\/[^"]+)"/g)].map((m) => m[1])
    expect(assets.length).toBeGreaterThan(0)
    for (const asset of assets) expect((await fetch(`${base}${asset}`)).status).toBe(200)
    await fetch(`${base}/`)
    const lines = (await scrape())
      .split('\n')
      .filter((l) => l.startsWith('pm_http_request_duration_seconds_count'))
    const gateway = lines.filter((l) => l.includes('service="gateway"'))
    expect(gateway.some((l) => l.includes('route="/assets/*"') && l.includes('status="200"'))).toBe(true)
    expect(gateway.filter((l) => /route="\/assets\/[^*]/.test(l))).toEqual([])
    expect(gateway.some((l) => l.includes('route="/*"') && l.includes('status="200"'))).toBe(true)
    expect(gateway.filter((l) => l.includes('route="unmatched"') && l.includes('status="200"'))).toEqual([])
  })

  it('exports no span while idle (pollers, probes and scrapes), even after traced writes kicked them, and still traces a request', async () => {
    // Traced requests that write first (sign-in, a key, a prompt published and invoked): they
    // kick the audit relays, the outbox relay and the webhook worker, whose later idle passes
    // must not run on in those requests' traces.
    await runSlice(base)
    // Then flush what they caused: a marker request, waited for.
    expect((await fetch(`${base}/api/v1/openapi.json?marker`)).status).toBe(200)
    await vi.waitFor(
      () => expect(otlp.spans.some((sp) => sp.name === 'GET /api/v1/openapi.json')).toBe(true),
      {
        timeout: 20_000,
        interval: 200,
      },
    )
    const before = otlp.spans.length
    const idleUntil = Date.now() + 3_000
    while (Date.now() < idleUntil) {
      await fetch(`${base}/health/live`)
      await fetch(`${base}/health/ready`)
      await scrape()
      await new Promise((resolve) => setTimeout(resolve, 250))
    }
    // A real request afterwards: its span arriving shows the exporter has flushed the idle window.
    const res = await fetch(`${base}/api/v1/docs`)
    expect(res.status).toBe(200)
    await vi.waitFor(
      () => {
        expect(otlp.spans.some((sp) => sp.name === 'GET /api/v1/docs')).toBe(true)
      },
      { timeout: 20_000, interval: 200 },
    )
    const docs = otlp.spans.find((sp) => sp.name === 'GET /api/v1/docs')
    const idle = otlp.spans
      .slice(before)
      .filter((sp) => sp.traceId !== docs?.traceId)
      .map((sp) => `${sp.service}:${sp.name}`)
    expect(idle).toEqual([])
    expect(
      otlp.spans
        .slice(before)
        .filter((sp) => !sp.parentSpanId)
        .map((sp) => `${sp.service}:${sp.name}`),
    ).toEqual(['prompt-service:GET /api/v1/docs'])
  })
})
