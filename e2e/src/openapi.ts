import type { OpenApiDocument } from '@pm/openapi'
import { createResponseValidator, type SeenResponse } from '@pm/openapi/validate'

/**
 * Records every response the test process receives from `base` (by wrapping the global
 * fetch), so a suite can check afterwards that each one is what the OpenAPI document says.
 * Usage: `const rec = recordResponses(stack.gateway)` in beforeAll, `rec.stop()` in afterAll,
 * and `expectDocumented(doc, rec.seen)` after the traffic.
 */
export function recordResponses(base: string): { seen: SeenResponse[]; stop(): void } {
  const original = globalThis.fetch
  const seen: SeenResponse[] = []
  const wrapped: typeof fetch = async (input, init) => {
    const res = await original(input, init)
    const url = typeof input === 'string' ? input : input instanceof URL ? input.href : input.url
    if (!url.startsWith(base)) return res
    const method = init?.method ?? (input instanceof Request ? input.method : 'GET')
    const text = await res.clone().text()
    let body: unknown = text === '' ? null : text
    try {
      body = text ? JSON.parse(text) : null
    } catch {
      // not JSON: the text is what gets checked
    }
    seen.push({ method, url, status: res.status, contentType: res.headers.get('content-type'), body })
    return res
  }
  globalThis.fetch = wrapped
  return {
    seen,
    stop: () => {
      if (globalThis.fetch === wrapped) globalThis.fetch = original
    },
  }
}

/** Each recorded response checked against the document: the failures, one line each. */
export function undocumentedResponses(doc: OpenApiDocument, seen: SeenResponse[]): string[] {
  const validator = createResponseValidator(doc)
  return seen.flatMap((s) => {
    const outcome = validator.validate(s)
    return outcome.ok ? [] : [outcome.message]
  })
}

export interface ResponseAudit {
  /** Every response recorded so far. */
  seen: SeenResponse[]
  /** Fetches the document from the gateway and lists the recorded responses it does not describe. */
  problems(): Promise<string[]>
  stop(): void
}

/**
 * For a whole suite: start in beforeAll (after the stack is up), stop in afterAll, and assert
 * `await audit.problems()` is empty in the suite's last test. A 404 for a path the document
 * does not list is the gateway's "no such route" and is left out (suites probe internal paths).
 */
export function auditResponses(base: string): ResponseAudit {
  const rec = recordResponses(base)
  return {
    seen: rec.seen,
    stop: rec.stop,
    async problems() {
      const res = await fetch(`${base}/api/v1/openapi.json`)
      if (res.status !== 200) return [`GET /api/v1/openapi.json answered ${res.status}`]
      const doc = (await res.json()) as OpenApiDocument
      const validator = createResponseValidator(doc)
      return rec.seen.flatMap((s) => {
        if (s.status === 404 && !validator.templateFor(s.method, s.url)) return []
        const outcome = validator.validate(s)
        return outcome.ok ? [] : [outcome.message]
      })
    },
  }
}
