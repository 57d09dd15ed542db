import { execFileSync } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { request as httpsRequest } from 'node:https'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Scope } from '@pm/contracts'
import type { RunningProcess } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { type ErrorReply, RedisServer, randomIp, startGateway } from '../src/access.ts'
import { call } from '../src/client.ts'
import { ADMIN } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

interface Data<T> {
  data: T
}

/** Two gateway replicas on one identity, real NATS, and a private Redis the test stops and starts. */
describe('gateway replicas: revocation over NATS, shared limits in Redis, insurance while Redis is down', () => {
  let redis: RedisServer
  let stack: Stack
  let g1: string
  let g2: string
  let replica: RunningProcess | undefined
  let token: string
  let org: string
  const ip = randomIp()

  const mintKey = async (scopes: Scope[], rateLimit?: { points: number; durationSeconds: number }) => {
    const res = await call<Data<{ key: string; apiKey: { _id: string } }>>(
      g1,
      'POST',
      `/api/v1/organizations/${org}/api-keys`,
      { token, body: { name: 'replica-test', scopes, ...(rateLimit ? { rateLimit } : {}) } },
    )
    expect(res.status).toBe(201)
    return res.body.data
  }

  beforeAll(async () => {
    redis = await RedisServer.start()
    stack = await startStack({ REDIS_URL: redis.url, TRUSTED_PROXIES: '127.0.0.1' })
    g1 = stack.gateway
    const second = await startGateway(stack)
    replica = second.process
    g2 = second.url
    const login = await call<Data<{ accessToken: string; organizationId: string }>>(
      g1,
      'POST',
      '/api/v1/auth/login',
      {
        body: { email: ADMIN.email, password: ADMIN.password },
        headers: { 'x-forwarded-for': ip },
      },
    )
    expect(login.status).toBe(200)
    token = login.body.data.accessToken
    org = login.body.data.organizationId
  }, 120_000)

  afterAll(async () => {
    await replica?.stop()
    await stack?.stop()
    await redis?.stop()
  })

  it('refuses a key revoked through one replica on the other within 1 s', async () => {
    const { key, apiKey } = await mintKey(['prompts:read'])
    // Both replicas have resolved (and cached, for 30 s) the key.
    expect((await call(g1, 'GET', '/api/v1/prompts', { token: key })).status).toBe(200)
    expect((await call(g2, 'GET', '/api/v1/prompts', { token: key })).status).toBe(200)
    expect((await call(g2, 'GET', '/api/v1/prompts', { token: key })).status).toBe(200)

    const revoked = await call(g1, 'DELETE', `/api/v1/organizations/${org}/api-keys/${apiKey._id}`, { token })
    expect(revoked.status).toBe(200)
    await vi.waitFor(
      async () => {
        const res = await call<ErrorReply>(g2, 'GET', '/api/v1/prompts', { token: key })
        expect([res.status, res.body.error?.code]).toEqual([401, 'INVALID_CREDENTIALS'])
      },
      { timeout: 1_000, interval: 10 },
    )
    expect((await call(g1, 'GET', '/api/v1/prompts', { token: key })).status).toBe(401)
  })

  it('shares limits across replicas, keeps serving under the insurance limit without Redis, shares again after', async () => {
    // Redis up: one budget for both replicas.
    const shared = await mintKey(['prompts:read'], { points: 6, durationSeconds: 60 })
    for (const base of [g1, g2, g1, g2, g1, g2]) {
      expect((await call(base, 'GET', '/api/v1/prompts', { token: shared.key })).status).toBe(200)
    }
    expect((await call(g1, 'GET', '/api/v1/prompts', { token: shared.key })).status).toBe(429)
    expect((await call(g2, 'GET', '/api/v1/prompts', { token: shared.key })).status).toBe(429)

    const insured = await mintKey(['prompts:read'], { points: 4, durationSeconds: 60 })
    await redis.stop()
    try {
      // Redis down: each replica limits on its own (in memory), and nothing fails.
      for (const base of [g1, g2]) {
        for (let i = 1; i <= 4; i++) {
          const res = await call(base, 'GET', '/api/v1/prompts', { token: insured.key })
          expect(res.status, `${base} request ${i}`).toBe(200)
          expect(res.headers.get('ratelimit-policy')).toBe('"api-key";q=4;w=60')
        }
        const over = await call<ErrorReply>(base, 'GET', '/api/v1/prompts', { token: insured.key })
        expect([over.status, over.body.error.code]).toEqual([429, 'RATE_LIMITED'])
      }
      // Logins (per-IP and per-email limits) and JWT requests keep working too.
      const login = await call(g2, 'POST', '/api/v1/auth/login', {
        body: { email: ADMIN.email, password: ADMIN.password },
        headers: { 'x-forwarded-for': ip },
      })
      expect(login.status).toBe(200)
      const statuses = await Promise.all(
        Array.from({ length: 20 }, (_, i) =>
          call(i % 2 ? g1 : g2, 'GET', '/api/v1/organizations', { token }),
        ),
      )
      expect(statuses.map((r) => r.status).filter((s) => s >= 500)).toEqual([])
    } finally {
      await redis.start()
    }

    // Redis back: both replicas reconnect, and a budget is one budget again.
    await vi.waitFor(
      async () => {
        const clients = await redis.cli('CLIENT', 'LIST')
        expect(clients.match(/name=pm-gateway/g)?.length ?? 0).toBeGreaterThanOrEqual(2)
      },
      { timeout: 15_000, interval: 100 },
    )
    await vi.waitFor(
      async () => {
        const again = await mintKey(['prompts:read'], { points: 4, durationSeconds: 60 })
        for (const base of [g1, g2, g1, g2]) {
          expect((await call(base, 'GET', '/api/v1/prompts', { token: again.key })).status).toBe(200)
        }
        expect((await call(g2, 'GET', '/api/v1/prompts', { token: again.key })).status).toBe(429)
        expect((await call(g1, 'GET', '/api/v1/prompts', { token: again.key })).status).toBe(429)
      },
      { timeout: 10_000, interval: 200 },
    )
  })

  describe('HTTPS', () => {
    let certDir: string
    let ca: Buffer
    const extra: RunningProcess[] = []
    let plain: string
    let proxied: string
    let tls: string

    /** A request over TLS that trusts only the test's self-signed certificate. */
    const overTls = (
      base: string,
      method: string,
      path: string,
      opts: { token?: string; body?: unknown } = {},
    ): Promise<{ status: number; headers: Record<string, string | string[] | undefined>; body: string }> =>
      new Promise((resolve, reject) => {
        const payload = opts.body === undefined ? undefined : JSON.stringify(opts.body)
        const req = httpsRequest(
          `${base}${path}`,
          {
            method,
            ca,
            headers: {
              ...(opts.token ? { authorization: `Bearer ${opts.token}` } : {}),
              ...(payload ? { 'content-type': 'application/json' } : {}),
            },
          },
          (res) => {
            let body = ''
            res.on('data', (d: Buffer) => {
              body += d.toString()
            })
            res.on('end', () => resolve({ status: res.statusCode ?? 0, headers: res.headers, body }))
          },
        )
        req.on('error', reject)
        req.end(payload)
      })

    beforeAll(async () => {
      certDir = mkdtempSync(join(tmpdir(), 'pm-tls-'))
      execFileSync(
        'openssl',
        [
          'req',
          '-x509',
          '-newkey',
          'ec',
          '-pkeyopt',
          'ec_paramgen_curve:prime256v1',
          '-nodes',
          '-keyout',
          join(certDir, 'key.pem'),
          '-out',
          join(certDir, 'cert.pem'),
          '-days',
          '1',
          '-subj',
          '/CN=localhost',
          '-addext',
          'subjectAltName=IP:127.0.0.1,DNS:localhost',
        ],
        { stdio: 'ignore' },
      )
      ca = readFileSync(join(certDir, 'cert.pem'))
      const [a, b, c] = await Promise.all([
        // Production, no proxy trusted: plain HTTP is refused whatever the headers say.
        startGateway(stack, { NODE_ENV: 'production', TRUSTED_PROXIES: '' }),
        // Production behind a trusted proxy that terminates TLS.
        startGateway(stack, { NODE_ENV: 'production', TRUSTED_PROXIES: '127.0.0.1' }),
        // Production terminating TLS itself.
        startGateway(
          stack,
          {
            NODE_ENV: 'production',
            TLS_CERT_FILE: join(certDir, 'cert.pem'),
            TLS_KEY_FILE: join(certDir, 'key.pem'),
          },
          { scheme: 'https' },
        ),
      ])
      extra.push(a.process, b.process, c.process)
      plain = a.url
      proxied = b.url
      tls = c.url
      await vi.waitFor(async () => expect((await overTls(tls, 'GET', '/health/ready')).status).toBe(200), {
        timeout: 30_000,
        interval: 100,
      })
    }, 60_000)

    afterAll(async () => {
      await Promise.all(extra.map((p) => p.stop()))
      if (certDir) rmSync(certDir, { recursive: true, force: true })
    })

    it('refuses plain HTTP outside development, even with a forged X-Forwarded-Proto', async () => {
      const variants: Record<string, string>[] = [{}, { 'x-forwarded-proto': 'https' }]
      for (const headers of variants) {
        for (const [method, path] of [
          ['GET', '/api/v1/organizations'],
          ['POST', '/api/v1/auth/login'],
          ['GET', '/api/v1/public/prompts'],
        ] as const) {
          const res = await call<ErrorReply>(plain, method, path, {
            headers,
            token: path.includes('organizations') ? token : undefined,
            body: method === 'POST' ? { email: ADMIN.email, password: ADMIN.password } : undefined,
          })
          expect([res.status, res.body.error.code], `${method} ${path}`).toEqual([403, 'HTTPS_REQUIRED'])
          expect(res.headers.get('strict-transport-security')).toBeNull()
        }
      }
      // Probes inside the cluster stay on plain HTTP.
      expect((await call(plain, 'GET', '/health/live')).status).toBe(200)
    })

    it("believes a trusted proxy's X-Forwarded-Proto, and sends HSTS over HTTPS", async () => {
      const viaProxy = await call(proxied, 'GET', '/api/v1/organizations', {
        token,
        headers: { 'x-forwarded-proto': 'https' },
      })
      expect(viaProxy.status).toBe(200)
      expect(viaProxy.headers.get('strict-transport-security')).toBe('max-age=31536000; includeSubDomains')
      const variants: Record<string, string>[] = [{}, { 'x-forwarded-proto': 'http' }]
      for (const headers of variants) {
        const res = await call<ErrorReply>(proxied, 'GET', '/api/v1/organizations', { token, headers })
        expect([res.status, res.body.error.code]).toEqual([403, 'HTTPS_REQUIRED'])
      }
    })

    it('terminates TLS with a configured certificate', async () => {
      const login = await overTls(tls, 'POST', '/api/v1/auth/login', {
        body: { email: ADMIN.email, password: ADMIN.password },
      })
      expect(login.status).toBe(200)
      expect(login.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains')
      const tlsToken = (JSON.parse(login.body) as Data<{ accessToken: string }>).data.accessToken
      const orgs = await overTls(tls, 'GET', '/api/v1/organizations', { token: tlsToken })
      expect(orgs.status).toBe(200)
      expect(orgs.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains')
      // Errors over HTTPS carry HSTS too.
      const denied = await overTls(tls, 'GET', '/api/v1/organizations')
      expect(denied.status).toBe(401)
      expect(denied.headers['strict-transport-security']).toBe('max-age=31536000; includeSubDomains')
    })
  })
})
