import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { CONTEXT_HEADER } from '@pm/contracts'
import { verifyContext } from '@pm/kit'

/**
 * A stand-in for the runs service's run routes (`POST /api/v1/prompts/:id/run`,
 * `POST /api/v1/prompts/slug/:slug/run`), answering what a test can predict: the experiments
 * service calls it exactly as it calls the runs service (internal HTTP, signed caller context),
 * so the job machinery is tested through the gateway with answers the test knows.
 *
 * Answers, for the variables `{n}`: a run of a version answers `answer-<n>`; a run of the
 * draft answers `answer-<n>` except every fourth n, `wrong-<n>`; `latencyMs` is n, usage
 * `{inputTokens: 10, outputTokens: n % 7}`. `{n, long: true}` answers 100,000 `a`s and a `c`.
 * A rubric slug `judge-ok` answers `{"score": 0.8}`, any other rubric `I like it` (no score).
 * `{n, limited: true}`: the first call for that n is a provider 429 (502 PROVIDER_ERROR with
 * `details.providerStatus: 429` and `retryAfter: 1`).
 */
export interface FakeCall {
  at: number
  path: string
  organizationId: string | undefined
  body: { variables?: Record<string, unknown>; version?: number; draft?: boolean; env?: string }
  status: number
}

export class FakeRuns {
  readonly calls: FakeCall[] = []
  /** Delay before each answer (cancel and crash tests). */
  delayMs = 0
  private readonly limitedOnce = new Set<string>()
  private readonly server: Server
  base = ''

  private constructor(secret: string) {
    this.server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        // A stand-in for a whole service: the gateway's readiness asks it for its health.
        if (req.method === 'GET' && req.url?.startsWith('/health/')) {
          res.writeHead(200, { 'content-type': 'application/json' })
          res.end('{"status":"ok"}')
          return
        }
        const context = verifyContext(req.headers[CONTEXT_HEADER] as string | undefined, secret)
        const send = (status: number, payload: unknown, headers: Record<string, string> = {}) => {
          res.writeHead(status, { 'content-type': 'application/json', ...headers })
          res.end(JSON.stringify(payload))
        }
        if (!context) {
          send(401, { error: { code: 'AUTH_REQUIRED', message: 'no context' } })
          return
        }
        let body: FakeCall['body'] = {}
        try {
          body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as FakeCall['body']
        } catch {
          send(400, { error: { code: 'VALIDATION_ERROR', message: 'bad json' } })
          return
        }
        const path = req.url ?? ''
        const answer = () => {
          const n = Number(body.variables?.n ?? 0)
          const call: FakeCall = {
            at: Date.now(),
            path,
            organizationId: context.organizationId,
            body,
            status: 200,
          }
          this.calls.push(call)
          if (body.variables?.limited === true && !this.limitedOnce.has(String(n))) {
            this.limitedOnce.add(String(n))
            call.status = 502
            send(
              502,
              {
                error: {
                  code: 'PROVIDER_ERROR',
                  message: 'rate limited',
                  details: { providerStatus: 429, retryAfter: 1 },
                },
              },
              { 'retry-after': '1' },
            )
            return
          }
          let content: string
          const slug = /^\/api\/v1\/prompts\/slug\/([^/]+)\/run$/.exec(path)?.[1]
          if (slug !== undefined) content = slug === 'judge-ok' ? '{"score": 0.8}' : 'I like it'
          else if (body.variables?.long === true) content = `${'a'.repeat(100_000)}c`
          else if (body.draft === true && n % 4 === 0) content = `wrong-${n}`
          else content = `answer-${n}`
          send(200, {
            runId: '0'.repeat(24),
            output: { role: 'assistant', content },
            finishReason: 'stop',
            usage: { inputTokens: 10, outputTokens: n % 7 },
            latencyMs: n,
            timeToFirstTokenMs: n,
          })
        }
        if (this.delayMs > 0) setTimeout(answer, this.delayMs)
        else answer()
      })
    })
  }

  static async start(secret: string): Promise<FakeRuns> {
    const fake = new FakeRuns(secret)
    await new Promise<void>((resolve) => fake.server.listen(0, '127.0.0.1', resolve))
    fake.base = `http://127.0.0.1:${(fake.server.address() as AddressInfo).port}`
    return fake
  }

  close(): Promise<void> {
    this.server.closeAllConnections()
    return new Promise((resolve) => this.server.close(() => resolve()))
  }
}

/** The aggregates the fake's answers imply for n = 1..count, variant 0 a version, 1 the draft, evaluator `exact`. */
export function expectedSummary(count: number) {
  const ns = Array.from({ length: count }, (_, i) => i + 1)
  const rank = (q: number) => ns[Math.max(1, Math.ceil(q * count)) - 1]
  const tokensOut = ns.reduce((s, n) => s + (n % 7), 0)
  const wrong = ns.filter((n) => n % 4 === 0).length
  return [1, (count - wrong) / count].map((mean, variant) => ({
    variant,
    done: count,
    errors: 0,
    evaluators: { exact: { mean: Math.round(mean * 1e6) / 1e6, count } },
    passRate: Math.round(mean * 1e6) / 1e6,
    latencyMs: { p50: rank(0.5), p95: rank(0.95) },
    tokens: { input: 10 * count, output: tokensOut },
  }))
}
