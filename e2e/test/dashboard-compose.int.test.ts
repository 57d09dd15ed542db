import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { ADMIN } from '../src/slice.ts'
import { builtDashboard } from '../src/dashboardBuild.ts'

/**
 * The editor's composition tools (issue 26) in Debian's chromium against the embedded default:
 * "Insert reference" with a slug search, the reference highlighted and linked, the preview
 * rendering the included prompt, and "Used by" on the included one. Screenshots at 1280 and
 * 390 px into e2e/.screenshots/ (names starting with "compose-").
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const SHOTS = join(REPO_ROOT, 'e2e', '.screenshots')
const WIDTHS = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
] as const

/** The machine may be loaded: a page's queries can take seconds. */
const SLOW = { timeout: 15_000, interval: 100 }

interface Data<T> {
  data: T
}

describe('the dashboard: composing prompts', () => {
  let dashboardDir: string
  let dataDir: string
  let proc: RunningProcess
  let base: string
  let browser: Browser
  let page: Page
  let token: string
  const errors: string[] = []

  const api = async <T>(method: string, path: string, body?: unknown) => {
    const res = await call<Data<T>>(base, method, path, { token, ...(body !== undefined ? { body } : {}) })
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(300)
    return res.body.data
  }

  async function shots(name: string): Promise<void> {
    for (const size of WIDTHS) {
      await page.setViewportSize(size)
      await page.waitForTimeout(150)
      await page.screenshot({ path: join(SHOTS, `${name}-${size.width}.png`), fullPage: true })
    }
    await page.setViewportSize(WIDTHS[0])
  }

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing (or set CHROMIUM_PATH)`)
    dashboardDir = builtDashboard()
    mkdirSync(SHOTS, { recursive: true })
    dataDir = mkdtempSync(join(tmpdir(), 'pm-dashboard-compose-'))
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      DASHBOARD_DIR: dashboardDir,
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ADMIN_NAME: 'Ada Admin',
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
    const login = await call<Data<{ accessToken: string }>>(base, 'POST', '/api/v1/auth/login', {
      body: { email: ADMIN.email, password: ADMIN.password },
    })
    token = login.body.data.accessToken
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] })
    const context = await browser.newContext({ viewport: WIDTHS[0], locale: 'en-GB', timezoneId: 'UTC' })
    page = await context.newPage()
    page.setDefaultTimeout(10_000)
    page.on('pageerror', (err) => errors.push(err.message))
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    await proc?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  it('inserts a reference, previews it resolved, and shows "Used by" on the included prompt', async ({
    onTestFailed,
  }) => {
    onTestFailed(async () => {
      await page?.screenshot({ path: join(SHOTS, 'compose-failure.png'), fullPage: true }).catch(() => {})
    })
    const policy = await api<{ _id: string }>('POST', '/api/v1/prompts', {
      name: 'Refund policy',
      template: 'Never promise refunds to {{customer}}.',
    })
    await api('POST', `/api/v1/prompts/${policy._id}/publish`, {})
    const parent = await api<{ _id: string }>('POST', '/api/v1/prompts', {
      name: 'Support answer',
      template: '{{#if vip}}Priority. {{/if}}Answer {{customer}}. ',
    })

    await page.goto(`${base}/sign-in`)
    await page.getByLabel('Email').fill(ADMIN.email)
    await page.getByLabel('Password').fill(ADMIN.password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL(/\/prompts$/)

    await page.goto(`${base}/prompts/${parent._id}`)
    await page.getByRole('button', { name: 'Insert reference' }).click()
    await page.getByLabel('Find a prompt by name or slug').fill('refund')
    await page.getByRole('button', { name: /refund-policy/ }).click()
    // Highlighted in the editor and linked below it.
    await expect
      .poll(() => page.locator('.cm-reference').first().textContent(), SLOW)
      .toBe('{{> refund-policy}}')
    expect(await page.locator('.cm-block').count()).toBeGreaterThan(0)
    await expect.poll(() => page.getByRole('link', { name: 'refund-policy' }).isVisible(), SLOW).toBe(true)
    await page.getByRole('button', { name: 'Save draft' }).click()
    await expect
      .poll(() => page.getByText('Draft saved.', { exact: false }).first().isVisible(), SLOW)
      .toBe(true)
    await shots('compose-editor')

    const saved = await api<{ template: string }>('GET', `/api/v1/prompts/${parent._id}`)
    expect(saved.template).toBe('{{#if vip}}Priority. {{/if}}Answer {{customer}}. {{> refund-policy}}')

    await page.getByRole('link', { name: 'Preview' }).click()
    await page.getByRole('button', { name: 'Render draft' }).click()
    await expect
      .poll(() => page.locator('#draft-result ~ *, .rendered').first().textContent(), SLOW)
      .toContain('Never promise refunds to')
    await shots('compose-preview')

    await page.goto(`${base}/prompts/${policy._id}`)
    await expect.poll(() => page.getByRole('heading', { name: 'Used by' }).isVisible(), SLOW).toBe(true)
    expect(await page.getByRole('link', { name: 'Support answer' }).isVisible()).toBe(true)
    await shots('compose-used-by')
    expect(errors).toEqual([])
  })
})
