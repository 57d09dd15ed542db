import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest'
import { launchChromium, QUIET, SHOTS, SHOTS_WANTED, WALK } from '../src/dashboardPage.ts'
import { ADMIN } from '../src/slice.ts'

/**
 * The API reference page (`/api/v1/docs`, Scalar's renderer served by the gateway) in Debian's
 * chromium against the embedded default: it renders the document, try-it sends a request to the
 * same origin and shows its answer, no request goes to any other origin (each is recorded and
 * aborted) and the console shows no error.
 */

describe('the API reference page in a real browser', { timeout: WALK }, () => {
  let proc: RunningProcess
  let base: string
  let dataDir: string
  let browser: Browser
  let page: Page
  const consoleErrors: string[] = []
  const elsewhere: string[] = []
  const sameOrigin: Array<{ method: string; path: string; status: number }> = []

  beforeAll(async () => {
    mkdirSync(SHOTS, { recursive: true })
    dataDir = mkdtempSync(join(tmpdir(), 'pm-api-reference-'))
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
    browser = await launchChromium(QUIET)
    const context = await browser.newContext({ viewport: { width: 1280, height: 860 }, locale: 'en-GB' })
    // Nothing leaves the machine: a request to any other origin is recorded and aborted.
    await context.route(
      (url) => url.origin !== base,
      (route) => {
        elsewhere.push(`${route.request().method()} ${route.request().url()}`)
        return route.abort()
      },
    )
    page = await context.newPage()
    page.setDefaultTimeout(30_000)
    page.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(`${msg.text()} ${msg.location().url}`)
    })
    page.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`))
    page.on('response', (res) => {
      const url = new URL(res.url())
      if (url.origin === base)
        sameOrigin.push({ method: res.request().method(), path: url.pathname, status: res.status() })
    })
  }, 60_000)

  afterAll(async () => {
    await browser?.close()
    await proc?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  it('renders the document, and try-it answers from the same origin; nothing goes elsewhere, no console error', async () => {
    onTestFailed(async () => {
      await page
        .screenshot({ path: join(SHOTS, 'api-reference-failure.png'), fullPage: true })
        .catch(() => {})
    })
    const res = await page.goto(`${base}/api/v1/docs`, { waitUntil: 'commit' })
    expect(res?.status()).toBe(200)
    expect(res?.headers()['content-security-policy']).toContain("connect-src 'self'")
    // The renderer read the document: its title and an operation of every area's sidebar.
    await expect
      .poll(() => page.getByRole('heading', { name: 'Prompt service API' }).isVisible(), { timeout: 30_000 })
      .toBe(true)
    expect(sameOrigin).toContainEqual({ method: 'GET', path: '/api/v1/openapi.json', status: 200 })

    // Try-it: the document's own operation, sent from the page, answered by this gateway.
    await page.getByRole('button', { name: 'Open Group - meta' }).click()
    await page.getByText('This OpenAPI 3.1 document', { exact: true }).first().click()
    await page.getByRole('button', { name: /Test Request\s*\(get \/api\/v1\/openapi\.json\)/ }).click()
    const sent = sameOrigin.length
    await page.getByRole('button', { name: /^Send/ }).first().click()
    await expect
      .poll(() => page.getByText('200 OK', { exact: true }).first().isVisible(), { timeout: 15_000 })
      .toBe(true)
    expect(sameOrigin.slice(sent)).toContainEqual({
      method: 'GET',
      path: '/api/v1/openapi.json',
      status: 200,
    })
    if (SHOTS_WANTED) await page.screenshot({ path: join(SHOTS, 'api-reference-try-it-1280.png') })
    await page.keyboard.press('Escape')

    // Narrow screens get the same page.
    await page.setViewportSize({ width: 390, height: 844 })
    await page.evaluate('window.scrollTo(0, 0)')
    if (SHOTS_WANTED) await page.screenshot({ path: join(SHOTS, 'api-reference-390.png') })

    expect(elsewhere).toEqual([])
    expect(consoleErrors).toEqual([])
  })
})
