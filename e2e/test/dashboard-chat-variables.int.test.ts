import { execFileSync } from 'node:child_process'
import { existsSync, mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { ADMIN } from '../src/slice.ts'

/**
 * The chat editor's variables table follows the messages as they are typed: a placeholder's
 * name is a used variable (no "unused" badge, no Remove), and a `{{tone}}` typed into a message
 * appears at once, before any save (issue 31).
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const SHOTS = join(REPO_ROOT, 'e2e', '.screenshots')

interface Data<T> {
  data: T
}

describe('the chat editor’s variables table', () => {
  let proc: RunningProcess
  let base: string
  let dataDir: string
  let browser: Browser
  let page: Page
  let promptId: string

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium`)
    execFileSync('pnpm', ['--filter', '@pm/dashboard', 'build'], { cwd: REPO_ROOT, stdio: 'pipe' })
    mkdirSync(SHOTS, { recursive: true })
    dataDir = mkdtempSync(join(tmpdir(), 'pm-chat-vars-'))
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 30_000, proc)
    const login = await call<Data<{ accessToken: string }>>(base, 'POST', '/api/v1/auth/login', {
      body: { email: ADMIN.email, password: ADMIN.password },
    })
    const created = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
      token: login.body.data.accessToken,
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
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] })
    page = await (await browser.newContext({ viewport: { width: 1280, height: 860 } })).newPage()
    page.setDefaultTimeout(10_000)
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    await proc?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  const row = (name: string) =>
    page.locator('tbody tr').filter({ has: page.locator(`th:text-is("${name}")`) })

  it('shows the placeholder as used, offers no Remove for it, and adds a typed {{tone}} at once', async () => {
    await page.goto(`${base}/sign-in`)
    await page.getByLabel('Email').fill(ADMIN.email)
    await page.getByLabel('Password').fill(ADMIN.password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL(/\/prompts$/)
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
    for (const width of [1280, 390]) {
      await page.setViewportSize({ width, height: 860 })
      await page.screenshot({ path: join(SHOTS, `chat-variables-${width}.png`), fullPage: true })
    }
    await page.setViewportSize({ width: 1280, height: 860 })

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
