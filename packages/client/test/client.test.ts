import type { ServerResponse } from 'node:http'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterEach, beforeEach, describe, expect, it, vi } from 'vitest'
import {
  PromptClient,
  type PromptClientOptions,
  PromptServiceError,
  parseRetryAfter,
  type RetryInfo,
  stableKey,
} from '../src/index.ts'

const ID = '0123456789abcdef01234567'
const VERSION_ID = '0123456789abcdef0123456a'
const ORG = '0123456789abcdef0123456b'

interface Seen {
  method: string
  url: string
  headers: Record<string, string | string[] | undefined>
  body: unknown
}

interface Answer {
  status?: number
  headers?: Record<string, string>
  body?: unknown
  raw?: string
  /** Answered once this settles (the answer itself is taken when the request arrives). */
  wait?: Promise<unknown>
  /** Writes the answer itself on the socket (a stalled or cut body). */
  hijack?: (res: ServerResponse) => void
}

/** A stand-in for the gateway: answers what the test scripts and records every request. */
class FakeGateway {
  app: FastifyInstance | undefined
  port = 0
  seen: Seen[] = []
  handler: (req: Seen) => Answer = () => ({ status: 404, body: error('NOT_FOUND') })

  async start(port = 0): Promise<string> {
    // A stalled answer must not hold the server open when the test ends.
    const app = Fastify({ forceCloseConnections: true })
    app.addContentTypeParser('multipart/form-data', { parseAs: 'string' }, (_req, body, done) =>
      done(null, body),
    )
    app.route({
      method: ['GET', 'POST', 'PATCH', 'DELETE'],
      url: '/*',
      handler: async (request, reply) => {
        const seen: Seen = {
          method: request.method,
          url: request.url,
          headers: request.headers,
          body: request.body,
        }
        this.seen.push(seen)
        const answer = this.handler(seen)
        if (answer.wait) await answer.wait
        if (answer.hijack) {
          reply.hijack()
          answer.hijack(reply.raw)
          return reply
        }
        reply.code(answer.status ?? 200).headers({ 'x-request-id': 'req-1', ...answer.headers })
        if (answer.raw !== undefined) return reply.type('text/plain').send(answer.raw)
        return answer.body === undefined ? reply.send() : reply.send(answer.body)
      },
    })
    await app.listen({ host: '127.0.0.1', port })
    const address = app.server.address()
    this.port = typeof address === 'object' && address ? address.port : 0
    this.app = app
    return `http://127.0.0.1:${this.port}`
  }

  async stop(): Promise<void> {
    await this.app?.close()
    this.app = undefined
  }

  hits(fragment: string): number {
    return this.seen.filter((s) => s.url.includes(fragment)).length
  }
}

function error(code: string, message = 'failed', details?: unknown) {
  return { error: { code, message, requestId: 'req-from-body', ...(details ? { details } : {}) } }
}

function rendered(text: string, version = 1) {
  return {
    data: { renderedContent: text, variables: {}, promptId: ID, versionId: VERSION_ID, version },
  }
}

describe('PromptClient against a fake gateway', () => {
  const fake = new FakeGateway()
  let base: string
  let now: number
  let sleeps: number[]
  let retries: RetryInfo[]
  let backgroundErrors: unknown[]

  const client = (extra: Partial<PromptClientOptions> = {}) =>
    new PromptClient({
      baseUrl: base,
      apiKey: 'pk_test',
      cacheTtlMs: 1_000,
      clock: {
        now: () => now,
        sleep: async (ms) => {
          sleeps.push(ms)
        },
        random: () => 0.5,
      },
      onRetry: (info) => retries.push(info),
      onBackgroundError: (err) => backgroundErrors.push(err),
      ...extra,
    })

  beforeEach(async () => {
    fake.seen = []
    now = 1_700_000_000_000
    sleeps = []
    retries = []
    backgroundErrors = []
    base = await fake.start()
  })

  afterEach(async () => {
    await fake.stop()
  })

  describe('typed routes', () => {
    it('fills path parameters, sends the query and the key, and unwraps {data}', async () => {
      fake.handler = () => ({
        body: {
          data: {
            prompts: [],
            pagination: { page: 2, limit: 5, total: 0, totalPages: 0, hasNextPage: false },
            summary: { total: 0, public: 0, private: 0, published: 0, unpublished: 0 },
          },
        },
      })
      const list = await client().api.listPrompts({ query: { page: 2, limit: 5, search: 'a b' } })
      expect(list.pagination.page).toBe(2)
      expect(fake.seen[0]?.url).toBe('/api/v1/prompts?page=2&limit=5&search=a+b')
      expect(fake.seen[0]?.headers.authorization).toBe('Bearer pk_test')

      fake.handler = () => ({ body: { data: [{ name: 'x/y', required: true }] } })
      await client().api.updateVariable({ params: { id: ID, name: 'x/y' }, body: { required: false } })
      expect(fake.seen[1]?.url).toBe(`/api/v1/prompts/${ID}/variables/x%2Fy`)
      expect(fake.seen[1]?.body).toEqual({ required: false })
    })

    it('sends no credential to public routes and names the workspace for a user token', async () => {
      fake.handler = () => ({ body: rendered('Hi') })
      await client().api.invokePublicPrompt({ params: { id: ID }, body: { variables: {} } })
      expect(fake.seen[0]?.headers.authorization).toBeUndefined()

      const user = client({ apiKey: undefined, accessToken: 'jwt-token', organizationId: ORG })
      await user.api.invokePrompt({ params: { id: ID }, query: { env: 'production' } })
      expect(fake.seen[1]?.headers.authorization).toBe('Bearer jwt-token')
      expect(fake.seen[1]?.url).toBe(`/api/v1/prompts/${ID}/invoke?env=production&organizationId=${ORG}`)
      fake.handler = () => ({ body: { data: { organizations: [] } } })
      await user.api.listOrganizations()
      expect(fake.seen[2]?.url).toBe('/api/v1/organizations')
    })

    it('uploads a CSV as multipart and reads 204 and HTML answers', async () => {
      fake.handler = () => ({ status: 202, body: { data: { batchId: ID, message: 'accepted' } } })
      const accepted = await client({ accessToken: 't' }).api.importPrompts({
        body: { file: 'name,template\nA,Hello {{x}}\n', filename: 'p.csv' },
      })
      expect(accepted.batchId).toBe(ID)
      expect(String(fake.seen[0]?.headers['content-type'])).toContain('multipart/form-data')
      expect(String(fake.seen[0]?.body)).toContain('Hello {{x}}')
      expect(String(fake.seen[0]?.body)).toContain('filename="p.csv"')

      fake.handler = () => ({ status: 204 })
      expect(await client().api.logout({ body: { refreshToken: 'r' } })).toBeUndefined()
      fake.handler = () => ({ raw: '<html>' })
      expect(await client().api.getApiReference()).toBe('<html>')
    })

    it('returns an export as the text it came in: CSV and JSON Lines are not parsed as JSON', async () => {
      const csv = "id,at,summary\n1,2026-01-01T00:00:00.000Z,'=cmd\n"
      const jsonl = '{"id":"1"}\n{"id":"2"}\n'
      fake.handler = (req) => ({ raw: req.url.includes('format=csv') ? csv : jsonl })
      const api = client({ accessToken: 't' }).api
      const params = { id: ORG }
      expect(await api.exportAuditLog({ params, query: { format: 'csv' } })).toBe(csv)
      expect(await api.exportAuditLog({ params, query: { format: 'jsonl', action: 'prompt.created' } })).toBe(
        jsonl,
      )
      expect(fake.seen[1]?.url).toBe(
        `/api/v1/organizations/${ORG}/audit-log/export?format=jsonl&action=prompt.created`,
      )
    })

    it('refuses a call with a missing path parameter before sending it', async () => {
      await expect(client().api.getPrompt({ params: { id: '' } })).rejects.toThrow(/path parameter "id"/)
      expect(fake.seen).toHaveLength(0)
    })
  })

  describe('errors', () => {
    it("carry the service's status, code, message, details and request id", async () => {
      fake.handler = () => ({
        status: 400,
        body: error('MISSING_REQUIRED_VARIABLES', 'missing required variables: name', ['name']),
      })
      const err = await client()
        .api.invokePrompt({ params: { id: ID }, body: {} })
        .catch((e: unknown) => e)
      expect(err).toBeInstanceOf(PromptServiceError)
      expect(err).toMatchObject({
        status: 400,
        code: 'MISSING_REQUIRED_VARIABLES',
        message: 'missing required variables: name',
        details: ['name'],
        requestId: 'req-from-body',
        operationId: 'invokePrompt',
      })
    })

    it('name a code for answers without an error body, and for an unreachable service', async () => {
      fake.handler = () => ({ status: 502, raw: 'Bad Gateway' })
      const bad = await client({ retries: 0 })
        .api.listOrganizations()
        .catch((e: unknown) => e)
      expect(bad).toMatchObject({ status: 502, code: 'SERVICE_UNAVAILABLE', requestId: 'req-1' })

      await fake.stop()
      const down = await client({ retries: 0 })
        .api.listOrganizations()
        .catch((e: unknown) => e)
      expect(down).toMatchObject({ status: 0, code: 'NETWORK_ERROR' })
      // The message names where it went, so a wrong URL is seen at once.
      expect((down as Error).message).toContain(`GET ${base}/api/v1/organizations`)
      expect((down as Error).message).toContain('ECONNREFUSED')
      base = await fake.start()
    })

    it('read a stalled body as TIMEOUT and a cut one as NETWORK_ERROR: retried, then the fallback', async () => {
      const head = { 'content-type': 'application/json', 'content-length': '100' }
      let cut = false
      fake.handler = () => ({
        hijack: (res) => {
          res.writeHead(200, head)
          res.write('{"data":{"renderedContent":')
          if (cut) res.destroy()
        },
      })
      const c = client({ timeoutMs: 200, retries: 1, fallbackTemplates: { [ID]: 'Fallback {{x}}' } })
      await expect(c.api.invokePrompt({ params: { id: ID } })).rejects.toMatchObject({
        status: 0,
        code: 'TIMEOUT',
      })
      expect(retries.map((r) => r.error.code)).toEqual(['TIMEOUT'])
      expect(await c.invoke(ID, { x: 1 })).toMatchObject({
        renderedContent: 'Fallback 1',
        source: 'fallback',
      })

      cut = true
      retries = []
      const err = await c.api.getPrompt({ params: { id: ID } }).catch((e: unknown) => e)
      expect(err).toBeInstanceOf(PromptServiceError)
      expect(err).toMatchObject({ status: 0, code: 'NETWORK_ERROR' })
      expect(retries.map((r) => r.error.code)).toEqual(['NETWORK_ERROR'])
      expect(await c.invoke(ID, { x: 2 })).toMatchObject({
        renderedContent: 'Fallback 2',
        source: 'fallback',
      })
    })

    it('take a 200 whose body is not JSON (a proxy page) for a bad gateway, not a SyntaxError', async () => {
      fake.handler = () => ({ raw: '<html>sign in to the wifi</html>' })
      const c = client({ retries: 1, fallbackTemplates: { [ID]: 'Fallback' } })
      const err = await c.api.listOrganizations().catch((e: unknown) => e)
      expect(err).toBeInstanceOf(PromptServiceError)
      expect(err).toMatchObject({ status: 502, code: 'SERVICE_UNAVAILABLE', requestId: 'req-1' })
      expect(fake.seen).toHaveLength(2)
      expect(await c.invoke(ID)).toMatchObject({ renderedContent: 'Fallback', source: 'fallback' })
    })
  })

  describe('an expired user token', () => {
    it('asks refreshAccessToken once on 401, sends the request again with the new token, keeps it', async () => {
      fake.handler = (req) =>
        req.headers.authorization === 'Bearer fresh'
          ? { body: { data: { organizations: [] } } }
          : { status: 401, body: error('INVALID_CREDENTIALS', 'token expired') }
      let asked = 0
      const c = client({
        apiKey: undefined,
        accessToken: 'old',
        refreshAccessToken: async () => {
          asked++
          return 'fresh'
        },
      })
      await expect(c.api.listOrganizations()).resolves.toEqual({ organizations: [] })
      await expect(c.api.listOrganizations()).resolves.toEqual({ organizations: [] })
      expect(asked).toBe(1)
      expect(fake.seen.map((s) => s.headers.authorization)).toEqual([
        'Bearer old',
        'Bearer fresh',
        'Bearer fresh',
      ])
    })

    it('lets the 401 stand when no new token comes, and never asks for an API key', async () => {
      fake.handler = () => ({ status: 401, body: error('INVALID_CREDENTIALS', 'no') })
      let asked = 0
      const refreshAccessToken = async () => {
        asked++
        return undefined
      }
      await expect(
        client({ apiKey: undefined, accessToken: 'old', refreshAccessToken }).api.listOrganizations(),
      ).rejects.toMatchObject({ code: 'INVALID_CREDENTIALS' })
      expect(asked).toBe(1)
      await expect(client({ refreshAccessToken }).api.listOrganizations()).rejects.toMatchObject({
        code: 'INVALID_CREDENTIALS',
      })
      expect(asked).toBe(1)
      expect(fake.seen).toHaveLength(2)
    })
  })

  describe('retries', () => {
    it('retry 5xx with exponential backoff and jitter, then succeed', async () => {
      let n = 0
      fake.handler = () =>
        ++n < 4
          ? { status: 503, body: error('SERVICE_UNAVAILABLE') }
          : { body: { data: { organizations: [] } } }
      const orgs = await client({
        retries: { retries: 3, baseDelayMs: 100, maxDelayMs: 1_000 },
      }).api.listOrganizations()
      expect(orgs.organizations).toEqual([])
      expect(fake.seen).toHaveLength(4)
      // Steps 100, 200, 400; equal jitter with random() = 0.5 lands at 3/4 of each.
      expect(sleeps).toEqual([75, 150, 300])
      expect(retries.map((r) => [r.attempt, r.error.code])).toEqual([
        [1, 'SERVICE_UNAVAILABLE'],
        [2, 'SERVICE_UNAVAILABLE'],
        [3, 'SERVICE_UNAVAILABLE'],
      ])
    })

    it('keep each step between half and all of its ceiling, whatever the jitter', async () => {
      for (const random of [0, 0.999]) {
        sleeps = []
        fake.handler = () => ({ status: 500, body: error('INTERNAL_ERROR') })
        const c = client({
          retries: { retries: 5, baseDelayMs: 100, maxDelayMs: 800 },
          clock: { now: () => now, sleep: async (ms) => void sleeps.push(ms), random: () => random },
        })
        await expect(c.api.listOrganizations()).rejects.toMatchObject({ code: 'INTERNAL_ERROR' })
        const ceilings = [100, 200, 400, 800, 800]
        sleeps.forEach((ms, i) => {
          expect(ms).toBeGreaterThanOrEqual((ceilings[i] ?? 0) / 2)
          expect(ms).toBeLessThanOrEqual(ceilings[i] ?? 0)
        })
      }
    })

    it('honour Retry-After in seconds and as an HTTP date on 429', async () => {
      let n = 0
      fake.handler = () =>
        ++n === 1
          ? { status: 429, headers: { 'retry-after': '2' }, body: error('RATE_LIMITED') }
          : { body: rendered('ok') }
      await client().api.invokePrompt({ params: { id: ID } })
      expect(sleeps).toEqual([2_000])

      n = 0
      sleeps = []
      now = Math.floor(now / 1000) * 1000
      const at = new Date(now + 3_000).toUTCString()
      fake.handler = () =>
        ++n === 1
          ? { status: 429, headers: { 'retry-after': at }, body: error('RATE_LIMITED') }
          : { body: rendered('ok') }
      await client().api.invokePrompt({ params: { id: ID } })
      expect(sleeps).toEqual([3_000])
    })

    it('ignore a Retry-After that is neither delta-seconds nor an HTTP-date: the backoff applies', async () => {
      for (const value of ['1.5', '-1', '1e3', 'soon']) {
        let n = 0
        sleeps = []
        fake.handler = () =>
          ++n === 1
            ? { status: 503, headers: { 'retry-after': value }, body: error('SERVICE_UNAVAILABLE') }
            : { body: rendered('ok') }
        await client().api.invokePrompt({ params: { id: ID } })
        // The first step of 250 ms with random() = 0.5: 3/4 of it.
        expect(sleeps, value).toEqual([188])
      }
    })

    it('do not retry early when Retry-After is beyond the cap: the error says how long to wait', async () => {
      fake.handler = () => ({ status: 429, headers: { 'retry-after': '120' }, body: error('RATE_LIMITED') })
      const err = await client({ retries: { maxRetryAfterMs: 30_000 } })
        .api.listPrompts()
        .catch((e: unknown) => e)
      expect(err).toMatchObject({ status: 429, code: 'RATE_LIMITED', retryAfterMs: 120_000 })
      expect(fake.seen).toHaveLength(1)
      expect(sleeps).toEqual([])
    })

    it('never retry a refusal (4xx), nor a 5xx of a POST that may have acted', async () => {
      fake.handler = () => ({ status: 400, body: error('VALIDATION_ERROR') })
      await expect(client().api.listPrompts()).rejects.toMatchObject({ code: 'VALIDATION_ERROR' })
      expect(fake.seen).toHaveLength(1)

      fake.handler = () => ({ status: 500, body: error('INTERNAL_ERROR') })
      await expect(client().api.createPrompt({ body: { name: 'A', template: 'x' } })).rejects.toMatchObject({
        code: 'INTERNAL_ERROR',
      })
      expect(fake.hits('/api/v1/prompts')).toBe(2)

      // Rendering has no side effect: a 5xx on invoke is retried.
      await expect(client({ retries: 2 }).api.invokePrompt({ params: { id: ID } })).rejects.toMatchObject({
        code: 'INTERNAL_ERROR',
      })
      expect(fake.hits('/invoke')).toBe(3)
    })
  })

  describe('the cache', () => {
    it('serves a rendered prompt from memory within the TTL, keyed by prompt, version, env and variables', async () => {
      let n = 0
      fake.handler = () => ({ body: rendered(`render ${++n}`) })
      const c = client()
      const first = await c.invoke(ID, { a: 1, b: 2 })
      expect(first).toMatchObject({ renderedContent: 'render 1', source: 'network', version: 1 })
      expect(await c.invoke(ID, { b: 2, a: 1 })).toMatchObject({
        renderedContent: 'render 1',
        source: 'cache',
      })
      expect(await c.invoke(ID, { a: 1, b: 3 })).toMatchObject({
        renderedContent: 'render 2',
        source: 'network',
      })
      expect(await c.invoke(ID, { a: 1, b: 2 }, { env: 'preview' })).toMatchObject({
        renderedContent: 'render 3',
      })
      expect(await c.invoke(ID, { a: 1, b: 2 }, { version: 1 })).toMatchObject({
        renderedContent: 'render 4',
      })
      expect(await c.invoke(ID, { a: 1, b: 2 }, { cache: false })).toMatchObject({
        renderedContent: 'render 5',
      })
      expect(fake.hits('/invoke')).toBe(5)
      expect(fake.seen[2]?.url).toContain('env=preview')
      expect(fake.seen[3]?.body).toEqual({ variables: { a: 1, b: 2 }, version: 1 })
    })

    it('after the TTL, serves the stale value at once and refreshes it in the background', async () => {
      let n = 0
      fake.handler = () => ({ body: rendered(`render ${++n}`) })
      const c = client()
      await c.invoke(ID, {})
      now += 1_500
      expect(await c.invoke(ID, {})).toMatchObject({ renderedContent: 'render 1', source: 'stale' })
      await c.settled()
      expect(await c.invoke(ID, {})).toMatchObject({ renderedContent: 'render 2', source: 'cache' })
      expect(fake.hits('/invoke')).toBe(2)
    })

    it('keeps serving the stale value while the service is down, and refreshes when it returns', async () => {
      fake.handler = () => ({ body: rendered('before') })
      const c = client()
      await c.invoke(ID, { x: 1 })
      const port = fake.port
      await fake.stop()
      now += 5_000
      expect(await c.invoke(ID, { x: 1 })).toMatchObject({ renderedContent: 'before', source: 'stale' })
      await c.settled()
      expect(backgroundErrors.at(-1)).toMatchObject({ code: 'NETWORK_ERROR' })
      expect(await c.invoke(ID, { x: 1 })).toMatchObject({ renderedContent: 'before', source: 'stale' })
      await c.settled()

      base = await fake.start(port)
      fake.handler = () => ({ body: rendered('after', 2) })
      expect(await c.invoke(ID, { x: 1 })).toMatchObject({ renderedContent: 'before', source: 'stale' })
      await c.settled()
      expect(await c.invoke(ID, { x: 1 })).toMatchObject({
        renderedContent: 'after',
        version: 2,
        source: 'cache',
      })
    })

    it('also stands in with the stale value on 5xx when stale-while-revalidate is off', async () => {
      let state: 'up' | 'failing' = 'up'
      let n = 0
      fake.handler = () =>
        state === 'up'
          ? { body: rendered(`render ${++n}`) }
          : { status: 503, body: error('SERVICE_UNAVAILABLE') }
      const c = client({ staleWhileRevalidate: false, retries: 1 })
      await c.invoke(ID)
      now += 2_000
      expect(await c.invoke(ID)).toMatchObject({ renderedContent: 'render 2', source: 'network' })
      now += 2_000
      state = 'failing'
      expect(await c.invoke(ID)).toMatchObject({ renderedContent: 'render 2', source: 'stale' })
    })

    it('drops an entry when the service says the prompt is gone', async () => {
      fake.handler = () => ({ body: rendered('x') })
      const c = client()
      await c.invoke(ID)
      fake.handler = () => ({ status: 404, body: error('NOT_FOUND') })
      now += 2_000
      expect((await c.invoke(ID)).source).toBe('stale')
      await c.settled()
      await expect(c.invoke(ID)).rejects.toMatchObject({ code: 'NOT_FOUND', status: 404 })
    })

    it('forgets entries past maxStaleMs', async () => {
      fake.handler = () => ({ body: rendered('x') })
      const c = client({ maxStaleMs: 10_000 })
      await c.invoke(ID)
      await fake.stop()
      now += 20_000
      await expect(c.invoke(ID)).rejects.toMatchObject({ code: 'NETWORK_ERROR' })
      base = await fake.start()
    })

    it('keys variables by the JSON sent: two dates are two entries', async () => {
      let n = 0
      fake.handler = () => ({ body: rendered(`render ${++n}`) })
      const c = client()
      const first = await c.invoke(ID, { when: new Date('2020-01-01T00:00:00Z') })
      const second = await c.invoke(ID, { when: new Date('2031-06-06T00:00:00Z') })
      expect([first.source, second.source]).toEqual(['network', 'network'])
      expect(second.renderedContent).toBe('render 2')
      expect(fake.seen[1]?.body).toEqual({ variables: { when: '2031-06-06T00:00:00.000Z' } })
      expect(await c.invoke(ID, { when: '2020-01-01T00:00:00.000Z' })).toMatchObject({
        renderedContent: 'render 1',
        source: 'cache',
      })
    })

    it('does not end a background refresh when the first caller aborts its own signal', async () => {
      let n = 0
      fake.handler = () => ({ body: rendered(`render ${++n}`) })
      const c = client()
      await c.invoke(ID)
      now += 1_500
      const scope = new AbortController()
      expect(await c.invoke(ID, {}, { signal: scope.signal })).toMatchObject({ source: 'stale' })
      // Done with the request: the caller's scope ends while the refresh is in flight.
      scope.abort()
      await c.settled()
      expect(backgroundErrors).toEqual([])
      expect(await c.invoke(ID)).toMatchObject({ renderedContent: 'render 2', source: 'cache' })
    })

    it('does not store what a refresh or a load in flight answers when this client writes meanwhile', async () => {
      let content = 'v1'
      let gate: Promise<void> | undefined
      let open = () => {}
      fake.handler = (req) => {
        if (req.url.endsWith('/publish')) {
          content = 'v2'
          return { status: 201, body: { data: { version: 2 } } }
        }
        // The service reads the version when the request arrives, and answers later.
        return { body: rendered(content), ...(gate ? { wait: gate } : {}) }
      }
      const hold = () => {
        gate = new Promise<void>((resolve) => {
          open = resolve
        })
      }
      const c = client()
      await c.invoke(ID)
      now += 1_500
      hold()
      expect(await c.invoke(ID)).toMatchObject({ renderedContent: 'v1', source: 'stale' })
      await vi.waitFor(() => expect(fake.hits('/invoke')).toBe(2))
      gate = undefined
      await c.api.publishPrompt({ params: { id: ID }, body: {} })
      open()
      await c.settled()
      expect(await c.invoke(ID)).toMatchObject({ renderedContent: 'v2', source: 'network' })

      // A miss: the load that began before the write answers its caller, and is not kept.
      content = 'v1'
      c.invalidate()
      hold()
      const loading = c.getPrompt(ID)
      const before = c.invoke(ID, { a: 1 })
      await vi.waitFor(() => expect(fake.hits('/invoke')).toBe(4))
      gate = undefined
      await c.api.publishPrompt({ params: { id: ID }, body: {} })
      open()
      expect(await before).toMatchObject({ renderedContent: 'v1', source: 'network' })
      await loading
      expect(await c.invoke(ID, { a: 1 })).toMatchObject({ renderedContent: 'v2', source: 'network' })
      expect((await c.getPrompt(ID)).source).toBe('network')
    })

    it('caches fetched prompts too, and drops what it holds of a prompt this client changes', async () => {
      let n = 0
      fake.handler = (req) =>
        req.method === 'GET'
          ? { body: { data: { _id: ID, name: `v${++n}` } } }
          : { body: { data: { _id: ID, name: 'patched' } } }
      const c = client()
      expect(await c.getPrompt(ID)).toMatchObject({ name: 'v1', source: 'network' })
      expect(await c.getPrompt(ID)).toMatchObject({ name: 'v1', source: 'cache' })
      await c.api.updatePrompt({ params: { id: ID }, body: { description: 'new' } })
      expect(await c.getPrompt(ID)).toMatchObject({ name: 'v2', source: 'network' })
    })
  })

  describe('chat prompts and slugs', () => {
    it('invokes by slug, caches it, returns renderedMessages and config, and drops it on a write to the prompt', async () => {
      let n = 0
      fake.handler = (req) =>
        req.method === 'POST' && req.url.startsWith('/api/v1/prompts/slug/')
          ? {
              body: {
                data: {
                  ...rendered(`chat ${++n}`).data,
                  renderedMessages: [{ role: 'user', content: `chat ${n}` }],
                  config: { model: 'm' },
                },
              },
            }
          : { body: { data: { versionId: VERSION_ID, version: 1, promotedAt: new Date(now).toISOString() } } }
      const c = client()
      const first = await c.invokeBySlug('support-bot', { q: 1 }, { env: 'production' })
      expect(first).toMatchObject({
        promptId: ID,
        renderedMessages: [{ role: 'user', content: 'chat 1' }],
        config: { model: 'm' },
        source: 'network',
      })
      expect(fake.seen[0]?.url).toBe('/api/v1/prompts/slug/support-bot/invoke?env=production')
      expect(await c.invokeBySlug('support-bot', { q: 1 }, { env: 'production' })).toMatchObject({
        source: 'cache',
      })
      // A promote through this client drops what it holds of the prompt, by slug too.
      await c.api.promoteVersion({ params: { id: ID, env: 'production' }, body: { versionId: VERSION_ID } })
      expect(await c.invokeBySlug('support-bot', { q: 1 }, { env: 'production' })).toMatchObject({
        renderedContent: 'chat 2',
        source: 'network',
      })
    })

    it('remembers the slugs of at most cacheMaxEntries prompts', async () => {
      fake.handler = (req) => {
        const slug = /slug\/([^/]+)\//.exec(req.url)?.[1] ?? ''
        return { body: { data: { ...rendered(slug).data, promptId: `${slug}-id` } } }
      }
      const c = client({ cacheMaxEntries: 2 })
      for (const slug of ['a', 'b', 'c', 'a', 'd']) await c.invokeBySlug(slug)
      const slugs = Reflect.get(c, 'slugs') as Map<string, Set<string>>
      expect([...slugs.keys()]).toEqual(['a-id', 'd-id'])
    })
  })

  describe('local rendering', () => {
    const resolved = (extra: Record<string, unknown> = {}) => ({
      data: {
        promptId: ID,
        organizationId: ORG,
        versionId: VERSION_ID,
        version: 1,
        template: 'First {{x}}',
        variables: [{ name: 'x', required: false }],
        ...extra,
      },
    })

    it('asks invoke, with the subject, for an environment under a split', async () => {
      const split = {
        id: '0123456789abcdef0123456c',
        variants: [
          { versionId: VERSION_ID, version: 1, weight: 50 },
          { versionId: '0123456789abcdef0123456d', version: 2, weight: 50 },
        ],
      }
      fake.handler = (req) =>
        req.method === 'GET' ? { body: resolved({ split }) } : { body: rendered('Second 1', 2) }
      const c = client()
      expect((await c.getRenderable(ID, { env: 'production' })).split).toEqual(split)
      const out = await c.renderLocally(ID, { x: 1 }, { env: 'production', subject: 'user-7' })
      expect(out).toMatchObject({ renderedContent: 'Second 1', version: 2, source: 'network' })
      expect(fake.seen.at(-1)).toMatchObject({
        method: 'POST',
        url: `/api/v1/prompts/${ID}/invoke?env=production`,
        body: { variables: { x: 1 }, subject: 'user-7' },
      })

      // Without a split it renders here.
      fake.handler = () => ({ body: resolved() })
      const plain = await c.renderLocally(ID, { x: 1 })
      expect(plain).toMatchObject({ renderedContent: 'First 1', source: 'network' })
      expect(fake.seen.at(-1)?.method).toBe('GET')
    })
  })

  describe('fallback templates', () => {
    it('render locally when the service is unreachable and nothing is cached', async () => {
      await fake.stop()
      const c = client({ fallbackTemplates: { [ID]: 'Hello {{ name }}{{missing}}!' } })
      expect(await c.invoke(ID, { name: 'Ada' })).toEqual({
        renderedContent: 'Hello Ada!',
        variables: { name: 'Ada' },
        promptId: ID,
        versionId: null,
        version: null,
        source: 'fallback',
      })
      await expect(c.invoke('0123456789abcdef0123456f', {})).rejects.toMatchObject({ code: 'NETWORK_ERROR' })
      base = await fake.start()
    })

    it('stand in for 5xx and 429, never for a refusal, and enforce declared required variables', async () => {
      const c = client({
        retries: 0,
        fallbackTemplates: {
          [ID]: { template: 'Hi {{name}}', variables: [{ name: 'name', required: true }] },
        },
      })
      fake.handler = () => ({ status: 503, body: error('SERVICE_UNAVAILABLE') })
      expect(await c.invoke(ID, { name: 'Bo' })).toMatchObject({
        renderedContent: 'Hi Bo',
        source: 'fallback',
      })
      await expect(c.invoke(ID, {})).rejects.toMatchObject({ code: 'MISSING_REQUIRED_VARIABLES' })
      fake.handler = () => ({ status: 429, body: error('RATE_LIMITED') })
      expect((await c.invoke(ID, { name: 'Bo' })).source).toBe('fallback')
      fake.handler = () => ({ status: 403, body: error('INSUFFICIENT_SCOPE') })
      await expect(c.invoke(ID, { name: 'Bo' })).rejects.toMatchObject({ code: 'INSUFFICIENT_SCOPE' })
    })
  })
})

describe('cache keys and Retry-After', () => {
  it('key on the JSON a request sends', () => {
    class Money {
      readonly cents: number
      constructor(cents: number) {
        this.cents = cents
      }
      toJSON() {
        return `$${this.cents / 100}`
      }
    }
    expect(stableKey({ w: new Date(1) })).not.toBe(stableKey({ w: new Date(2) }))
    expect(stableKey({ w: new Date(1) })).toBe(stableKey({ w: new Date(1).toISOString() }))
    expect(stableKey({ m: new Money(1) })).not.toBe(stableKey({ m: new Money(2) }))
    expect(stableKey({ n: Object(1) })).not.toBe(stableKey({ n: Object(2) }))
    expect(stableKey({ b: 1, a: [1, { d: 1, c: undefined }] })).toBe('{"a":[1,{"d":1}],"b":1}')
    expect(stableKey(undefined)).toBe('undefined')
  })

  it('read Retry-After as a non-negative integer of seconds or an HTTP-date, nothing else', () => {
    const now = Date.UTC(2026, 0, 1)
    expect(parseRetryAfter('2', now)).toBe(2_000)
    expect(parseRetryAfter('0', now)).toBe(0)
    for (const bad of ['1.5', '-1', '2.0', '1e3', '', 'soon', 'Thu, 1 Jan 2026 00:00:05 GMT'])
      expect(parseRetryAfter(bad, now), bad).toBeUndefined()
    expect(parseRetryAfter('Thu, 01 Jan 2026 00:00:05 GMT', now)).toBe(5_000)
    // The two obsolete forms a recipient must accept too (RFC 9110 section 5.6.7).
    expect(parseRetryAfter('Thursday, 01-Jan-26 00:00:07 GMT', now)).toBe(7_000)
    expect(parseRetryAfter('Thu Jan  1 00:00:09 2026', now)).toBe(9_000)
    expect(parseRetryAfter('Wed, 31 Dec 2025 00:00:00 GMT', now)).toBe(0)
  })
})
