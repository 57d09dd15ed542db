import { rmSync } from 'node:fs'
import { join } from 'node:path'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it, onTestFailed } from 'vitest'
import { BrowserErrors } from '../src/browserErrors.ts'
import {
  CONTEXT,
  checkPage,
  type DashboardService,
  expectNoOverflow,
  failureShot,
  launchChromium,
  prepareDashboard,
  QUIET,
  SHOTS,
  startService,
  WALK,
  watch,
} from '../src/dashboardPage.ts'
import { ADMIN } from '../src/slice.ts'

/**
 * The dashboard, driven by Debian's chromium (no browser download) against the embedded
 * default: the whole journey of an author, with the security properties checked on the way
 * (no credential in web storage, the refresh cookie's flags, the CSP, no console error and no
 * 4xx/5xx answer but those a step causes on purpose) and axe-core on every page. Screenshots of each page at 1280 and 390 px go to e2e/.screenshots/.
 */
describe('the dashboard: an author’s journey in a real browser', { timeout: WALK }, () => {
  let service: DashboardService
  let base: string
  let browser: Browser
  let context: BrowserContext
  let page: Page
  /** Console errors, page errors and 4xx/5xx answers; the refusals a step causes are allowed there. */
  const errors = new BrowserErrors()
  const refreshes: number[] = []
  /** When the last answer to a refresh arrived (the page asks again 5 s after one at the earliest). */
  let lastRefreshAt = 0
  /** Refreshes answered while no page load was under way: the silent renewals, not a boot's. */
  let silentRefreshes = 0
  /** When the last page load began (a load exchanges the cookie for an access token). */
  let lastLoadAt = 0
  const checked: string[] = []

  /** Screenshots at both widths and axe-core at both (layouts differ), back to 1280 after. */
  async function check(name: string): Promise<void> {
    // From the top: a sticky toolbar would otherwise be drawn where the page was scrolled to.
    await checkPage(page, name, { top: true })
    checked.push(name)
  }

  /** Types into the CodeMirror template editor at the end of its text. */
  async function typeInTemplate(text: string): Promise<void> {
    const editor = page.getByRole('textbox', { name: 'Template' })
    await editor.click()
    await page.keyboard.press('Control+End')
    await page.keyboard.type(text)
  }

  async function templateText(): Promise<string> {
    return (await page.locator('.cm-content').innerText()).replace(/\u200b/g, '')
  }

  /**
   * Waits until a navigation cannot cut a token refresh off half-way: one cut after identity
   * rotated the token, but before the browser kept the new cookie, sends the old one again on the
   * next load, a reuse that ends the session. The page asks again 5 s after an answer at the
   * earliest, so one less than 2 s ago leaves 3 s for the navigation to start; otherwise this
   * waits for the next one.
   */
  async function afterARefresh(): Promise<void> {
    if (Date.now() - lastRefreshAt > 2_000) {
      await page.waitForResponse((r) => r.url().endsWith('/api/v1/auth/refresh'), { timeout: 10_000 })
    }
  }

  beforeAll(async () => {
    // The page under test is the one built from the current sources.
    const dashboardDir = prepareDashboard()
    // Only this journey's leftovers: the part-2 test (dashboard-settings) shares the folder.
    rmSync(join(SHOTS, 'failure.png'), { force: true })
    service = await startService(dashboardDir, {
      env: {
        // Short access tokens: the silent refresh (a minute before expiry, at least 5 s after
        // the last one) happens while the journey runs.
        ACCESS_TOKEN_TTL_SECONDS: '65',
      },
    })
    base = service.base
    browser = await launchChromium(QUIET)
    context = await browser.newContext(CONTEXT)
    page = await context.newPage()
    watch(page, errors)
    page.on('request', (req) => {
      if (req.isNavigationRequest() && req.frame() === page.mainFrame()) lastLoadAt = Date.now()
    })
    page.on('response', (res) => {
      if (!res.url().endsWith('/api/v1/auth/refresh')) return
      refreshes.push(res.status())
      lastRefreshAt = Date.now()
      // A page's boot asks within a moment of its load; the timer asks a minute before expiry.
      if (lastRefreshAt - lastLoadAt > 3_000) silentRefreshes++
    })
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
  })

  it('signs in, creates, edits, previews, publishes twice, diffs, restores, promotes, reloads, signs out', async () => {
    onTestFailed(() => failureShot(page, 'failure.png'))
    // ---- the page and its headers
    const first = await page.goto(`${base}/`)
    expect(first?.status()).toBe(200)
    const csp = first?.headers()['content-security-policy'] ?? ''
    expect(csp).toMatch(/^default-src 'none'; script-src 'self'; style-src 'self' 'nonce-[A-Za-z0-9+/=]+';/)
    expect(csp).toContain("frame-ancestors 'none'")
    expect(csp).not.toContain('unsafe')
    await page.waitForURL(/\/sign-in$/)
    await expect.poll(() => page.getByRole('heading', { name: 'Sign in' }).isVisible()).toBe(true)
    await check('sign-in')

    // No session cookie yet: the page sent no refresh.
    expect(refreshes).toEqual([])

    // ---- the sign-up page says plainly that sign-up is off (AUTH_ALLOW_SIGNUP is not set)
    await page.getByRole('link', { name: 'Sign up' }).click()
    await page.waitForURL(/\/sign-up$/)
    await page.getByLabel('Name').fill('Bo')
    await page.getByLabel('Email').fill('bo@example.com')
    await page.getByLabel('Password').fill('a long passphrase')
    errors.allow(404, 'POST', /^\/api\/v1\/auth\/register$/, 'sign-up is off')
    await page.getByRole('button', { name: 'Sign up' }).click()
    await expect
      .poll(() => page.getByRole('alert').innerText())
      .toContain('Sign-up is turned off on this server')
    await check('sign-up')
    await page.getByRole('link', { name: 'Sign in' }).click()
    await page.waitForURL(/\/sign-in$/)

    // ---- a wrong password: the service's message and code are shown (keyboard only)
    errors.allow(401, 'POST', /^\/api\/v1\/auth\/login$/, 'a wrong password')
    await page.getByLabel('Email').focus()
    await page.keyboard.type(ADMIN.email)
    await page.keyboard.press('Tab')
    await page.keyboard.type('not the password')
    await page.keyboard.press('Enter')
    const refused = page.getByRole('alert')
    await expect.poll(() => refused.innerText()).toContain('email or password is wrong')
    expect(await refused.innerText()).toContain('INVALID_CREDENTIALS')

    // ---- sign in (cookie mode), with the keyboard
    await page.getByLabel('Password').fill('')
    await page.getByLabel('Password').focus()
    await page.keyboard.type(ADMIN.password)
    const loginAnswer = page.waitForResponse((r) => r.url().endsWith('/api/v1/auth/login'))
    await page.keyboard.press('Enter')
    const login = await loginAnswer
    expect(login.status()).toBe(200)
    const session = (await login.json()) as { data: { accessToken: string; refreshToken?: string } }
    expect(session.data.refreshToken).toBeUndefined()
    const setCookie = (await login.headersArray()).filter((h) => h.name.toLowerCase() === 'set-cookie')
    const refreshLine = setCookie.map((h) => h.value).find((v) => v.startsWith('pm_refresh=')) ?? ''
    expect(refreshLine).toMatch(/; HttpOnly/)
    expect(refreshLine).toMatch(/; SameSite=Strict/)
    expect(refreshLine).toMatch(/; Path=\/api\/v1\/auth(;|$)/)
    // Development on plain HTTP: the gateway drops Secure (and only then).
    expect(refreshLine).not.toMatch(/; Secure/)
    const cookie = (await context.cookies()).find((c) => c.name === 'pm_refresh')
    expect(cookie).toMatchObject({ httpOnly: true, sameSite: 'Strict', path: '/api/v1/auth' })
    expect(cookie?.value).toMatch(/^rt_/)

    await page.waitForURL(/\/prompts$/)
    await expect.poll(() => page.getByRole('heading', { name: 'No prompts yet' }).isVisible()).toBe(true)
    await check('prompts-empty')

    // ---- create
    await page.getByRole('link', { name: 'Create prompt' }).first().click()
    await page.waitForURL(/\/prompts\/new$/)
    await page.getByLabel('Description').fill('Greets a new customer')
    await page.getByLabel('Tags').fill('onboarding, email')
    await typeInTemplate('Hello {{ name }}!\nWelcome to {{ place }}.')
    // A name pasted with a tab in it (copied from a table): the banner names the field and says
    // what is wrong, not only "request is invalid".
    errors.allow(400, 'POST', /^\/api\/v1\/prompts$/, 'a name holding a tab')
    await page.getByLabel('Name').fill('Welcome\tmessage')
    await page.getByRole('button', { name: 'Create draft' }).click()
    await expect
      .poll(() => page.getByRole('alert').innerText())
      .toMatch(
        /The prompt was not created: request is invalid.*VALIDATION_ERROR.*name: must not be blank, and must hold no control characters or line breaks/s,
      )
    await check('prompt-new-refused')
    await page.getByLabel('Name').fill('Welcome message')
    await check('prompt-new')
    await page.getByRole('button', { name: 'Create draft' }).click()
    await page.waitForURL(/\/prompts\/[0-9a-f]{24}$/)
    const promptUrl = page.url()

    // ---- edit: variables follow the template; save the draft
    await expect.poll(() => page.getByRole('heading', { name: 'Welcome message' }).isVisible()).toBe(true)
    // The editor is made in a step after the heading's render.
    await expect.poll(() => page.locator('.cm-variable').count()).toBe(2)
    await page.getByLabel('name default').fill('there')
    await page.getByLabel('name required').uncheck()
    await page.getByLabel('place required').uncheck()
    await page.getByLabel('place description').fill('Where they signed up')
    await expect.poll(() => page.getByRole('status').first().innerText()).toBe('Unsaved changes')
    // A form feed pasted from a PDF: shown in the editor as a marked character, and the
    // refusal says which field and what to remove; the text typed is kept.
    errors.allow(400, 'PATCH', /^\/api\/v1\/prompts\/[0-9a-f]{24}$/, 'a template holding a form feed')
    await page.getByRole('textbox', { name: 'Template' }).click()
    await page.keyboard.press('Control+End')
    await page.keyboard.insertText('\f')
    await expect.poll(() => page.locator('.cm-specialChar').count()).toBe(1)
    expect(await page.locator('.cm-specialChar').getAttribute('title')).toBe('Control character 0xc')
    await page.getByRole('button', { name: 'Save draft' }).click()
    await expect
      .poll(() => page.getByRole('alert').innerText())
      .toMatch(/The draft was not saved: request is invalid.*template: must hold no control characters/s)
    expect(await page.getByRole('status').first().innerText()).toBe('Unsaved changes')
    expect(await page.getByLabel('place description').inputValue()).toBe('Where they signed up')
    await check('editor-refused')
    await page.getByRole('textbox', { name: 'Template' }).click()
    await page.keyboard.press('Control+End')
    await page.keyboard.press('Backspace')
    await expect.poll(() => page.locator('.cm-specialChar').count()).toBe(0)
    await page.getByRole('button', { name: 'Save draft' }).click()
    await expect.poll(() => page.getByText('Draft saved. No version was created.').isVisible()).toBe(true)
    expect(await templateText()).toBe('Hello {{ name }}!\nWelcome to {{ place }}.')
    await check('editor')

    // ---- preview the draft: the unresolved placeholder is marked in place
    await page.getByRole('link', { name: 'Preview' }).click()
    await page.waitForURL(/\/preview$/)
    await page.getByRole('button', { name: 'Render draft' }).click()
    await expect.poll(() => page.locator('mark.unresolved').allInnerTexts()).toEqual(['{{ place }}'])
    expect(await page.locator('pre.rendered').first().innerText()).toContain('Hello there!')
    await check('preview')
    await page.getByLabel(/^place/).fill('Acme')
    await page.getByRole('button', { name: 'Render draft' }).click()
    await expect
      .poll(() => page.locator('pre.rendered').first().innerText())
      .toBe('Hello there!\nWelcome to Acme.')
    expect(await page.locator('mark.unresolved').count()).toBe(0)

    // ---- publish version 1 with a change log (the counter is live)
    await page.getByRole('link', { name: 'Editor' }).click()
    await page.getByRole('button', { name: 'Publish…' }).click()
    const dialog = page.getByRole('dialog', { name: 'Publish a new version' })
    await dialog.getByLabel('Change log').fill('First version')
    expect(await dialog.getByText('13 / 280 characters').isVisible()).toBe(true)
    await check('publish-dialog')
    await dialog.getByRole('button', { name: 'Publish', exact: true }).click()
    await expect.poll(() => page.getByText('Version 1 published.').isVisible()).toBe(true)

    // ---- edit again; leaving with unsaved changes asks first; save and publish version 2
    await typeInTemplate('\nSee you soon, {{ name }}.')
    await expect.poll(() => page.locator('.cm-variable').count()).toBe(3)
    await page.getByRole('link', { name: 'History' }).click()
    const leave = page.getByRole('dialog', { name: 'Leave without saving?' })
    await expect.poll(() => leave.isVisible()).toBe(true)
    await leave.getByRole('button', { name: 'Cancel' }).click()
    expect(page.url()).toBe(promptUrl)
    await page.getByRole('button', { name: 'Save and publish…' }).click()
    const saveAndPublish = page.getByRole('dialog', { name: 'Save and publish' })
    await saveAndPublish.getByLabel('Change log').fill('Add a farewell line')
    await saveAndPublish.getByRole('button', { name: 'Save and publish' }).click()
    await expect.poll(() => page.getByText('Version 2 published.').isVisible()).toBe(true)

    // ---- a link followed while a save is under way asks; once the save is done, it goes on
    let releaseSave = () => {}
    const saveHeld = new Promise<void>((resolve) => {
      releaseSave = resolve
    })
    await page.route(
      (url) => /\/api\/v1\/prompts\/[0-9a-f]{24}$/.test(url.pathname),
      async (route) => {
        if (route.request().method() === 'PATCH') await saveHeld
        await route.fallback()
      },
    )
    await typeInTemplate('\nBye.')
    await page.getByRole('button', { name: 'Save draft' }).click()
    await page.getByRole('link', { name: 'History' }).click()
    await expect.poll(() => leave.isVisible()).toBe(true)
    releaseSave()
    await page.waitForURL(/\/history$/)
    await expect.poll(() => leave.isVisible()).toBe(false)
    await page.unrouteAll()

    // ---- history: both versions, the side-by-side diff of 1 → 2
    await page.getByRole('link', { name: 'History' }).click()
    await page.waitForURL(/\/history$/)
    await expect.poll(() => page.locator('.version').count()).toBe(2)
    expect(await page.locator('.version strong').allInnerTexts()).toEqual(['Version 2', 'Version 1'])
    expect(await page.getByText('Add a farewell line').isVisible()).toBe(true)
    // Version 1's last line had no newline: the appended line is the only change.
    await expect
      .poll(() => page.locator('.diff-table td.added').allTextContents())
      .toEqual(['added: See you soon, {{ name }}.'])
    expect(await page.locator('.diff-table td.removed').allTextContents()).toEqual([])
    await page.getByRole('button', { name: 'View version 1' }).click()
    await check('history')

    // ---- restore version 1 into the draft (the confirmation says history is unchanged)
    await page.getByRole('button', { name: 'Restore version 1' }).click()
    const confirm = page.getByRole('dialog', { name: 'Restore version 1?' })
    expect(await confirm.getByText('The version history is unchanged').isVisible()).toBe(true)
    await confirm.getByRole('button', { name: 'Restore into the draft' }).click()
    await expect.poll(() => page.getByText('The draft now holds version 1.').isVisible()).toBe(true)
    expect(await page.locator('.version').count()).toBe(2)
    // The draft against version 2 now shows the farewell line removed.
    await page.getByLabel('From', { exact: true }).selectOption({ label: 'Version 2' })
    await page.getByLabel('To', { exact: true }).selectOption({ label: 'Draft' })
    await expect
      .poll(() => page.locator('.diff-table td.removed').allTextContents())
      .toEqual(['removed: See you soon, {{ name }}.'])
    expect(await page.locator('.diff-table td.added').allTextContents()).toEqual([])
    await page.getByRole('link', { name: 'Editor' }).click()
    await expect.poll(() => templateText()).toBe('Hello {{ name }}!\nWelcome to {{ place }}.')

    // ---- environments: promote version 2 to production; what invoke?env=production returns
    await page.getByRole('link', { name: 'Environments' }).click()
    await page.waitForURL(/\/environments$/)
    await page.getByLabel('Version for production').selectOption({ label: 'Version 2' })
    await page.getByRole('button', { name: 'Promote to production' }).click()
    const production = page.getByRole('region', { name: 'Production' })
    await expect.poll(() => production.locator('p strong').innerText()).toBe('Version 2')
    await expect
      .poll(() => production.locator('pre.rendered').innerText())
      .toBe('Hello there!\nWelcome to .\nSee you soon, there.')
    await check('environments')

    // ---- preview: invoke a chosen version as a backend would
    await page.getByRole('link', { name: 'Preview' }).click()
    await page.waitForURL(/\/preview$/)
    await page.getByRole('button', { name: 'Invoke' }).waitFor()
    await page.getByLabel('Render from').selectOption({ label: 'Version 1' })
    await page.getByRole('button', { name: 'Invoke' }).click()
    const published = page.getByRole('region', { name: 'Published' })
    await expect.poll(() => published.locator('pre.rendered').innerText()).toBe('Hello there!\nWelcome to .')
    expect(await published.locator('p.hint').innerText()).toBe('Version 1')

    // ---- the list now shows the prompt and the counts
    await page.getByRole('link', { name: 'Prompts', exact: true }).first().click()
    await expect.poll(() => page.getByRole('link', { name: 'Welcome message' }).isVisible()).toBe(true)
    expect(await page.getByRole('list', { name: 'Organization summary' }).innerText()).toContain(
      '1 published',
    )
    await check('prompts')
    // Search, tags and visibility narrow the list (kept in the URL); an empty result says so.
    await page.getByLabel('Search').fill('no such words')
    await expect.poll(() => page.getByRole('heading', { name: 'No prompt matches' }).isVisible()).toBe(true)
    expect(page.url()).toContain('search=no+such+words')
    await page.getByLabel('Search').fill('welcome')
    await page.getByRole('textbox', { name: 'Tags' }).fill('onboarding')
    await expect.poll(() => page.getByRole('link', { name: 'Welcome message' }).isVisible()).toBe(true)
    await page.getByLabel('Visibility').selectOption('public')
    await expect.poll(() => page.getByRole('heading', { name: 'No prompt matches' }).isVisible()).toBe(true)
    await page.getByLabel('Visibility').selectOption('private')
    await expect.poll(() => page.getByRole('link', { name: 'Welcome message' }).isVisible()).toBe(true)
    await page.getByLabel('Search').fill('')
    await page.getByRole('textbox', { name: 'Tags' }).fill('')
    await page.getByLabel('Visibility').selectOption('all')

    // ---- a chat prompt: role messages with placeholders and a config, previewed as messages
    await page.getByRole('link', { name: 'Create prompt' }).first().click()
    await page.waitForURL(/\/prompts\/new$/)
    await page.getByLabel('Name').fill('Support chat')
    await page.getByLabel('Chat: role messages').check()
    await page.getByRole('textbox', { name: 'Message 1 content' }).click()
    await page.keyboard.type('You help {{ customer }} politely.')
    await page.getByRole('textbox', { name: 'Message 2 content' }).click()
    await page.keyboard.type('{{ question }}')
    await page.getByLabel('Config (JSON)').fill('{"model": "small-1", "temperature": 0.2')
    expect(await page.getByText('Config not JSON').isVisible()).toBe(true)
    expect(await page.getByRole('button', { name: 'Create draft' }).isDisabled()).toBe(true)
    await page.getByLabel('Config (JSON)').fill('{"model": "small-1", "temperature": 0.2}')
    await page.getByRole('button', { name: 'Create draft' }).click()
    await page.waitForURL(/\/prompts\/[0-9a-f]{24}$/)
    await expect.poll(() => page.locator('.cm-variable').count()).toBe(2)
    await check('chat-editor')
    await page.getByRole('link', { name: 'Preview' }).click()
    // The editor's variables table labels its inputs "customer required" and so on, and stays
    // on screen while the preview's code loads: wait for the preview's form before filling it.
    await page.waitForURL(/\/preview$/)
    await page.getByRole('button', { name: 'Render draft' }).waitFor()
    await page.getByLabel(/^customer/).fill('Ada')
    await page.getByLabel(/^question/).fill('Where is my order?')
    await page.getByRole('button', { name: 'Render draft' }).click()
    await expect
      .poll(() => page.locator('.rendered-messages pre').allInnerTexts())
      .toEqual(['You help Ada politely.', 'Where is my order?'])
    expect(await page.locator('pre.rendered').last().innerText()).toContain('"model": "small-1"')
    // Publish it, change a message and the config, and compare version 1 with the draft.
    await page.getByRole('link', { name: 'Editor' }).click()
    await page.getByRole('button', { name: 'Publish…' }).click()
    await page.getByRole('dialog', { name: 'Publish a new version' }).getByLabel('Change log').fill('Chat v1')
    await page
      .getByRole('dialog', { name: 'Publish a new version' })
      .getByRole('button', { name: 'Publish' })
      .click()
    await expect.poll(() => page.getByText('Version 1 published.').isVisible()).toBe(true)
    await page.getByRole('textbox', { name: 'Message 2 content' }).click()
    await page.keyboard.press('Control+End')
    await page.keyboard.type(' Thanks!')
    await page.getByLabel('Config (JSON)').fill('{"model": "small-1", "temperature": 0.7}')
    await page.getByRole('button', { name: 'Save draft' }).click()
    await expect.poll(() => page.getByText('Draft saved. No version was created.').isVisible()).toBe(true)
    await page.getByRole('link', { name: 'History' }).click()
    await page.getByLabel('To', { exact: true }).selectOption({ label: 'Draft' })
    await expect
      .poll(() => page.locator('.diff ul.plain li').first().innerText())
      .toBe('~ message 2: [user] {{ question }} → [user] {{ question }} Thanks!')
    // The config line by line: the one setting that changed is the one line marked.
    const configDiff = page.getByRole('table', { name: 'Config changes from Version 1 to Draft' })
    expect(await configDiff.locator('td.code.removed').allTextContents()).toEqual([
      'removed:   "temperature": 0.2',
    ])
    expect(await configDiff.locator('td.code.added').allTextContents()).toEqual([
      'added:   "temperature": 0.7',
    ])
    expect(await configDiff.locator('td.code.same').allTextContents()).toContain('  "model": "small-1",')
    await check('chat-history')

    // ---- environments of a prompt whose variables are required without defaults: nothing is
    // invoked without them (that would be a 400 on every view); the version is shown as stored
    // with what a backend must send, and rendered once the values are filled in.
    await page.getByRole('link', { name: 'Environments' }).click()
    await page.waitForURL(/\/environments$/)
    await page.getByLabel('Version for production').selectOption({ label: 'Version 1' })
    await page.getByRole('button', { name: 'Promote to production' }).click()
    const chatProduction = page.getByRole('region', { name: 'Production' })
    await expect.poll(() => chatProduction.locator('p strong').innerText()).toBe('Version 1')
    await expect
      .poll(() => chatProduction.getByText('A backend must send customer, question').isVisible())
      .toBe(true)
    expect(await chatProduction.locator('.rendered-messages pre').allInnerTexts()).toEqual([
      'You help {{ customer }} politely.',
      '{{ question }}',
    ])
    await check('environments-required')
    await chatProduction.getByLabel(/^customer/).fill('Ada')
    await chatProduction.getByLabel(/^question/).fill('Where is my order?')
    await chatProduction.getByRole('button', { name: 'Render with these values' }).click()
    await expect
      .poll(() => chatProduction.locator('.rendered-messages').last().locator('pre').allInnerTexts())
      .toEqual(['You help Ada politely.', 'Where is my order?'])

    // ---- a second workspace: the organization switcher changes what the list shows
    // A token of its own: the page's first one may have expired by now (65 s tokens).
    const fresh = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: ADMIN.email, password: ADMIN.password }),
    })
    const { data: own } = (await fresh.json()) as { data: { accessToken: string } }
    const beta = await fetch(`${base}/api/v1/organizations`, {
      method: 'POST',
      headers: { authorization: `Bearer ${own.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: 'Beta' }),
    })
    expect(beta.status).toBe(201)
    await afterARefresh()
    await page.reload()
    const switcher = page.getByLabel('Organization', { exact: true })
    await expect.poll(() => switcher.locator('option').allInnerTexts()).toEqual(['Acme', 'Beta'])
    await switcher.selectOption({ label: 'Beta' })
    await expect.poll(() => page.getByRole('heading', { name: 'No prompts yet' }).isVisible()).toBe(true)
    await switcher.selectOption({ label: 'Acme' })
    await expect.poll(() => page.getByRole('link', { name: 'Welcome message' }).isVisible()).toBe(true)

    // ---- a name of 200 characters without a space wraps: no page is wider than the screen
    const longName = `Quarterly${'_report'.repeat(27)}`.slice(0, 200)
    const long = await fetch(`${base}/api/v1/prompts`, {
      method: 'POST',
      headers: { authorization: `Bearer ${own.accessToken}`, 'content-type': 'application/json' },
      body: JSON.stringify({ name: longName, template: 'Hi' }),
    })
    expect(long.status).toBe(201)
    await page.getByRole('link', { name: 'Prompts', exact: true }).first().click()
    // A search of its own: the list shown a moment ago is still fresh in the page's cache.
    await page.getByLabel('Search').fill('Quarterly')
    await expect.poll(() => page.getByRole('link', { name: longName }).isVisible()).toBe(true)
    await expectNoOverflow(page, 'prompts-long-name')
    await page.getByRole('link', { name: longName }).click()
    await expect.poll(() => page.getByRole('heading', { name: longName }).isVisible()).toBe(true)
    await expectNoOverflow(page, 'editor-long-name')
    await check('editor-long-name')

    // ---- a page whose file cannot be fetched (renamed by a redeploy under an open tab): a
    // message and a reload, inside the frame
    await page.route('**/assets/Playground-*', (route) => route.fulfill({ status: 404, body: '' }))
    await page.getByRole('link', { name: 'Playground' }).click()
    await expect
      .poll(() => page.getByRole('heading', { name: 'This page could not be loaded' }).isVisible())
      .toBe(true)
    expect(await page.getByText('The dashboard was updated since this tab opened').isVisible()).toBe(true)
    expect(await page.getByRole('button', { name: 'Reload' }).isVisible()).toBe(true)
    expect(await page.getByRole('navigation', { name: 'Main' }).isVisible()).toBe(true)
    expect(await page.getByText('Unexpected Application Error').count()).toBe(0)
    await check('chunk-error')
    await page.unrouteAll()
    // The 404s are this step's own (as many as the browser asked for: the preload and the import).
    for (let i = errors.problems.length - 1; i >= 0; i--) {
      if (/\/assets\/Playground-/.test(errors.problems[i] ?? '')) errors.problems.splice(i, 1)
    }
    await page.getByRole('link', { name: 'Prompts', exact: true }).first().click()
    await expect.poll(() => page.getByRole('link', { name: 'Welcome message' }).isVisible()).toBe(true)

    // ---- the access token was renewed silently while the journey ran (not only by page loads)
    expect(silentRefreshes).toBeGreaterThan(0)
    expect(refreshes.length).toBeGreaterThan(2)
    expect(refreshes.every((status) => status === 200)).toBe(true)

    // ---- reload: still signed in (the cookie is exchanged for a new access token)
    await afterARefresh()
    await page.goto(`${promptUrl}/environments`)
    await expect.poll(() => page.getByRole('heading', { name: 'Welcome message' }).isVisible()).toBe(true)
    expect(page.url()).toBe(`${promptUrl}/environments`)

    // ---- nothing of the session in web storage
    const storage = (await page.evaluate(
      'JSON.stringify({ local: { ...localStorage }, session: { ...sessionStorage } })',
    )) as string
    expect(storage).not.toContain(session.data.accessToken)
    expect(storage).not.toMatch(/eyJ|rt_/)
    expect(storage).toBe('{"local":{},"session":{}}')
    // The refresh cookie is invisible to the page.
    expect(await page.evaluate('document.cookie')).not.toContain('pm_refresh')

    // ---- sign out: the cookie is gone, the app asks to sign in again
    await page.getByRole('button', { name: 'Sign out' }).click()
    await page.waitForURL(/\/sign-in/)
    expect((await context.cookies()).find((c) => c.name === 'pm_refresh')).toBeUndefined()
    await page.goto(`${promptUrl}`)
    await page.waitForURL(/\/sign-in\?next=/)

    expect(checked).toHaveLength(17)
    expect(errors.report()).toEqual([])
  })
})
