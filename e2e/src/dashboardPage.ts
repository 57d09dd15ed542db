import { existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { createRequire } from 'node:module'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { type Browser, chromium, type Page } from 'playwright-core'
import { expect } from 'vitest'
import type { BrowserErrors } from './browserErrors.ts'
import { builtDashboard } from './dashboardBuild.ts'
import { ADMIN } from './slice.ts'

const HEADLESS_SHELL = '/usr/bin/chromium-headless-shell'

/**
 * What the dashboard's browser test files (e2e/test/dashboard*.int.test.ts) share: Debian's
 * chromium (no browser download), the dashboard built from the current sources and served by
 * the embedded default, signing in through the page, and the check of a page: screenshots at
 * both widths and axe-core (a serious or critical violation fails).
 *
 * The browser: CHROMIUM_PATH, else Debian's `chromium-headless-shell` (Chromium's headless-only
 * build, about a third less CPU for the same walks), else the full `chromium` run headless
 * (docs/decisions.md, "The browser tests run Chromium's headless shell").
 */
export const CHROMIUM =
  process.env.CHROMIUM_PATH ?? (existsSync(HEADLESS_SHELL) ? HEADLESS_SHELL : '/usr/bin/chromium')
/** Where the screenshots go (e2e/.screenshots/, ignored by git). */
export const SHOTS = join(REPO_ROOT, 'e2e', '.screenshots')
/**
 * Whether the page checks write their screenshots: yes, unless PM_TEST_SHOTS=0 (`npm test` sets
 * it: drawing and encoding some 300 full-page PNGs was about a tenth of chromium's CPU in a run,
 * and no test reads them). Each page is still laid out at both widths and checked with axe-core;
 * a failing test's own screenshot is taken either way.
 */
export const SHOTS_WANTED = process.env.PM_TEST_SHOTS !== '0'
/** Desktop and narrow (a phone): each page is checked at both. */
export const WIDTHS = [
  { width: 1280, height: 860 },
  { width: 390, height: 844 },
] as const
/** The browser context most files use: desktop width, British English, UTC. */
export const CONTEXT = { viewport: WIDTHS[0], locale: 'en-GB', timezoneId: 'UTC' }
/** expect.poll with room for a loaded machine (its default gives up after 1 s). */
export const SLOW = { timeout: 15_000, interval: 100 }
/**
 * The bound of each test in a browser file (its describe's `timeout`). Every step of a walk
 * polls with its own bound (SLOW), so this one only catches a hang; a walk of about 20 s alone
 * passed 120 s in a full `npm test` on a loaded 2-core machine (CI, 2026-11-28).
 */
export const WALK = 300_000
/** Extra chromium flags that keep it from reaching out on its own (updates, sync, first-run). */
export const QUIET = [
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
  '--no-first-run',
]

export interface Viewport {
  width: number
  height: number
}

/**
 * Before anything else in a file's set-up: fails at once without chromium, makes the
 * screenshots folder, and returns the folder of the built dashboard.
 */
export function prepareDashboard(shots: string = SHOTS): string {
  if (!existsSync(CHROMIUM)) {
    throw new Error(
      `${CHROMIUM} is missing: apt-get install -y chromium-headless-shell (or chromium, or set CHROMIUM_PATH)`,
    )
  }
  const dashboardDir = builtDashboard()
  mkdirSync(shots, { recursive: true })
  return dashboardDir
}

/** Debian's chromium, headless, with `--no-sandbox --disable-gpu` and then `extra`. */
export function launchChromium(extra: readonly string[] = []): Promise<Browser> {
  return chromium.launch({ executablePath: CHROMIUM, args: ['--no-sandbox', '--disable-gpu', ...extra] })
}

export interface DashboardService {
  proc: RunningProcess
  base: string
  dataDir: string
  /** Stops the process and removes its data. */
  stop(): Promise<void>
}

/**
 * The embedded default on a free port with a data folder of its own, serving the dashboard
 * built into `dashboardDir`, with the bootstrap admin (ADMIN, named Ada Admin); `env` adds to
 * or overrides its environment. Answers once it is ready (`readyMs`: a start takes 20 s and
 * more on a loaded 2-core machine); a start that fails is stopped and its data removed.
 */
export async function startService(
  dashboardDir: string,
  opts: { env?: Record<string, string>; prefix?: string; readyMs?: number } = {},
): Promise<DashboardService> {
  const dataDir = mkdtempSync(join(tmpdir(), opts.prefix ?? 'pm-dashboard-'))
  const port = await freePort()
  const base = `http://127.0.0.1:${port}`
  const proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
    PORT: String(port),
    DATA_DIR: dataDir,
    DASHBOARD_DIR: dashboardDir,
    BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
    BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
    BOOTSTRAP_ADMIN_NAME: 'Ada Admin',
    BOOTSTRAP_ORG_NAME: ADMIN.org,
    ...opts.env,
  })
  const stop = async () => {
    await proc.stop()
    rmSync(dataDir, { recursive: true, force: true })
  }
  try {
    await waitForHttp(`${base}/health/ready`, opts.readyMs ?? 90_000, proc)
  } catch (err) {
    await stop()
    throw err
  }
  return { proc, base, dataDir, stop }
}

/** A page's default timeout, and its console errors, page errors and 4xx/5xx answers watched. */
export function watch(page: Page, errors: BrowserErrors, timeoutMs = 20_000): void {
  page.setDefaultTimeout(timeoutMs)
  errors.watch(page)
}

/** Signs in through the sign-in page and waits for the prompts list. */
export async function signIn(
  page: Page,
  base: string,
  who: { email: string; password: string } = ADMIN,
): Promise<void> {
  await page.goto(`${base}/sign-in`)
  await page.getByLabel('Email').fill(who.email)
  await page.getByLabel('Password').fill(who.password)
  await page.getByRole('button', { name: 'Sign in' }).click()
  await page.waitForURL(/\/prompts$/)
}

interface AxeViolation {
  id: string
  impact: string | null
  help: string
  nodes: { target: string[] }[]
}

const axeSource = readFileSync(createRequire(import.meta.url).resolve('axe-core/axe.min.js'), 'utf8')

/** Fails on any serious or critical axe-core violation of the page as it is now. */
export async function axe(page: Page, name: string): Promise<void> {
  // Once per document: the dashboard moves between its pages without loading a new one.
  if (!(await page.evaluate(`typeof window.axe !== 'undefined'`))) await page.evaluate(axeSource)
  const violations = (await page.evaluate(
    `axe.run(document, { resultTypes: ['violations'] }).then((r) => r.violations)`,
  )) as AxeViolation[]
  const serious = violations.filter((v) => v.impact === 'serious' || v.impact === 'critical')
  expect(
    serious.map(
      (v) => `${name}: ${v.id} (${v.impact}) ${v.help}: ${v.nodes.map((n) => n.target.join(' ')).join(', ')}`,
    ),
  ).toEqual([])
}

export interface ShotOptions {
  /** The folder (SHOTS unless given). */
  dir?: string
  /** The viewports, the first one the page is left at (WIDTHS unless given). */
  widths?: readonly Viewport[]
  /** Scrolled to the top first: a sticky toolbar would otherwise be drawn where the page was scrolled to. */
  top?: boolean
}

async function shoot(page: Page, name: string, opts: ShotOptions, withAxe: boolean): Promise<void> {
  const widths = opts.widths ?? WIDTHS
  for (const size of widths) {
    await page.setViewportSize(size)
    if (opts.top) await page.evaluate('window.scrollTo(0, 0)')
    // The new width laid out and painted: two frames (no script of the dashboard reacts to the
    // width; its layouts are CSS media queries, applied in the next frame). The timer bounds
    // it should a page ever get no frames (a hidden one).
    await page.evaluate(
      'new Promise((r) => { requestAnimationFrame(() => requestAnimationFrame(r)); setTimeout(r, 500) })',
    )
    if (SHOTS_WANTED)
      await page.screenshot({ path: join(opts.dir ?? SHOTS, `${name}-${size.width}.png`), fullPage: true })
    if (withAxe) await axe(page, `${name}@${size.width}`)
  }
  if (widths[0]) await page.setViewportSize(widths[0])
}

/** Full-page screenshots `<name>-<width>.png` at each width, back to the first after. */
export function screenshots(page: Page, name: string, opts: ShotOptions = {}): Promise<void> {
  return shoot(page, name, opts, false)
}

/** Screenshots and axe-core at each width (layouts differ), back to the first after. */
export function checkPage(page: Page, name: string, opts: ShotOptions = {}): Promise<void> {
  return shoot(page, name, opts, true)
}

/** For onTestFailed: the page as it was when the test failed (nothing if there is no page). */
export async function failureShot(page: Page | undefined, file: string, dir: string = SHOTS): Promise<void> {
  await page?.screenshot({ path: join(dir, file), fullPage: true }).catch(() => {})
}

/**
 * Fails if the page is wider than the viewport at either width (WIDTHS): a long name without
 * spaces, say, that pushes the page sideways on a phone. Back to the first width after.
 */
export async function expectNoOverflow(page: Page, name: string): Promise<void> {
  for (const size of WIDTHS) {
    await page.setViewportSize(size)
    await page.evaluate(
      'new Promise((r) => { requestAnimationFrame(() => requestAnimationFrame(r)); setTimeout(r, 500) })',
    )
    const width = await page.evaluate('document.documentElement.scrollWidth')
    expect(width, `${name}@${size.width}: the page is ${width} px wide`).toBeLessThanOrEqual(size.width)
  }
  if (WIDTHS[0]) await page.setViewportSize(WIDTHS[0])
}
