import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { type Browser, type BrowserContext, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { BrowserErrors } from '../src/browserErrors.ts'
import { call } from '../src/client.ts'
import { builtDashboard } from '../src/dashboardBuild.ts'
import { ADMIN } from '../src/slice.ts'

/**
 * Release safety in the dashboard (issue 29, DESIGN section 15) in Debian's chromium against
 * the embedded default: production protected in the settings, promotes and the environment's
 * history, a rollback, a 2-way split with its invocation counts, a plain promote ending it, a
 * MEMBER refused on the protected environment, and the audit log (the prompt's own entries,
 * filters, export). Screenshots at 1280 and 390 px into SHOTS_DIR (default e2e/.screenshots/,
 * names starting with "release-"), each checked with axe-core.
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const SHOTS = process.env.SHOTS_DIR ?? join(REPO_ROOT, 'e2e', '.screenshots')
const WIDTHS = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
] as const
const MEMBER = { email: 'mia@example.com', password: 'member password 1', name: 'Mia Member' }
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
/** The machine may be loaded: a page's queries can take seconds. */
const SLOW = { timeout: 15_000, interval: 100 }

interface Data<T> {
  data: T
}
interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: { target: string[] }[]
}

describe('the dashboard: release safety', () => {
  let dashboardDir: string
  let dataDir: string
  let proc: RunningProcess
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
  async function shots(name: string, p: Page = page): Promise<void> {
    for (const size of WIDTHS) {
      await p.setViewportSize(size)
      await p.waitForTimeout(150)
      await p.screenshot({ path: join(SHOTS, `${name}-${size.width}.png`), fullPage: true })
      await p.evaluate(axeSource)
      const violations = (await p.evaluate(
        `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)`,
      )) as AxeViolation[]
      expect(
        violations
          .filter((v) => v.impact === 'serious' || v.impact === 'critical')
          .map(
            (v) =>
              `${name}@${size.width}: ${v.id} ${v.help}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
          ),
      ).toEqual([])
    }
    await p.setViewportSize(WIDTHS[0])
  }

  async function signIn(p: Page, who: { email: string; password: string }): Promise<void> {
    await p.goto(`${base}/sign-in`)
    await p.getByLabel('Email').fill(who.email)
    await p.getByLabel('Password').fill(who.password)
    await p.getByRole('button', { name: 'Sign in' }).click()
    await p.waitForURL(/\/prompts$/)
  }

  beforeAll(async () => {
    if (!existsSync(CHROMIUM)) throw new Error(`${CHROMIUM} is missing (or set CHROMIUM_PATH)`)
    dashboardDir = builtDashboard()
    mkdirSync(SHOTS, { recursive: true })
    dataDir = mkdtempSync(join(tmpdir(), 'pm-dashboard-release-'))
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
      AUTH_ALLOW_SIGNUP: 'true',
      // Render sends a split's invocation counts this often (5 s by default).
      SPLIT_COUNTS_FLUSH_MS: '200',
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
    const login = await call<Data<{ accessToken: string; organizationId: string }>>(
      base,
      'POST',
      '/api/v1/auth/login',
      { body: { email: ADMIN.email, password: ADMIN.password } },
    )
    token = login.body.data.accessToken
    orgId = login.body.data.organizationId
    expect((await call(base, 'POST', '/api/v1/auth/register', { body: MEMBER })).status).toBe(201)
    await api('POST', `/api/v1/organizations/${orgId}/members`, { email: MEMBER.email, role: 'MEMBER' })
    browser = await chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu'] })
    context = await browser.newContext({
      viewport: WIDTHS[0],
      locale: 'en-GB',
      timezoneId: 'UTC',
      acceptDownloads: true,
    })
    page = await context.newPage()
    page.setDefaultTimeout(10_000)
    errors.watch(page)
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    await proc?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  it('protects production, promotes, rolls back, splits, and reads the audit log', async ({
    onTestFailed,
  }) => {
    onTestFailed(async () => {
      await page?.screenshot({ path: join(SHOTS, 'release-failure.png'), fullPage: true }).catch(() => {})
    })
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
    const memberContext = await browser.newContext({
      viewport: WIDTHS[0],
      locale: 'en-GB',
      timezoneId: 'UTC',
    })
    const m = await memberContext.newPage()
    m.setDefaultTimeout(10_000)
    errors.watch(m)
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
    await page.getByLabel('Action').fill('environment.promoted')
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
  })
})
