import { readFileSync } from 'node:fs'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import {
  checkPage,
  type DashboardService,
  launchChromium,
  prepareDashboard,
  screenshots,
  signIn,
  startService,
  WALK,
  WIDTHS,
} from '../src/dashboardPage.ts'
import { login } from '../src/prompts.ts'

/** The prompt page's Export control in a real browser (prompts as code, issue 30). */

describe('dashboard: export a prompt as a file', { timeout: WALK }, () => {
  let service: DashboardService
  let base: string
  let browser: Browser
  let page: Page
  let promptId: string
  let token: string
  const consoleErrors: string[] = []

  beforeAll(async () => {
    service = await startService(prepareDashboard(), { prefix: 'pm-dashboard-files-' })
    base = service.base
    token = (await login(base)).token
    const created = await call<{ data: { _id: string } }>(base, 'POST', '/api/v1/prompts', {
      token,
      body: {
        name: 'Support bot',
        type: 'chat',
        messages: [
          { role: 'system', content: 'You help with {{topic}}.' },
          { type: 'placeholder', name: 'history' },
        ],
        config: { model: 'gpt-4o-mini' },
      },
    })
    expect(created.status).toBe(201)
    promptId = created.body.data._id
    browser = await launchChromium()
    const context = await browser.newContext({ viewport: WIDTHS[0], locale: 'en-GB', acceptDownloads: true })
    page = await context.newPage()
    page.setDefaultTimeout(10_000)
    page.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(msg.text())
    })
    page.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`))
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
  })

  it('downloads the draft as Dotprompt and as Prompty, accessibly at both widths', async () => {
    await signIn(page, base)
    await page.goto(`${base}/prompts/${promptId}`)
    await page.getByRole('button', { name: 'Export' }).waitFor()

    const [dotprompt] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export' }).click(),
    ])
    expect(dotprompt.suggestedFilename()).toBe('support-bot.prompt')
    const text = readFileSync((await dotprompt.path()) ?? '', 'utf8')
    expect(text).toContain('model: gpt-4o-mini')
    expect(text).toContain('{{role "system"}}\nYou help with {{topic}}.\n{{history}}\n')

    await page.getByLabel('Export format').selectOption('prompty')
    const [prompty] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export' }).click(),
    ])
    expect(prompty.suggestedFilename()).toBe('support-bot.prompty')
    expect(readFileSync((await prompty.path()) ?? '', 'utf8')).toContain('system:\nYou help with {{topic}}.')

    await checkPage(page, 'prompt-export')
    expect(consoleErrors).toEqual([])
  })

  it('imports prompt files: checks the plan, then imports and publishes', async () => {
    await page.setViewportSize(WIDTHS[0])
    await page.goto(`${base}/prompts/import`)
    await page.getByLabel('Prompt files', { exact: true }).setInputFiles([
      {
        name: 'greeting.prompt',
        mimeType: 'text/plain',
        buffer: Buffer.from(
          '---\nmodel: gpt-4o\nmetadata:\n  prompt:\n    name: Greeting\n---\nHello {{name}}!',
        ),
      },
      { name: 'broken.prompt', mimeType: 'text/plain', buffer: Buffer.from('---\n- not a mapping\n---\nx') },
    ])
    await page.getByRole('button', { name: 'Check' }).click()
    const plan = page.getByRole('table', { name: 'Import plan' })
    await plan.waitFor()
    await expect.poll(() => plan.innerText()).toContain('create')
    expect(await plan.innerText()).toContain('the front matter is not an object')
    const listed = await call<{ data: { prompts: unknown[] } }>(base, 'GET', '/api/v1/prompts', { token })
    expect(listed.body.data.prompts).toHaveLength(1)
    await page.getByLabel('Publish changed prompts').check()
    await page.getByRole('button', { name: 'Import files' }).click()
    const result = page.getByRole('table', { name: 'Import result' })
    await result.waitFor()
    expect(await result.innerText()).toContain('published v1')
    await screenshots(page, 'import-files')
    const greeting = await call<{ data: { versionCount: number; config: unknown } }>(
      base,
      'GET',
      '/api/v1/prompts/slug/greeting',
      { token },
    )
    expect(greeting.body.data).toMatchObject({ versionCount: 1, config: { model: 'gpt-4o' } })
  })
})
