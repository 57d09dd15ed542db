import { randomBytes } from 'node:crypto'
import type { Browser, Page } from 'playwright-core'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import {
  CONTEXT,
  checkPage,
  type DashboardService,
  expectNoOverflow,
  failureShot,
  launchChromium,
  prepareDashboard,
  SLOW,
  signIn,
  startService,
  WALK,
} from '../src/dashboardPage.ts'
import { FakeRuns } from '../src/fakeRuns.ts'
import { type Caller, caller, data, login } from '../src/prompts.ts'

/**
 * The datasets and experiments pages in Debian's chromium against the embedded default (the
 * runs service stood in for by e2e/src/fakeRuns.ts): a dataset created from a CSV file, an
 * experiment started from a prompt's page, its progress and aggregates, the items side by side
 * with failures filtered. axe-core on each page; screenshots at 1280 and 390 px into
 * e2e/.screenshots/ (names starting with "experiments-").
 */
const ROWS = 12
/** Polls with room for lazy pages and a loaded machine (vitest's default is 1 s). */
const poll = <T>(fn: () => Promise<T> | T, opts: { timeout?: number } = {}) =>
  expect.poll(fn, { ...SLOW, ...opts })

describe('datasets and experiments in a real browser', { timeout: WALK }, () => {
  let service: DashboardService
  let base: string
  let fake: FakeRuns
  let browser: Browser
  let page: Page
  let promptId: string
  let user: Caller
  let connectionId: string
  const consoleErrors: string[] = []

  const check = (name: string) => checkPage(page, `experiments-${name}`)

  beforeAll(async () => {
    const dashboardDir = prepareDashboard()
    const secret = randomBytes(32).toString('hex')
    fake = await FakeRuns.start(secret)
    fake.delayMs = 40
    service = await startService(dashboardDir, {
      prefix: 'pm-dashboard-exp-',
      readyMs: 90_000,
      env: {
        INTERNAL_AUTH_SECRET: secret,
        RUNS_URL: fake.base,
        EXPERIMENT_POLL_MS: '50',
        // A regex stopped at its deadline without waiting the default 2 s.
        EXPERIMENT_EVALUATOR_TIMEOUT_MS: '500',
        LOG_LEVEL: 'warn',
      },
    })
    base = service.base
    const session = await login(base)
    user = caller(base, session.token)
    // A model connection to choose in the form (the fake runs answer whichever one is sent).
    connectionId = data<{ _id: string }>(
      await user('POST', `/api/v1/organizations/${session.organizationId}/connections`, {
        name: 'Quiz model',
        provider: 'openai',
        apiKey: 'sk-test-not-used',
      }),
      201,
    )._id
    promptId = data<{ _id: string }>(
      await user('POST', '/api/v1/prompts', { name: 'Capitals', template: 'Q {{n}}' }),
      201,
    )._id
    data(await user('POST', `/api/v1/prompts/${promptId}/publish`, { changeLog: 'v1' }), 201)
    browser = await launchChromium(['--no-first-run'])
    const context = await browser.newContext(CONTEXT)
    page = await context.newPage()
    page.setDefaultTimeout(15_000)
    page.on('console', (msg) => {
      if (msg.type() === 'error') consoleErrors.push(msg.text())
    })
    page.on('pageerror', (err) => consoleErrors.push(`pageerror: ${err.message}`))
  }, 240_000)

  afterAll(async () => {
    await browser?.close()
    await service?.stop()
    await fake?.close()
  })

  beforeEach(({ onTestFailed }) => {
    onTestFailed(() => failureShot(page, 'experiments-failure.png'))
  })

  it('creates a dataset from a CSV, starts an experiment from the prompt, shows progress, aggregates and failures', async () => {
    await signIn(page, base)

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
    await page.getByLabel('Connection', { exact: true }).selectOption({ label: 'Quiz model (openai)' })
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
  })

  it('an evaluator stopped at its deadline: its error is written in the cell, readable at 390 px', async () => {
    consoleErrors.length = 0
    // `long: true`: the fake runs answer 100,000 `a`s and a `c`, on which the regex backtracks.
    const dataset = data<{ _id: string }>(
      await user('POST', '/api/v1/datasets', {
        name: 'Long answers',
        items: [{ variables: { n: 1, long: true } }, { variables: { n: 2 }, expected: 'answer-2' }],
      }),
      201,
    )
    const { experimentId } = data<{ experimentId: string }>(
      await user('POST', '/api/v1/experiments', {
        name: 'Backtracking regex',
        datasetId: dataset._id,
        connectionId,
        variants: [{ promptId, version: 1 }],
        evaluators: [{ type: 'regex', pattern: '[a-c]{1,1000}[d-f]', name: 'ends_in_d_to_f' }],
      }),
      202,
    )
    await page.goto(`${base}/experiments/${experimentId}`)
    await poll(() => page.getByText('completed', { exact: true }).isVisible(), { timeout: 30_000 }).toBe(true)
    const items = page.getByRole('table', { name: 'Items side by side' })
    const stopped = items.locator('.evaluator-error')
    await poll(() => stopped.count()).toBe(1)
    expect(await stopped.innerText()).toMatch(/^ends_in_d_to_f: .*took longer than 500 ms/)
    // The answer of 100,001 characters: its first thousand, the rest behind a disclosure.
    expect(await items.getByText('99,001 more characters').isVisible()).toBe(true)
    expect(await page.evaluate('document.documentElement.scrollHeight')).toBeLessThan(3_000)
    await expectNoOverflow(page, 'experiments-evaluator-error')
    await check('evaluator-error')
    expect(consoleErrors).toEqual([])
  })
})
