import { readFileSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { WebhookReceiver } from '@pm/testkit'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { BrowserErrors } from '../src/browserErrors.ts'
import { call, type Data } from '../src/client.ts'
import {
  CONTEXT,
  checkPage,
  type DashboardService,
  failureShot,
  launchChromium,
  prepareDashboard,
  QUIET,
  SHOTS,
  signIn as signInAt,
  startService as startDashboardService,
  WALK,
  WIDTHS,
  watch as watchPage,
} from '../src/dashboardPage.ts'
import { login as apiLogin } from '../src/prompts.ts'
import { ADMIN } from '../src/slice.ts'

/**
 * The dashboard's second part in Debian's chromium against the embedded default: workspace
 * settings (organization, members, API keys, webhooks and their deliveries), CSV import, the
 * public catalog signed out and in, making a prompt public, and forks into another workspace.
 * Each page's main path and its refusals; axe-core on each page; screenshots at 1280 and 390 px
 * into e2e/.screenshots/ (names starting with "settings-", "catalog-", "import", "fork").
 *
 * The page is built into its own folder (DASHBOARD_DIR), so this file and the part-1 journey
 * can run side by side without one build emptying the other's dist/.
 */
const MEMBER = { email: 'mo@example.com', password: 'member password 1', name: 'Mo Member' }
const TEMP = { email: 'tess@example.com', password: 'temp password 1', name: 'Tess Temp' }

/** The embedded default on a free port, serving the dashboard built into `dashboardDir`. */
const startService = (dashboardDir: string, env: Record<string, string> = {}) =>
  startDashboardService(dashboardDir, { prefix: 'pm-dashboard2-', env })

describe('the dashboard, part 2: settings, import, catalog and forks in a real browser', {
  timeout: WALK,
}, () => {
  let dashboardDir: string
  let service: DashboardService
  /**
   * A second service with the defaults (private webhook targets refused), for the last test:
   * started once the first one is up, while the tests before it run.
   */
  let strictService: Promise<DashboardService> | undefined
  let base: string
  let receiver: WebhookReceiver
  let browser: Browser
  let context: BrowserContext
  let page: Page
  /** The admin's own API session (outside the browser), for set-up and checks. */
  let adminToken: string
  let acmeId: string
  /**
   * Console errors, page errors and 4xx/5xx answers of every page: none in normal use; a step
   * that makes the service refuse something on purpose allows that one answer first.
   */
  const errors = new BrowserErrors()

  const watch = (p: Page) => watchPage(p, errors)
  /** Screenshots and axe-core at both widths, back to 1280 after. */
  const check = (name: string, p: Page = page) => checkPage(p, name)
  const signIn = (p: Page, who: { email: string; password: string }) => signInAt(p, base, who)
  /** A session over the API (outside the browser). */
  const login = (who: { email: string; password: string }) => apiLogin(base, who.email, who.password)

  beforeAll(async () => {
    dashboardDir = prepareDashboard()
    rmSync(join(SHOTS, 'settings-failure.png'), { force: true })
    receiver = await WebhookReceiver.start()
    service = await startService(dashboardDir, {
      AUTH_ALLOW_SIGNUP: 'true',
      // The receiver listens on 127.0.0.1: allowed here, refused by default (tested below).
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_RETRY_SCALE: '0.002',
      WEBHOOK_POLL_MS: '200',
    })
    base = service.base
    const admin = await login(ADMIN)
    adminToken = admin.token
    acmeId = admin.organizationId
    // A second person with an account (a MEMBER once the admin adds them).
    for (const person of [MEMBER, TEMP]) {
      const registered = await call(base, 'POST', '/api/v1/auth/register', { body: person })
      expect(registered.status).toBe(201)
    }
    browser = await launchChromium(QUIET)
    context = await browser.newContext(CONTEXT)
    await context.grantPermissions(['clipboard-read', 'clipboard-write'], { origin: base })
    page = await context.newPage()
    watch(page)
    strictService = startService(dashboardDir)
    // Awaited (and its failure reported) by the test that uses it.
    strictService.catch(() => {})
  }, 180_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
    await (await strictService?.catch(() => undefined))?.stop()
    await receiver?.close()
  })

  afterEach(() => {
    const report = errors.report()
    errors.clear()
    expect(report).toEqual([])
  })

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => failureShot(page, 'settings-failure.png'))
  })

  it('the catalog works signed out (empty at first)', async () => {
    await page.goto(`${base}/catalog`)
    await expect
      .poll(() => page.getByRole('heading', { name: 'The catalog is empty' }).isVisible())
      .toBe(true)
    expect(await page.getByRole('link', { name: 'Sign in' }).isVisible()).toBe(true)
    expect((await context.cookies()).find((c) => c.name === 'pm_refresh')).toBeUndefined()
    await check('catalog-empty')
  })

  it('organization settings: rename, create another organization, switch', async () => {
    await signIn(page, ADMIN)
    await page.getByRole('link', { name: 'Settings' }).click()
    await page.waitForURL(/\/settings$/)
    const name = page.getByLabel('Organization name', { exact: true })
    await expect.poll(() => name.inputValue()).toBe(ADMIN.org)
    await name.fill('Acme Corp')
    await page.getByRole('button', { name: 'Save name' }).click()
    await expect.poll(() => page.getByText('Name saved.').isVisible()).toBe(true)
    const renamed = await call<Data<{ name: string }>>(base, 'GET', `/api/v1/organizations/${acmeId}`, {
      token: adminToken,
    })
    expect(renamed.body.data.name).toBe('Acme Corp')

    await page.getByLabel('New organization name').fill('Beta Labs')
    await page.getByRole('button', { name: 'Create organization' }).click()
    await expect.poll(() => page.getByText('Beta Labs was created.').isVisible()).toBe(true)
    const yours = page.getByRole('region', { name: 'Your organizations' })
    await expect.poll(() => yours.getByRole('button', { name: 'Switch to Beta Labs' }).isVisible()).toBe(true)
    await check('settings-organization')
    // Switch there and back with the header's switcher showing where we are.
    await yours.getByRole('button', { name: 'Switch to Beta Labs' }).click()
    await expect
      .poll(() => page.getByLabel('Organization', { exact: true }).locator('option:checked').innerText())
      .toBe('Beta Labs')
    await expect
      .poll(() => page.getByLabel('Organization name', { exact: true }).inputValue())
      .toBe('Beta Labs')
    await yours.getByRole('button', { name: 'Switch to Acme Corp' }).click()
    await expect
      .poll(() => page.getByLabel('Organization name', { exact: true }).inputValue())
      .toBe('Acme Corp')
  })

  it('members: add by email, change a role; the service refuses to leave no ACTIVE OWNER', async () => {
    await page.getByRole('link', { name: 'Members' }).click()
    await page.waitForURL(/\/settings\/members$/)
    // An unknown email: the service's 404, shown as it is.
    errors.allow(404, 'POST', /^\/api\/v1\/organizations\/\w+\/members$/, 'an unknown email')
    await page.getByLabel('Email').fill('nobody@example.com')
    await page.getByRole('button', { name: 'Add member' }).click()
    await expect.poll(() => page.getByRole('alert').innerText()).toMatch(/Not added: .*NOT_FOUND/s)
    await page.getByLabel('Email').fill(MEMBER.email)
    await page.getByLabel('Role', { exact: true }).selectOption('ADMIN')
    await page.getByRole('button', { name: 'Add member' }).click()
    await expect.poll(() => page.getByText('Mo Member was added as ADMIN.').isVisible()).toBe(true)
    // Down to MEMBER from the table.
    await page.getByLabel('Role of Mo Member').selectOption('MEMBER')
    await expect.poll(() => page.getByText('Mo Member is now MEMBER, ACTIVE.').isVisible()).toBe(true)
    // Suspend and reactivate.
    await page.getByLabel('Status of Mo Member').selectOption('SUSPENDED')
    await expect.poll(() => page.getByText('Mo Member is now MEMBER, SUSPENDED.').isVisible()).toBe(true)
    await page.getByLabel('Status of Mo Member').selectOption('ACTIVE')
    await expect.poll(() => page.getByText('Mo Member is now MEMBER, ACTIVE.').isVisible()).toBe(true)
    // Add someone and remove them again (with a confirmation).
    await page.getByLabel('Email').fill(TEMP.email)
    await page.getByRole('button', { name: 'Add member' }).click()
    await expect.poll(() => page.getByText('Tess Temp was added as MEMBER.').isVisible()).toBe(true)
    await page.getByRole('button', { name: 'Remove Tess Temp' }).click()
    await page
      .getByRole('dialog', { name: 'Remove Tess Temp?' })
      .getByRole('button', { name: 'Remove member' })
      .click()
    await expect
      .poll(() => page.getByText('Tess Temp was removed from the organization.').isVisible())
      .toBe(true)
    await expect.poll(() => page.getByRole('button', { name: 'Remove Tess Temp' }).count()).toBe(0)
    // The only OWNER cannot step down: the service says why.
    errors.allow(409, 'PATCH', /^\/api\/v1\/organizations\/\w+\/members\/\w+$/, 'the last OWNER steps down')
    await page.getByLabel('Role of Ada Admin').selectOption('ADMIN')
    await expect
      .poll(() => page.getByRole('alert').innerText())
      .toMatch(/Not changed \(Ada Admin\): .*OWNER.*CONFLICT/s)
    await check('settings-members')
    const members = await call<Data<{ members: { email: string; role: string; status: string }[] }>>(
      base,
      'GET',
      `/api/v1/organizations/${acmeId}/members`,
      { token: adminToken },
    )
    expect(members.body.data.members.map((m) => [m.email, m.role, m.status]).sort()).toEqual([
      [ADMIN.email, 'OWNER', 'ACTIVE'],
      [MEMBER.email, 'MEMBER', 'ACTIVE'],
    ])
  })

  it('people by name: what another member published and promoted shows their name', async () => {
    // The API: every member reads the organization's members with their names, and only them;
    // someone outside the organization reads nothing of it.
    const member = await login(MEMBER)
    const list = await call<Data<{ members: { userId: string; name: string }[] }>>(
      base,
      'GET',
      `/api/v1/organizations/${acmeId}/members`,
      { token: member.token },
    )
    expect(list.status).toBe(200)
    expect(list.body.data.members.map((m) => m.name).sort()).toEqual(['Ada Admin', 'Mo Member'])
    const outsider = await login(TEMP)
    const outside = await call(base, 'GET', `/api/v1/organizations/${acmeId}/members`, {
      token: outsider.token,
    })
    expect([403, 404]).toContain(outside.status)
    expect(JSON.stringify(outside.body)).not.toContain('Mo Member')

    // Mo publishes and promotes a prompt of Acme; the admin's pages name Mo.
    const created = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
      token: adminToken,
      body: { name: 'Names check', template: 'Hi {{ who }}' },
    })
    expect(created.status).toBe(201)
    const id = created.body.data._id
    const published = await call<Data<{ _id: string }>>(base, 'POST', `/api/v1/prompts/${id}/publish`, {
      token: member.token,
      body: { organizationId: acmeId, changeLog: 'by Mo' },
    })
    expect(published.status).toBe(201)
    const promoted = await call(base, 'POST', `/api/v1/prompts/${id}/environments/preview/promote`, {
      token: member.token,
      body: { organizationId: acmeId, versionId: published.body.data._id },
    })
    expect(promoted.status).toBe(200)
    await page.goto(`${base}/prompts/${id}/history`)
    await expect
      .poll(() => page.locator('.version-head .muted').first().innerText())
      .toMatch(/^by Mo Member ·/)
    await page.getByRole('link', { name: 'Environments' }).click()
    const preview = page.getByRole('region', { name: 'Preview' })
    await expect.poll(() => preview.locator('p').first().innerText()).toContain('by Mo Member')
    expect(await page.locator('body').innerText()).not.toMatch(/user [0-9a-f]{6}/)
    await check('people-by-name')
    // Back where the next test starts: the settings.
    await page.goto(`${base}/settings/members`)
    await expect.poll(() => page.getByRole('link', { name: 'API keys' }).isVisible()).toBe(true)
  })

  it('API keys: created with scopes, expiry and a rate limit, shown once, works against the API, renamed, revoked', async () => {
    await page.getByRole('link', { name: 'API keys' }).click()
    await page.waitForURL(/\/settings\/api-keys$/)
    await expect.poll(() => page.getByRole('heading', { name: 'No API keys yet' }).isVisible()).toBe(true)
    await page.getByLabel('Key name').fill('billing-backend')
    await page.getByRole('checkbox', { name: /prompts:write/ }).check()
    const nextYear = `${new Date().getUTCFullYear() + 1}-06-30`
    await page.getByLabel('Expires on (optional)').fill(nextYear)
    await page.getByLabel('Requests per window (optional)').fill('500')
    await page.getByLabel('Window in seconds').fill('60')
    await page.getByRole('button', { name: 'Create key' }).click()

    const shown = page.getByRole('region', { name: 'New key “billing-backend”' })
    await expect.poll(() => shown.isVisible()).toBe(true)
    expect(await shown.getByText('you will not see it again').isVisible()).toBe(true)
    const key = await shown.getByLabel('New key “billing-backend”').inputValue()
    expect(key).toMatch(/^pk_/)
    await shown.getByRole('button', { name: 'Copy' }).click()
    await expect.poll(() => shown.getByText('Copied to the clipboard.').isVisible()).toBe(true)
    expect(await page.evaluate('navigator.clipboard.readText()')).toBe(key)
    await check('settings-api-key-created')

    // The key works against the API, from outside the browser.
    const listed = await call<Data<{ prompts: unknown[] }>>(base, 'GET', '/api/v1/prompts', { token: key })
    expect(listed.status).toBe(200)
    // Once dismissed it is gone from the page, and the list shows only its prefix.
    await shown.getByRole('button', { name: 'I have copied it' }).click()
    const table = page.getByRole('table', { name: 'API keys' })
    await expect.poll(() => table.isVisible()).toBe(true)
    expect(await page.content()).not.toContain(key)
    const row = table.getByRole('row', { name: /billing-backend/ })
    const cells = await row.getByRole('cell').allInnerTexts()
    const prefix = (cells[1] ?? '').replace(/…$/, '')
    expect(prefix.length).toBeGreaterThan(3)
    expect(key.startsWith(prefix)).toBe(true)
    expect(key.length).toBeGreaterThan(prefix.length + 16)
    expect(cells[2]).toContain('prompts:read')
    expect(cells[2]).toContain('prompts:write')
    expect(cells[3]).toContain(new Date(`${nextYear}T12:00:00Z`).getUTCFullYear().toString())
    expect(cells[4]).toBe('500 per 60 s')
    expect(cells[6]).toBe('active')
    await page.reload()
    await expect.poll(() => table.isVisible()).toBe(true)
    expect(await page.content()).not.toContain(key)
    // Last used is filled in once the gateway records the use.
    await expect
      .poll(
        async () => {
          await page.reload()
          await table.waitFor()
          return (await row.getByRole('cell').allInnerTexts())[5]
        },
        { timeout: 15_000 },
      )
      .not.toBe('never')
    await check('settings-api-keys')

    // Renamed: only the name changes, the key goes on working.
    await row.getByRole('button', { name: 'Rename billing-backend' }).click()
    const rename = page.getByRole('dialog', { name: 'Rename “billing-backend”' })
    await rename.getByLabel('Name').fill('billing-backend-eu')
    await rename.getByRole('button', { name: 'Save name' }).click()
    await expect.poll(async () => (await row.getByRole('cell').allInnerTexts())[0]).toBe('billing-backend-eu')
    expect((await call(base, 'GET', '/api/v1/prompts', { token: key })).status).toBe(200)

    // Revoke, with a confirmation: the key is refused from then on.
    await row.getByRole('button', { name: 'Revoke billing-backend-eu' }).click()
    const confirm = page.getByRole('dialog', { name: 'Revoke “billing-backend-eu”?' })
    expect(await confirm.getByText('This cannot be undone').isVisible()).toBe(true)
    await confirm.getByRole('button', { name: 'Revoke key' }).click()
    await expect.poll(async () => (await row.getByRole('cell').allInnerTexts())[6]).toMatch(/^revoked/)
    await expect
      .poll(async () => (await call(base, 'GET', '/api/v1/prompts', { token: key })).status, {
        timeout: 10_000,
      })
      .toBe(401)
  })

  it('webhooks: create (secret once), a publish is delivered and logged with its attempts, test, redeliver, rotate the secret, edit, disable, delete', async () => {
    await page.getByRole('link', { name: 'Webhooks' }).click()
    await page.waitForURL(/\/settings\/webhooks$/)
    await expect.poll(() => page.getByRole('heading', { name: 'No webhooks yet' }).isVisible()).toBe(true)
    const url = `${receiver.base}/hooks/publish`
    // The first attempt gets a 500, the retry a 200.
    receiver.script('/hooks/publish', [500])
    await page.getByLabel('Endpoint URL').fill(url)
    await page.getByRole('button', { name: 'Create webhook' }).click()
    const shown = page.getByRole('region', { name: `Signing secret of ${url}` })
    await expect.poll(() => shown.isVisible()).toBe(true)
    expect(await shown.getByText('you will not see it again').isVisible()).toBe(true)
    const secret = await shown.getByLabel(`Signing secret of ${url}`).inputValue()
    expect(secret).toMatch(/^whsec_/)
    await check('settings-webhook-created')
    await shown.getByRole('button', { name: 'I have copied it' }).click()
    expect(await page.content()).not.toContain(secret)

    // A publish (through the API) makes a delivery.
    const created = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
      token: adminToken,
      body: { name: 'Release notes', template: 'Notes for {{ product }} {{ version }}' },
    })
    expect(created.status).toBe(201)
    const promptId = created.body.data._id
    const published = await call(base, 'POST', `/api/v1/prompts/${promptId}/publish`, {
      token: adminToken,
      body: { changeLog: 'first' },
    })
    expect(published.status).toBe(201)

    await page.getByRole('link', { name: `Deliveries of ${url}` }).click()
    await page.waitForURL(/\/settings\/webhooks\/[0-9a-f]{24}$/)
    const deliveries = page.getByRole('list', { name: 'Deliveries' })
    const delivery = deliveries.getByRole('listitem').filter({ hasText: 'version.published' })
    // The log follows the PENDING delivery until it is DELIVERED on the second attempt (and shows
    // it within 5 s should the page load before the event reached webhooks).
    await expect.poll(() => delivery.innerText(), { timeout: 20_000 }).toContain('DELIVERED')
    const attempts = delivery.getByRole('table')
    expect(await attempts.getByRole('row').count()).toBe(3)
    const first = await attempts.getByRole('row').nth(1).getByRole('cell').allInnerTexts()
    const second = await attempts.getByRole('row').nth(2).getByRole('cell').allInnerTexts()
    expect(first[0]).toBe('1')
    expect(first[2]).toBe('HTTP 500')
    expect(first[3]).toMatch(/^\d+ ms$/)
    expect(second[0]).toBe('2')
    expect(second[2]).toBe('HTTP 200')
    expect(await delivery.innerText()).toContain('2 attempts')
    expect(receiver.to('/hooks/publish')).toHaveLength(2)

    // A test send: one attempt now, logged.
    await page.getByRole('button', { name: 'Send test' }).click()
    await expect.poll(() => page.getByText('Test event delivered (HTTP 200).').isVisible()).toBe(true)
    await expect
      .poll(() => deliveries.getByRole('listitem').filter({ hasText: 'webhook.test' }).count())
      .toBe(1)
    // Redeliver the publication: a third attempt, also logged.
    await delivery.getByRole('button', { name: 'Redeliver' }).click()
    await expect.poll(() => delivery.innerText(), { timeout: 20_000 }).toContain('3 attempts')
    await expect.poll(() => delivery.innerText(), { timeout: 20_000 }).toContain('DELIVERED')
    // "Queued again." was true while the delivery waited; once delivered it is gone.
    await expect.poll(() => delivery.getByText('Queued again.').count()).toBe(0)
    expect(receiver.to('/hooks/publish')).toHaveLength(4)
    await check('settings-webhook-deliveries')
    // An event published while the page is open: its delivery shows without Refresh (the log polls).
    const another = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
      token: adminToken,
      body: { name: 'Delivery poll check', template: 'More notes' },
    })
    expect(another.status).toBe(201)
    const again = await call(base, 'POST', `/api/v1/prompts/${another.body.data._id}/publish`, {
      token: adminToken,
      body: {},
    })
    expect(again.status).toBe(201)
    await expect
      .poll(() => deliveries.getByRole('listitem').filter({ hasText: 'version.published' }).count(), {
        timeout: 20_000,
      })
      .toBe(2)
    // Delivered (the receiver answers 200 now) before the webhook is edited below.
    await expect.poll(() => receiver.to('/hooks/publish').length, { timeout: 20_000 }).toBe(5)

    // Rotate the secret with the default overlap: the new one is shown once, in its row, and the
    // row says until when the previous one also signs.
    await page.getByRole('link', { name: '← All webhooks' }).click()
    const row = page.getByRole('listitem').filter({ hasText: url })
    await row.getByRole('button', { name: 'Rotate secret' }).click()
    const rotate = page.getByRole('dialog', { name: 'Rotate the signing secret?' })
    expect(await rotate.getByLabel('24 hours (default)').isChecked()).toBe(true)
    await rotate.getByRole('button', { name: 'Rotate secret' }).click()
    const rotated = row.getByRole('region', { name: `New signing secret of ${url}` })
    await expect.poll(() => rotated.isVisible()).toBe(true)
    const newSecret = await rotated.getByLabel(`New signing secret of ${url}`).inputValue()
    expect(newSecret).toMatch(/^whsec_/)
    expect(newSecret).not.toBe(secret)
    await expect.poll(() => row.getByText('Previous secret also signs until').isVisible()).toBe(true)
    await check('settings-webhook-rotated')
    await rotated.getByRole('button', { name: 'I have copied it' }).click()
    expect(await page.content()).not.toContain(newSecret)

    // Edit: another URL; then disable, then delete (with a confirmation).
    await page.getByRole('button', { name: 'Edit' }).click()
    const edit = page.getByRole('dialog', { name: 'Edit webhook' })
    await edit.getByLabel('Endpoint URL').fill(`${receiver.base}/hooks/other`)
    await edit.getByRole('button', { name: 'Save webhook' }).click()
    const card = page.getByRole('listitem').filter({ hasText: `${receiver.base}/hooks/other` })
    await expect.poll(() => card.isVisible()).toBe(true)
    await card.getByRole('button', { name: 'Disable' }).click()
    await expect.poll(() => card.getByText('disabled', { exact: true }).isVisible()).toBe(true)
    await check('settings-webhooks')
    await card.getByRole('button', { name: 'Delete' }).click()
    await page
      .getByRole('dialog', { name: 'Delete this webhook?' })
      .getByRole('button', { name: 'Delete webhook' })
      .click()
    await expect.poll(() => page.getByRole('heading', { name: 'No webhooks yet' }).isVisible()).toBe(true)
    const left = await call<Data<{ webhooks: unknown[] }>>(
      base,
      'GET',
      `/api/v1/organizations/${acmeId}/webhooks`,
      {
        token: adminToken,
      },
    )
    expect(left.body.data.webhooks).toEqual([])
  })

  it('make public from the editor: refused while nothing is published, then in the catalog; unpublish', async () => {
    // A prompt with no version: the service refuses, and says why.
    const draft = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
      token: adminToken,
      body: { name: 'Unfinished', template: 'Draft only' },
    })
    await page.goto(`${base}/prompts/${draft.body.data._id}`)
    errors.allow(400, 'PATCH', /^\/api\/v1\/prompts\/\w+$/, 'public with nothing published')
    await page.getByRole('button', { name: 'Make public' }).click()
    await expect
      .poll(() => page.getByRole('alert').innerText())
      .toMatch(/Not made public: publish a version before making the prompt public.*NO_PUBLISHED_VERSION/s)
    await check('editor-make-public-refused')

    // The published one goes public.
    const list = await call<Data<{ prompts: { _id: string; name: string }[] }>>(
      base,
      'GET',
      '/api/v1/prompts?search=Release',
      { token: adminToken },
    )
    const release = list.body.data.prompts.find((p) => p.name === 'Release notes')
    expect(release).toBeDefined()
    await page.goto(`${base}/prompts/${release?._id}`)
    await page.getByRole('button', { name: 'Make public' }).click()
    await expect
      .poll(() => page.getByRole('button', { name: 'Unpublish from the catalog' }).isVisible())
      .toBe(true)
    expect(await page.getByText('· public').isVisible()).toBe(true)
    const catalog = await call<Data<{ prompts: { name: string }[] }>>(base, 'GET', '/api/v1/public/prompts')
    expect(catalog.body.data.prompts.map((p) => p.name)).toEqual(['Release notes'])
  })

  it('the catalog signed out: search, pages, published content, invoke with a variables form', async () => {
    // More public prompts, so that search and pages have something to do (12 a page).
    const fillers = Array.from({ length: 10 }, (_, i) => `Filler ${String(i + 1).padStart(2, '0')}`)
    for (const name of [...fillers, 'Weekly digest', 'Apology letter']) {
      const p = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
        token: adminToken,
        body: { name, description: `${name} for customers`, template: `${name}: {{ topic }}` },
      })
      await call(base, 'POST', `/api/v1/prompts/${p.body.data._id}/publish`, { token: adminToken, body: {} })
      await call(base, 'PATCH', `/api/v1/prompts/${p.body.data._id}`, {
        token: adminToken,
        body: { isPublic: true },
      })
    }
    const guest = await browser.newContext(CONTEXT)
    const g = await guest.newPage()
    watch(g)
    try {
      await g.goto(`${base}/catalog`)
      const cards = g.locator('.catalog-grid > li')
      await expect.poll(() => cards.count()).toBe(12)
      expect(await g.getByText('Page 1 of 2 · 13 prompts').isVisible()).toBe(true)
      await check('catalog', g)
      await g.getByRole('button', { name: 'Next page' }).click()
      await expect.poll(() => g.getByText('Page 2 of 2 · 13 prompts').isVisible()).toBe(true)
      await expect.poll(() => cards.count()).toBe(1)
      expect(g.url()).toContain('page=2')
      expect(await g.getByRole('button', { name: 'Next page' }).isDisabled()).toBe(true)
      await g.getByRole('button', { name: 'Previous page' }).click()
      await expect.poll(() => cards.count()).toBe(12)
      await g.getByLabel('Search the catalog').fill('release')
      await expect.poll(() => cards.count()).toBe(1)
      expect(g.url()).toContain('search=release')
      await g.getByRole('link', { name: 'Release notes' }).click()
      await g.waitForURL(/\/catalog\/[0-9a-f]{24}$/)
      expect(await g.locator('pre.rendered').first().innerText()).toBe(
        'Notes for {{ product }} {{ version }}',
      )
      // Required variables missing: the service's refusal.
      errors.allow(
        400,
        'POST',
        /^\/api\/v1\/public\/prompts\/\w+\/invoke$/,
        'invoke without the required values',
      )
      await g.getByRole('button', { name: 'Invoke' }).click()
      await expect.poll(() => g.getByRole('alert').innerText()).toContain('MISSING_REQUIRED_VARIABLES')
      await g.getByLabel(/^product/).fill('Widget')
      await g.getByLabel(/^version/).fill('2.0')
      await g.getByRole('button', { name: 'Invoke' }).click()
      await expect.poll(() => g.locator('pre.rendered').nth(1).innerText()).toBe('Notes for Widget 2.0')
      expect(await g.getByRole('link', { name: 'Sign in' }).first().isVisible()).toBe(true)
      expect(await g.getByRole('button', { name: 'Fork' }).count()).toBe(0)
      await check('catalog-prompt', g)
    } finally {
      await guest.close()
    }
  })

  it('fork: a version from history into the other workspace, and a public prompt from the catalog', async () => {
    const orgs = await call<Data<{ organizations: { _id: string; name: string }[] }>>(
      base,
      'GET',
      '/api/v1/organizations',
      { token: adminToken },
    )
    const beta = orgs.body.data.organizations.find((o) => o.name === 'Beta Labs')
    expect(beta).toBeDefined()
    const betaId = beta?._id ?? ''

    await page.goto(`${base}/prompts`)
    await page.getByRole('link', { name: 'Release notes' }).click()
    await page.getByRole('link', { name: 'History' }).click()
    await page.getByRole('button', { name: 'Fork version 1' }).click()
    const dialog = page.getByRole('dialog', { name: 'Fork version 1' })
    await dialog.getByLabel('Name of the copy').fill('Release notes for Beta')
    await dialog.getByLabel('Target organization').selectOption({ label: 'Beta Labs' })
    await check('fork-version')
    await dialog.getByRole('button', { name: 'Fork', exact: true }).click()
    await expect
      .poll(() => dialog.getByRole('status').innerText())
      .toBe('Forked into Beta Labs as “Release notes for Beta”, published there as version 1.')
    await dialog.getByRole('button', { name: 'Open the copy' }).click()
    await expect
      .poll(() => page.getByRole('heading', { name: 'Release notes for Beta' }).isVisible())
      .toBe(true)
    await expect
      .poll(() => page.getByLabel('Organization', { exact: true }).locator('option:checked').innerText())
      .toBe('Beta Labs')
    expect(await page.getByText('1 published version').isVisible()).toBe(true)

    // From the catalog, signed in: fork into Beta too.
    await page.getByRole('link', { name: 'Catalog' }).click()
    await page.getByRole('link', { name: 'Weekly digest' }).click()
    await page.getByLabel('Target organization').selectOption({ label: 'Beta Labs' })
    await page.getByLabel('Name of the copy').fill('Digest (ours)')
    await page.getByRole('button', { name: 'Fork', exact: true }).click()
    await expect
      .poll(() => page.getByText('Forked into Beta Labs as “Digest (ours)”.').isVisible())
      .toBe(true)
    await check('catalog-fork')

    // Both landed in Beta, private, at version 1; Acme is unchanged.
    const inBeta = await call<Data<{ prompts: { name: string; isPublic: boolean; versionCount: number }[] }>>(
      base,
      'GET',
      `/api/v1/prompts?organizationId=${betaId}`,
      { token: adminToken },
    )
    expect(inBeta.status).toBe(200)
    expect(inBeta.body.data.prompts.map((p) => [p.name, p.isPublic, p.versionCount]).sort()).toEqual([
      ['Digest (ours)', false, 1],
      ['Release notes for Beta', false, 1],
    ])
    await page.getByRole('button', { name: 'Open the copy' }).click()
    await expect.poll(() => page.getByRole('heading', { name: 'Digest (ours)' }).isVisible()).toBe(true)
  })

  it('unpublish from the editor takes the prompt out of the catalog', async () => {
    // Back in Acme (the switcher), on the public prompt.
    await page.getByLabel('Organization', { exact: true }).selectOption({ label: 'Acme Corp' })
    await page.waitForURL(/\/prompts$/)
    await page.getByRole('link', { name: 'Release notes' }).click()
    await page.getByRole('button', { name: 'Unpublish from the catalog' }).click()
    await expect.poll(() => page.getByRole('button', { name: 'Make public' }).isVisible()).toBe(true)
    await check('editor-visibility')
    const catalog = await call<Data<{ prompts: { name: string }[]; pagination: { total: number } }>>(
      base,
      'GET',
      '/api/v1/public/prompts',
    )
    const names = catalog.body.data.prompts.map((p) => p.name)
    expect(names).not.toContain('Release notes')
    expect(names).toContain('Weekly digest')
    expect(catalog.body.data.pagination.total).toBe(12)
  })

  it('CSV import: good and bad rows, progress, counts and the failed rows with their messages', async () => {
    await page.goto(`${base}/prompts`)
    await page.getByRole('link', { name: 'Import', exact: true }).click()
    await page.waitForURL(/\/prompts\/import$/)
    // The template downloads and is itself a valid import.
    const download = page.waitForEvent('download')
    await page.getByRole('link', { name: 'Download the template CSV' }).click()
    const template = readFileSync((await (await download).path()) ?? '', 'utf8')
    expect(template.split('\n')[0]).toBe('name,template,description,tags')
    const csv = join(service.dataDir, 'import.csv')
    writeFileSync(
      csv,
      [
        'name,template,description,tags',
        'Imported one,Hello {{ who }},first,a;b',
        ',no name here,,',
        'Imported two,Bye {{ who }},,',
        'No template,,missing the template,',
      ].join('\n'),
    )
    await check('import-empty')
    await page.getByLabel('CSV file').setInputFiles(csv)
    await page.getByRole('button', { name: 'Upload and import' }).click()
    await expect
      .poll(() => page.getByRole('heading', { name: 'Import finished' }).isVisible(), { timeout: 20_000 })
      .toBe(true)
    const result = page.getByRole('list', { name: 'Import result' })
    expect(await result.innerText()).toMatch(/2\s*created[\s\S]*2\s*failed[\s\S]*4\s*rows/)
    expect(await page.getByLabel('Progress').getAttribute('value')).toBe('4')
    const failed = await page.getByRole('table', { name: 'Failed rows' }).getByRole('row').allInnerTexts()
    expect(failed).toHaveLength(3)
    expect(failed[1]).toMatch(/^3\s+.*name/)
    expect(failed[2]).toMatch(/^5\s+.*template/)
    await check('import')
    const imported = await call<Data<{ prompts: { name: string }[] }>>(
      base,
      'GET',
      '/api/v1/prompts?search=Imported',
      {
        token: adminToken,
      },
    )
    expect(imported.body.data.prompts.map((p) => p.name).sort()).toEqual(['Imported one', 'Imported two'])
  })

  it('a MEMBER sees why keys and webhooks are closed, and the service refuses them too', async () => {
    const memberContext = await browser.newContext(CONTEXT)
    const m = await memberContext.newPage()
    watch(m)
    try {
      await signIn(m, MEMBER)
      await m.getByRole('link', { name: 'Settings' }).click()
      await m.getByRole('link', { name: 'API keys' }).click()
      await expect
        .poll(() => m.getByRole('note').innerText())
        .toContain('Only an ADMIN or OWNER of this organization can see, create, rename or revoke API keys.')
      expect(await m.getByRole('note').innerText()).toContain('Your role here is MEMBER.')
      expect(await m.getByRole('button', { name: 'Create key' }).count()).toBe(0)
      await check('settings-api-keys-member', m)
      await m.getByRole('link', { name: 'Webhooks' }).click()
      await expect.poll(() => m.getByRole('note').innerText()).toContain('can manage webhooks')
      await m.getByRole('link', { name: 'Members' }).click()
      await expect.poll(() => m.getByRole('table').isVisible()).toBe(true)
      expect(await m.getByRole('combobox', { name: /Role of/ }).count()).toBe(0)
      // And the service: a MEMBER's token cannot mint a key or list webhooks.
      const member = await login(MEMBER)
      const mint = await call<{ error: { code: string } }>(
        base,
        'POST',
        `/api/v1/organizations/${acmeId}/api-keys`,
        {
          token: member.token,
          body: { name: 'sneaky', scopes: ['prompts:read'] },
        },
      )
      expect(mint.status).toBe(403)
      expect(mint.body.error.code).toBe('FORBIDDEN')
    } finally {
      await memberContext.close()
    }
  })

  it('the catalog’s try-it fills a chat prompt’s placeholder with a list of messages', async () => {
    const chat = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
      token: adminToken,
      body: {
        name: 'Public support chat',
        type: 'chat',
        messages: [
          { role: 'system', content: 'You help {{ customer }}.' },
          { type: 'placeholder', name: 'history' },
        ],
      },
    })
    expect(chat.status).toBe(201)
    const id = chat.body.data._id
    await call(base, 'POST', `/api/v1/prompts/${id}/publish`, { token: adminToken, body: {} })
    await call(base, 'PATCH', `/api/v1/prompts/${id}`, { token: adminToken, body: { isPublic: true } })
    const guest = await browser.newContext({ viewport: WIDTHS[1], locale: 'en-GB', timezoneId: 'UTC' })
    const g = await guest.newPage()
    watch(g)
    try {
      await g.goto(`${base}/catalog/${id}`)
      await g.getByRole('button', { name: 'Invoke' }).waitFor()
      await g.getByLabel(/^customer/).fill('Ada')
      // Not a JSON list: said in the form, nothing sent.
      await g.getByLabel(/^history/).fill('hello')
      await g.getByRole('button', { name: 'Invoke' }).click()
      await expect.poll(() => g.getByRole('alert').innerText()).toContain('history: write a JSON list')
      await g.getByLabel(/^history/).fill('[{"role": "user", "content": "Where is my order?"}]')
      await g.getByRole('button', { name: 'Invoke' }).click()
      await expect
        .poll(() => g.locator('.rendered-messages pre').allInnerTexts())
        .toEqual(['You help Ada.', 'Where is my order?'])
      await check('catalog-chat', g)
    } finally {
      await guest.close()
    }
  })

  it('webhooks to private addresses are refused by default, with the service’s message', async () => {
    if (!strictService) throw new Error('the second service was not started')
    const strict = await strictService
    const ctx = await browser.newContext(CONTEXT)
    const p = await ctx.newPage()
    watch(p)
    const saved = base
    base = strict.base
    try {
      await signIn(p, ADMIN)
      await p.goto(`${base}/settings/webhooks`)
      await p.getByLabel('Endpoint URL').fill(`${receiver.base}/hooks/private`)
      errors.allow(400, 'POST', /^\/api\/v1\/organizations\/\w+\/webhooks$/, 'a private address')
      await p.getByRole('button', { name: 'Create webhook' }).click()
      await expect
        .poll(() => p.getByRole('alert').innerText())
        .toMatch(
          /Not subscribed: url is not allowed: 127\.0\.0\.1 resolves to non-public address 127\.0\.0\.1.*VALIDATION_ERROR/s,
        )
      await check('settings-webhook-refused', p)
    } finally {
      base = saved
      await ctx.close()
      await strict.stop()
    }
  })
})
