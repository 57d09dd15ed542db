import { execFileSync } from 'node:child_process'
import { randomBytes } from 'node:crypto'
import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { type Browser, chromium, type Page } from 'playwright-core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { FakeRuns } from '../src/fakeRuns.ts'
import { caller, data, login } from '../src/prompts.ts'
import { ADMIN } from '../src/slice.ts'
import { builtDashboard } from '../src/dashboardBuild.ts'

/**
 * The datasets and experiments pages in Debian's chromium against the embedded default (the
 * runs service stood in for by e2e/src/fakeRuns.ts): a dataset created from a CSV file, an
 * experiment started from a prompt's page, its progress and aggregates, the items side by side
 * with failures filtered. axe-core on each page; screenshots at 1280 and 390 px into
 * e2e/.screenshots/ (names starting with "experiments-").
 */
const CHROMIUM = process.env.CHROMIUM_PATH ?? '/usr/bin/chromium'
const SHOTS = join(REPO_ROOT, 'e2e', '.screenshots')
const WIDTHS = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
] as const
const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')
const ROWS = 12
/** Polls with room for lazy pages and a loaded machine (vitest's default is 1 s). */
const poll = <T>(fn: () => Promise<T> | T, opts: { timeout?: number } = {}) =>
  expect.poll(fn, { timeout: 15_000, interval: 100, ...opts })

interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: { target: string[] }[]
}

describe('datasets and experiments in a real browser', () => {
  let dashboardDir: string
  let dataDir: string
  let proc: RunningProcess
  let base: string
  let fake: FakeRuns
  let browser: Browser
  let page: Page
  let promptId: string
  const consoleErrors: string[] = []

  async function check(name: string): Promise<void> {
    for (const size of WIDTHS) {
      await page.setViewportSize(size)
      await page.waitForTimeout(150)
      await page.screenshot({ path: join(SHOTS, `experiments-${name}-${size.width}.png`), fullPage: true })
      await page.evaluate(axeSource)
      const violations = (await page.evaluate(
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
    await page.setViewportSize(WIDTHS[0])
  }

  beforeAll(async () => {
    if (!existsSync(CHROMIUM))
      throw new Error(`${CHROMIUM} is missing: apt-get install -y chromium (or set CHROMIUM_PATH)`)
    dashboardDir = builtDashboard()
    mkdirSync(SHOTS, { recursive: true })
    const secret = randomBytes(32).toString('hex')
    fake = await FakeRuns.start(secret)
    fake.delayMs = 40
    dataDir = mkdtempSync(join(tmpdir(), 'pm-dashboard-exp-'))
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      DASHBOARD_DIR: dashboardDir,
      INTERNAL_AUTH_SECRET: secret,
      RUNS_URL: fake.base,
      EXPERIMENT_POLL_MS: '50',
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ADMIN_NAME: 'Ada Admin',
      BOOTSTRAP_ORG_NAME: ADMIN.org,
      LOG_LEVEL: 'warn',
    })
    await waitForHttp(`${base}/health/ready`, 60_000, proc)
    const user = caller(base, (await login(base)).token)
    promptId = data<{ _id: string }>(
      await user('POST', '/api/v1/prompts', { name: 'Capitals', template: 'Q {{n}}' }),
      201,
    )._id
    data(await user('POST', `/api/v1/prompts/${promptId}/publish`, { changeLog: 'v1' }), 201)
    browser = await chromium.launch({
      executablePath: CHROMIUM,
      args: ['--no-sandbox', '--disable-gpu', '--no-first-run'],
    })
    const context = await browser.newContext({ viewport: WIDTHS[0], locale: 'en-GB', timezoneId: 'UTC' })
    page = await context.newPage()
    page.setDefaultTimeout(15_000)
    page.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(msg.text())
    })
    page.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`))
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    await proc?.stop()
    await fake?.close()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  beforeEach(({ onTestFailed }) => {
    onTestFailed(async () => {
      await page?.screenshot({ path: join(SHOTS, 'experiments-failure.png'), fullPage: true }).catch(() => {})
    })
  })

  it('creates a dataset from a CSV, starts an experiment from the prompt, shows progress, aggregates and failures', async () => {
    await page.goto(`${base}/sign-in`)
    await page.getByLabel('Email').fill(ADMIN.email)
    await page.getByLabel('Password').fill(ADMIN.password)
    await page.getByRole('button', { name: 'Sign in' }).click()
    await page.waitForURL(/\/prompts$/)

    await page.getByRole('link', { name: 'Datasets' }).click()
    await page.waitForURL(/\/datasets$/)
    await page.getByLabel('Name').fill('Capitals quiz')
    const csv = `n,expected\n${Array.from({ length: ROWS }, (_, i) => `${i + 1},answer-${i + 1}`).join('\n')}\n`
    await page
      .getByLabel('CSV or JSONL file')
      .setInputFiles({ name: 'quiz.csv', mimeType: 'text/csv', buffer: Buffer.from(csv) })
    await page.getByRole('button', { name: 'Create dataset' }).click()
    await page.waitForURL(/\/datasets\/[0-9a-f]{24}$/)
    await poll(() => page.getByText(`${ROWS} items`).isVisible()).toBe(true)
    await poll(() => page.getByRole('table', { name: 'Items' }).getByRole('row').count()).toBe(ROWS + 1)
    await check('dataset')

    // A bad file: the row is reported, nothing imported.
    await page
      .getByLabel('CSV or JSONL file')
      .setInputFiles({ name: 'bad.csv', mimeType: 'text/csv', buffer: Buffer.from('n,x\n1,2\n3\n') })
    await page.getByRole('button', { name: 'Upload' }).click()
    await poll(() => page.getByText(/row 3/).first().isVisible()).toBe(true)
    expect(await page.getByText(`${ROWS} items`).isVisible()).toBe(true)

    await page.goto(`${base}/prompts/${promptId}/experiments`)
    await poll(() => page.getByRole('heading', { name: 'Compare versions on a dataset' }).isVisible()).toBe(
      true,
    )
    await page.getByLabel('Dataset', { exact: true }).selectOption({ label: `Capitals quiz (${ROWS} items)` })
    await page.getByLabel('Connection id').fill('c'.repeat(24))
    await check('compare')
    await page.getByRole('button', { name: 'Run the experiment' }).click()
    await page.waitForURL(/\/experiments\/[0-9a-f]{24}$/)
    await poll(() => page.getByText(/runs done/).isVisible()).toBe(true)
    await poll(() => page.getByText(`${2 * ROWS} of ${2 * ROWS} runs done`).isVisible(), {
      timeout: 30_000,
    }).toBe(true)
    await poll(() => page.getByText('completed', { exact: true }).isVisible()).toBe(true)
    const aggregates = page.getByRole('table', { name: 'Aggregates per variant' })
    // The draft answers wrong on every fourth item: 3 of 12.
    expect(await aggregates.getByRole('row', { name: /draft/ }).innerText()).toMatch(/0\.75/)
    expect(await aggregates.getByRole('row', { name: /^v1/ }).innerText()).toMatch(/100%/)
    await check('results')
    await page.getByLabel('Failures only').check()
    const items = page.getByRole('table', { name: 'Items side by side' })
    await poll(() => items.getByRole('row').count()).toBe(4)
    expect(await items.innerText()).toMatch(/wrong-4/)
    await check('failures')
    expect(consoleErrors.filter((e) => !/status of 400/.test(e))).toEqual([])
  }, 120_000)
})
