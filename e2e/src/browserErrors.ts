import type { Page } from 'playwright-core'

interface Allowance {
  status: number
  method: string
  path: RegExp
  /** Why the test causes it, for the report of an unused allowance. */
  why: string
}

/**
 * What a browser test's pages must not do in normal use (DESIGN section 17): log anything to
 * the console as an error, throw, or get a 4xx/5xx answer. A step that causes a refusal on
 * purpose (a wrong password, a form the service refuses) allows exactly that one answer first
 * (`allow`): its status, method and path; each allowance is used once, and one left unused at
 * the end fails too (the step no longer does what the test thinks).
 *
 * The browser's own console line for a failed load ("Failed to load resource: the server
 * responded with a status of 404") is not counted on its own: the answer it reports is judged
 * by the response rule, which sees every one of them with its method and URL.
 */
export class BrowserErrors {
  readonly problems: string[] = []
  private readonly allowances: Allowance[] = []

  watch(page: Page): void {
    page.on('console', (msg) => {
      if (msg.type() !== 'error') return
      if (/^Failed to load resource: the server responded with a status of \d{3}/.test(msg.text())) return
      this.problems.push(`console: ${msg.text()} (${msg.location().url})`)
    })
    page.on('pageerror', (err) => this.problems.push(`pageerror: ${err.message}`))
    page.on('response', (res) => {
      const status = res.status()
      if (status < 400) return
      const method = res.request().method()
      const url = new URL(res.url())
      const i = this.allowances.findIndex(
        (a) => a.status === status && a.method === method && a.path.test(url.pathname),
      )
      if (i >= 0) this.allowances.splice(i, 1)
      else this.problems.push(`response: ${status} ${method} ${url.pathname}${url.search}`)
    })
  }

  /** The next `status` answer to `method` on a path matching `path` is expected (once). */
  allow(status: number, method: string, path: RegExp, why: string): void {
    this.allowances.push({ status, method, path, why })
  }

  /** Starts over (between tests that share a page). */
  clear(): void {
    this.problems.length = 0
    this.allowances.length = 0
  }

  /** Problems seen so far, and allowances never used. */
  report(): string[] {
    return [
      ...this.problems,
      ...this.allowances.map((a) => `expected but not seen: ${a.status} ${a.method} ${a.path} (${a.why})`),
    ]
  }
}
