import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call, type Data } from '../src/client.ts'
import {
  CONTEXT,
  type DashboardService,
  failureShot,
  launchChromium,
  prepareDashboard,
  SLOW,
  screenshots,
  signIn,
  startService,
  WALK,
} from '../src/dashboardPage.ts'
import { login } from '../src/prompts.ts'

/**
 * The editor's composition tools (issue 26) in Debian's chromium against the embedded default:
 * "Insert reference" with a slug search, the reference highlighted and linked, the preview
 * rendering the included prompt, and "Used by" on the included one. Screenshots at 1280 and
 * 390 px into e2e/.screenshots/ (names starting with "compose-").
 */
describe('the dashboard: composing prompts', { timeout: WALK }, () => {
  let service: DashboardService
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

  const shots = (name: string) => screenshots(page, name)

  beforeAll(async () => {
    service = await startService(prepareDashboard(), { prefix: 'pm-dashboard-compose-' })
    base = service.base
    token = (await login(base)).token
    browser = await launchChromium()
    const context = await browser.newContext(CONTEXT)
    page = await context.newPage()
    page.setDefaultTimeout(10_000)
    page.on('pageerror', (err) => errors.push(err.message))
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
  })

  it('inserts a reference, previews it resolved, and shows "Used by" on the included prompt', async ({
    onTestFailed,
  }) => {
    onTestFailed(() => failureShot(page, 'compose-failure.png'))
    const policy = await api<{ _id: string }>('POST', '/api/v1/prompts', {
      name: 'Refund policy',
      template: 'Never promise refunds to {{customer}}.',
    })
    await api('POST', `/api/v1/prompts/${policy._id}/publish`, {})
    const parent = await api<{ _id: string }>('POST', '/api/v1/prompts', {
      name: 'Support answer',
      template: '{{#if vip}}Priority. {{/if}}Answer {{customer}}. ',
    })

    await signIn(page, base)

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

    // A new slug would leave "Support answer" including nothing: refused with the dependents named, then forced.
    await page.getByLabel('Slug').fill('refund-rules')
    await page.getByRole('button', { name: 'Save draft' }).click()
    const anyway = page.getByRole('button', { name: 'Change the slug anyway' })
    await expect.poll(() => anyway.isVisible(), SLOW).toBe(true)
    // The prompt that includes this one, the include it has and the one it needs.
    expect(await page.locator('.banner-warn').textContent()).toContain(
      'support-answer includes {{> refund-policy}} and will fail to render until edited to {{> refund-rules}}.',
    )
    await shots('compose-slug-refused')
    await anyway.click()
    await expect
      .poll(() => page.getByText('Draft saved.', { exact: false }).first().isVisible(), SLOW)
      .toBe(true)
    expect((await api<{ slug: string }>('GET', `/api/v1/prompts/${policy._id}`)).slug).toBe('refund-rules')
    expect(errors).toEqual([])
  })
})
