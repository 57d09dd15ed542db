import { readFileSync } from 'node:fs'
import { join } from 'node:path'
import { REPO_ROOT } from '@pm/testkit'
import type { Browser, BrowserContext, Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BrowserErrors } from '../src/browserErrors.ts'
import { call, type Data } from '../src/client.ts'
import {
  CONTEXT,
  checkPage,
  type DashboardService,
  failureShot,
  launchChromium,
  prepareDashboard,
  SLOW,
  signIn as signInAt,
  startService,
  WALK,
  watch,
} from '../src/dashboardPage.ts'
import { login } from '../src/prompts.ts'
import { ADMIN } from '../src/slice.ts'

/**
 * Release safety in the dashboard (issue 29, DESIGN section 15) in Debian's chromium against
 * the embedded default: production protected in the settings, promotes and the environment's
 * history, a rollback, a 2-way split with its invocation counts, a plain promote ending it, a
 * MEMBER refused on the protected environment, and the audit log (the prompt's own entries,
 * filters, export). Screenshots at 1280 and 390 px into SHOTS_DIR (default e2e/.screenshots/,
 * names starting with "release-"), each checked with axe-core.
 */
// Written unless PM_TEST_SHOTS=0 (as `npm test` sets it), SHOTS_DIR or not (dashboardPage.ts).
const SHOTS = process.env.SHOTS_DIR ?? join(REPO_ROOT, 'e2e', '.screenshots')
const MEMBER = { email: 'mia@example.com', password: 'member password 1', name: 'Mia Member' }

describe('the dashboard: release safety', { timeout: WALK }, () => {
  let service: DashboardService
  let base: string
  let browser: Browser
  let context: BrowserContext
  let page: Page
  let token: string
  let orgId: string
  const errors = new BrowserErrors()

  const api = async <T>(method: string, path: string, body?: unknown, as = token) => {
    const res = await call<Data<T>>(base, method, path, {
      token: as,
      ...(body !== undefined ? { body } : {}),
    })
    expect(res.status, JSON.stringify(res.body)).toBeLessThan(300)
    return res.body.data
  }

  /** Screenshots at both widths, and no serious axe-core violation at either. */
  const shots = (name: string, p: Page = page) => checkPage(p, name, { dir: SHOTS })
  const signIn = (p: Page, who: { email: string; password: string }) => signInAt(p, base, who)

  beforeAll(async () => {
    service = await startService(prepareDashboard(SHOTS), {
      prefix: 'pm-dashboard-release-',
      env: {
        AUTH_ALLOW_SIGNUP: 'true',
        // Render sends a split's invocation counts this often (5 s by default).
        SPLIT_COUNTS_FLUSH_MS: '200',
      },
    })
    base = service.base
    const admin = await login(base)
    token = admin.token
    orgId = admin.organizationId
    expect((await call(base, 'POST', '/api/v1/auth/register', { body: MEMBER })).status).toBe(201)
    await api('POST', `/api/v1/organizations/${orgId}/members`, { email: MEMBER.email, role: 'MEMBER' })
    browser = await launchChromium()
    context = await browser.newContext({ ...CONTEXT, acceptDownloads: true })
    page = await context.newPage()
    watch(page, errors)
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
  })

  it('protects production, promotes, rolls back, splits, and reads the audit log', async ({
    onTestFailed,
  }) => {
    onTestFailed(() => failureShot(page, 'release-failure.png', SHOTS))
    // Two published versions.
    const prompt = await api<{ _id: string }>('POST', '/api/v1/prompts', {
      name: 'Greeting',
      template: 'Hello from version one.',
    })
    await api('POST', `/api/v1/prompts/${prompt._id}/publish`, {})
    await api('PATCH', `/api/v1/prompts/${prompt._id}`, { template: 'Hello from version two.' })
    await api('POST', `/api/v1/prompts/${prompt._id}/publish`, {})

    // ---- settings: production protected
    await signIn(page, ADMIN)
    await page.goto(`${base}/settings`)
    const protection = page.getByRole('region', { name: 'Protected environments' })
    await protection.getByRole('checkbox', { name: /production/ }).check()
    await protection.getByRole('button', { name: 'Save protected environments' }).click()
    await expect
      .poll(() => protection.getByText('Saved: production is protected.').isVisible(), SLOW)
      .toBe(true)
    await shots('release-settings')
    const org = await api<{ protectedEnvironments: string[] }>('GET', `/api/v1/organizations/${orgId}`)
    expect(org.protectedEnvironments).toEqual(['production'])

    // ---- promote v1 then v2; the history names both, newest first
    await page.goto(`${base}/prompts/${prompt._id}/environments`)
    const production = page.getByRole('region', { name: 'Production' })
    await expect.poll(() => production.getByText('protected', { exact: true }).isVisible(), SLOW).toBe(true)
    await expect.poll(() => production.getByText(/^Never promoted/).isVisible(), SLOW).toBe(true)
    await shots('release-environments-empty')
    for (const version of ['Version 1', 'Version 2']) {
      await production.getByLabel('Version for production').selectOption({ label: version })
      await production.getByRole('button', { name: 'Promote to production' }).click()
      await expect.poll(() => production.locator('p strong').innerText(), SLOW).toBe(version)
    }
    const history = production.getByRole('table', { name: 'History of production' })
    await expect.poll(() => history.locator('tbody tr').count(), SLOW).toBe(2)
    expect(await history.locator('tbody tr').first().innerText()).toMatch(/v2\s*live\s*v1\s*you/)
    expect(await history.locator('tbody tr').last().innerText()).toMatch(/v1\s*nothing\s*you/)

    // ---- roll back to v1, confirmed
    await production.getByRole('button', { name: 'Roll back to v1' }).click()
    const dialog = page.getByRole('dialog', { name: 'Roll back production?' })
    await expect
      .poll(() => dialog.innerText(), SLOW)
      .toContain('Production will serve version 1 again instead of v2')
    await shots('release-rollback-confirm')
    await dialog.getByRole('button', { name: 'Roll back to v1' }).click()
    await expect.poll(() => production.locator('p strong').innerText(), SLOW).toBe('Version 1')
    await expect.poll(() => history.locator('tbody tr').count(), SLOW).toBe(3)
    expect(await production.getByText('Rolled back: production serves v1 again.').isVisible()).toBe(true)
    const invoked = await api<{ version: number }>(
      'POST',
      `/api/v1/prompts/${prompt._id}/invoke?env=production`,
      {},
    )
    expect(invoked.version).toBe(1)
    await shots('release-history')

    // ---- a 2-way split: the total is checked as it is typed
    await production.getByRole('button', { name: 'Split production across versions' }).click()
    const editor = production.getByRole('form', { name: 'Split production' })
    await editor.getByLabel('Variant 1', { exact: true }).selectOption({ label: 'Version 2' })
    await editor.getByLabel('Variant 2', { exact: true }).selectOption({ label: 'Version 1' })
    await editor.getByLabel('Weight of variant 1 %').fill('70')
    await editor.getByLabel('Weight of variant 2 %').fill('20')
    await expect
      .poll(() => editor.getByRole('list', { name: 'Why the split cannot be saved yet' }).innerText(), SLOW)
      .toBe('The weights add up to 90%; they must add up to 100%.')
    expect(await editor.getByRole('button', { name: 'Save split of production' }).isDisabled()).toBe(true)
    await shots('release-split-invalid')
    await editor.getByLabel('Weight of variant 2 %').fill('30')
    await editor.getByRole('button', { name: 'Save split of production' }).click()
    await expect.poll(() => production.locator('p strong').innerText(), SLOW).toBe('Split: v2 70% · v1 30%')
    // Invocations by 40 subjects show per variant (render flushes its counts; the page asks again).
    for (let i = 0; i < 40; i++) {
      await api('POST', `/api/v1/prompts/${prompt._id}/invoke?env=production`, { subject: `user-${i}` })
    }
    // The page's own invoke (what invoke?env=production returns) counts too: the table shows
    // what the service counted, at least the 40.
    const variants = production.getByRole('table', { name: 'Split of production' })
    const shown = async () =>
      (await variants.locator('tbody tr td:nth-child(3)').allInnerTexts()).map((c) => Number(c))
    await expect
      .poll(async () => (await shown()).reduce((sum, n) => sum + n, 0), { timeout: 20_000, interval: 250 })
      .toBeGreaterThanOrEqual(40)
    const counted = await api<{ production: { split: { variants: { invocations: number }[] } } }>(
      'GET',
      `/api/v1/prompts/${prompt._id}/environments`,
    )
    await expect.poll(shown, SLOW).toEqual(counted.production.split.variants.map((v) => v.invocations))
    await shots('release-split')

    // ---- a plain promote ends the split
    await production.getByLabel('Version for production').selectOption({ label: 'Version 2' })
    await production.getByRole('button', { name: 'Promote to production' }).click()
    await expect.poll(() => production.locator('p strong').innerText(), SLOW).toBe('Version 2')
    expect(
      await production
        .getByText('Promoted version 2 to production. The split has ended: every invoke gets this version.')
        .isVisible(),
    ).toBe(true)
    expect(await variants.count()).toBe(0)
    await expect
      .poll(() => history.locator('tbody tr').first().innerText(), SLOW)
      .toMatch(/^.*v2\s*live\s*Split v2 70% · v1 30%/s)

    // ---- a MEMBER is refused on the protected environment, and told why
    const memberContext = await browser.newContext(CONTEXT)
    const m = await memberContext.newPage()
    watch(m, errors)
    try {
      await signIn(m, MEMBER)
      await m.goto(`${base}/prompts/${prompt._id}/environments`)
      const memberProduction = m.getByRole('region', { name: 'Production' })
      await expect
        .poll(() => memberProduction.getByRole('note').innerText(), SLOW)
        .toContain(
          'Production is protected: only an OWNER or ADMIN may promote to it or roll it back (your role here is MEMBER)',
        )
      errors.allow(
        403,
        'POST',
        /\/environments\/production\/promote$/,
        'a MEMBER promotes to protected production',
      )
      await memberProduction.getByRole('button', { name: 'Promote to production' }).click()
      await expect
        .poll(() => memberProduction.getByRole('alert').innerText(), SLOW)
        .toMatch(/Not promoted: production is a protected environment.*FORBIDDEN/s)
      await shots('release-member-forbidden', m)
      await m.getByRole('link', { name: 'Audit log' }).click()
      await expect.poll(() => m.getByRole('note').innerText(), SLOW).toContain('can read the audit log')
      await shots('release-member-audit', m)
      // The protection is shown to a MEMBER, not changeable.
      await m.getByRole('link', { name: 'Settings' }).click()
      const memberProtection = m.getByRole('region', { name: 'Protected environments' })
      await expect
        .poll(() => memberProtection.getByRole('checkbox', { name: /production/ }).isChecked(), SLOW)
        .toBe(true)
      expect(await memberProtection.getByRole('checkbox', { name: /production/ }).isDisabled()).toBe(true)
      await expect
        .poll(() => memberProtection.getByRole('note').innerText(), SLOW)
        .toContain('can change which environments are protected')
      await shots('release-member-settings', m)
    } finally {
      await memberContext.close()
    }

    // ---- the prompt's own audit entries, then the organization's log filtered
    await page.getByRole('link', { name: 'Audit log' }).click()
    await page.waitForURL(/\/audit$/)
    const entries = page.getByRole('table', { name: 'Audit log entries' })
    await expect.poll(() => entries.locator('tbody tr').count(), SLOW).toBe(9)
    const actions = await entries.locator('tbody tr td:nth-child(3)').allInnerTexts()
    expect(actions.filter((a) => a === 'environment.promoted')).toHaveLength(5)
    expect(actions.at(-1)).toBe('prompt.created')
    // Actors by name (the members list), not by id.
    expect(new Set(await entries.locator('tbody tr td:nth-child(2)').allInnerTexts())).toEqual(
      new Set(['you']),
    )
    await shots('release-prompt-audit')
    await page.getByRole('link', { name: "Open in the organization's log" }).click()
    await page.waitForURL(/\/settings\/audit-log\?resourceId=/)
    // The organization's page has replaced the prompt's (its own form, the same nine entries)
    // before the filter is typed: a field filled in the page being left is lost with it.
    await expect
      .poll(() => page.getByRole('heading', { name: 'Audit log', exact: true }).isVisible(), SLOW)
      .toBe(true)
    await expect.poll(() => entries.locator('tbody tr').count(), SLOW).toBe(9)
    const action = page.getByLabel('Action')
    await action.fill('environment.promoted')
    await expect.poll(() => action.inputValue(), SLOW).toBe('environment.promoted')
    await page.getByRole('button', { name: 'Apply filters' }).click()
    await page.waitForURL(/action=environment.promoted/)
    await expect.poll(() => entries.locator('tbody tr').count(), SLOW).toBe(5)
    expect(await entries.locator('tbody tr').first().innerText()).toContain(
      'promoted greeting v2 to production',
    )
    expect(await page.getByRole('navigation', { name: 'Pages' }).innerText()).toContain('5 entries')
    await shots('release-audit-log')

    const [download] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export CSV' }).click(),
    ])
    expect(download.suggestedFilename()).toMatch(/^audit-log-\d{4}-\d{2}-\d{2}\.csv$/)
    const csv = readFileSync(await download.path(), 'utf8')
      .trim()
      .split('\n')
    expect(csv[0]).toMatch(/^id,at,organizationId,actorType/)
    expect(csv).toHaveLength(6)
    const [jsonl] = await Promise.all([
      page.waitForEvent('download'),
      page.getByRole('button', { name: 'Export JSONL' }).click(),
    ])
    const lines = readFileSync(await jsonl.path(), 'utf8')
      .trim()
      .split('\n')
    expect(lines.map((l) => (JSON.parse(l) as { action: string }).action)).toEqual(
      Array(5).fill('environment.promoted'),
    )

    // Nothing in a time range without changes: the empty state.
    await page.getByLabel('From').fill('2099-01-01T00:00')
    await page.getByRole('button', { name: 'Apply filters' }).click()
    await expect
      .poll(() => page.getByRole('heading', { name: 'No entries match these filters' }).isVisible(), SLOW)
      .toBe(true)
    await shots('release-audit-empty')
    expect(errors.report()).toEqual([])
    // About 20 s alone; a full npm test runs it beside eight other test files.
  })
})
