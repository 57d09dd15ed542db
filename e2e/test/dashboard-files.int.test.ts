import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { ADMIN } from '../src/slice.ts'
import { builtDashboard } from '../src/dashboardBuild.ts'

/** The prompt page's Export control in a real browser (prompts as code, issue 30). */

const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const SHOTS = join(REPO_ROOT, 'e2e', '.screenshots')
const WIDTHS = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
] as const
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: { target: string[] }[]
}

describe('dashboard: export a prompt as a file', () => {
  let dashboardDir: string
  let dataDir: string
  let proc: RunningProcess
  let base: string
  let browser: Browser
  let page: Page
  let promptId: string
  let token: string
  const consoleErrors: string[] = []

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing (or set CHROMIUM_PATH)`)
    dashboardDir = builtDashboard()
    mkdirSync(SHOTS, { recursive: true })
    dataDir = mkdtempSync(join(tmpdir(), 'pm-dashboard-files-'))
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      DASHBOARD_DIR: dashboardDir,
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
    const login = await call<{ data: { accessToken: string } }>(base, 'POST', '/api/v1/auth/login', {
      body: { email: ADMIN.email, password: ADMIN.password },
    })
    token = login.body.data.accessToken
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
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] })
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
    await proc?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  it('downloads the draft as Dotprompt and as Prompty, accessibly at both widths', async () => {
    await page.goto(`${base}/sign-in`)
    await page.getByLabel('Email').fill(ADMIN.email)
    await page.getByLabel('Password').fill(ADMIN.password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL(/\/prompts$/)
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

    for (const size of WIDTHS) {
      await page.setViewportSize(size)
      await page.waitForTimeout(150)
      await page.screenshot({ path: join(SHOTS, `prompt-export-${size.width}.png`), fullPage: true })
      await page.evaluate(axeSource)
      const violations = (await page.evaluate(
        `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)`,
      )) as AxeViolation[]
      const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
      expect(serious.map((v) => `${size.width}: ${v.id} ${v.help}`)).toEqual([])
    }
    expect(consoleErrors).toEqual([])
  }, 90_000)

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
    for (const size of WIDTHS) {
      await page.setViewportSize(size)
      await page.waitForTimeout(150)
      await page.screenshot({ path: join(SHOTS, `import-files-${size.width}.png`), fullPage: true })
    }
    const greeting = await call<{ data: { versionCount: number; config: unknown } }>(
      base,
      'GET',
      '/api/v1/prompts/slug/greeting',
      { token },
    )
    expect(greeting.body.data).toMatchObject({ versionCount: 1, config: { model: 'gpt-4o' } })
  }, 60_000)
})
