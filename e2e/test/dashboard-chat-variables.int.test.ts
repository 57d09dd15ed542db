import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import type { Browser, Page } from 'playwright-core'
import { call, type Data } from '../src/client.ts'
import {
  type DashboardService,
  launchChromium,
  prepareDashboard,
  screenshots,
  signIn,
  startService,
  WALK,
} from '../src/dashboardPage.ts'
import { login } from '../src/prompts.ts'

/**
 * The chat editor's variables table follows the messages as they are typed: a placeholder's
 * name is a used variable (no "unused" badge, no Remove), and a `{{tone}}` typed into a message
 * appears at once, before any save (issue 31).
 */
describe('the chat editor’s variables table', { timeout: WALK }, () => {
  let service: DashboardService
  let base: string
  let browser: Browser
  let page: Page
  let promptId: string

  beforeAll(async () => {
    const dashboardDir = prepareDashboard()
    service = await startService(dashboardDir, { prefix: 'pm-chat-vars-', readyMs: 90_000 })
    base = service.base
    const { token } = await login(base)
    const created = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
      token,
      body: {
        name: 'Support bot',
        type: 'chat',
        messages: [
          { role: 'system', content: 'You help {{customer}}.' },
          { type: 'placeholder', name: 'history' },
          { role: 'user', content: '{{question}}' },
        ],
      },
    })
    expect(created.status).toBe(201)
    promptId = created.body.data._id
    browser = await launchChromium()
    page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage()
    page.setDefaultTimeout(10_000)
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
  })

  const row = (name: string) =>
    page.locator('tbody tr').filter({ has: page.locator(`th:text-is("${name}")`) })

  it('shows the placeholder as used, offers no Remove for it, and adds a typed {{tone}} at once', async () => {
    await signIn(page, base)
    await page.goto(`${base}/prompts/${promptId}`)
    await page.getByRole('checkbox', { name: 'history required' }).waitFor()

    const names = () => page.locator('tbody tr th').allInnerTexts()
    expect(await names()).toEqual(['customer', 'history', 'question'])
    expect(await page.getByText('unused').count()).toBe(0)
    expect(
      await page
        .locator('tbody')
        .getByRole('button', { name: /^Remove / })
        .count(),
    ).toBe(0)

    await page.getByRole('textbox', { name: 'Message 1 content' }).click()
    await page.keyboard.press('Control+End')
    await page.keyboard.type(' Be {{tone}}.')
    // At once: no save, no reload.
    await expect.poll(names).toEqual(['customer', 'history', 'question', 'tone'])
    expect(await row('tone').getByRole('checkbox').isChecked()).toBe(true)
    expect(
      await page
        .locator('tbody')
        .getByRole('button', { name: /^Remove / })
        .count(),
    ).toBe(0)
    await screenshots(page, 'chat-variables', {
      widths: [
        { width: 1280, height: 860 },
        { width: 390, height: 860 },
      ],
    })

    // Taking {{question}} out of its message makes it unused: then, and only then, Remove.
    await page.getByRole('textbox', { name: 'Message 3 content' }).click()
    await page.keyboard.press('Control+A')
    await page.keyboard.type('Thanks')
    await expect.poll(() => row('question').getByText('unused').count()).toBe(1)
    expect(
      await page
        .locator('tbody')
        .getByRole('button', { name: /^Remove / })
        .allInnerTexts(),
    ).toEqual(['Remove'])
    expect(await page.getByRole('button', { name: 'Remove question' }).count()).toBe(1)
  })
})
