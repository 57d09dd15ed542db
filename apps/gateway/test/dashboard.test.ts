import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync, writeFileSync } from 'node:fs'
import type { AddressInfo } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, loadGatewayConfig } from '../src/app.ts'
import { dashboardCsp } from '../src/dashboard.ts'

describe('the gateway serves the dashboard', () => {
  let app: Awaited<ReturnType<typeof buildApp>>
  let identity: FastifyInstance
  const bus = new MemoryBus()
  const dir = mkdtempSync(join(tmpdir(), 'pm-dashboard-'))
  const COOKIE = 'pm_refresh=rt_x; Max-Age=60; Path=/api/v1/auth; HttpOnly; Secure; SameSite=Strict'

  const start = async (env: Record<string, string>) =>
    buildApp({
      config: loadGatewayConfig({
        LOG_LEVEL: 'silent',
        INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
        DASHBOARD_DIR: dir,
        IDENTITY_URL: `http://127.0.0.1:${(identity.server.address() as AddressInfo).port}`,
        ...env,
      }),
      bus,
    })

  beforeAll(async () => {
    mkdirSync(join(dir, 'assets'))
    writeFileSync(
      join(dir, 'index.html'),
      '<!doctype html><meta name="csp-nonce" content="__CSP_NONCE__"><div id="root"></div>',
    )
    writeFileSync(join(dir, 'assets', 'index-AbC123.js'), 'console.log(1)')
    identity = Fastify()
    identity.post('/api/v1/auth/login', async (_request, reply) => {
      reply.header('set-cookie', COOKIE)
      return { accessToken: 't' }
    })
    await identity.listen({ host: '127.0.0.1', port: 0 })
    app = await start({ NODE_ENV: 'development' })
  })

  afterAll(async () => {
    await app?.close()
    await identity?.close()
    await bus.close()
    rmSync(dir, { recursive: true, force: true })
  })

  it('answers / with the page, a strict CSP and no caching', async () => {
    const res = await app.inject({ method: 'GET', url: '/' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toContain('text/html')
    expect(res.body).toContain('id="root"')
    // A fresh style nonce per answer, in the policy and in the page (for CodeMirror's styles).
    const nonce = /content="([A-Za-z0-9+/=]{24})"/.exec(res.body)?.[1] ?? ''
    expect(nonce).not.toBe('')
    expect(res.headers['content-security-policy']).toBe(dashboardCsp(nonce))
    const csp = String(res.headers['content-security-policy'])
    expect(csp).toContain("default-src 'none'")
    expect(csp).toContain("script-src 'self';")
    expect(csp).toContain("frame-ancestors 'none'")
    expect(csp).not.toContain('unsafe-')
    const again = await app.inject({ method: 'GET', url: '/' })
    expect(again.body).not.toContain(nonce)
    expect(res.headers['cache-control']).toBe('no-store')
    expect(res.headers['x-content-type-options']).toBe('nosniff')
  })

  it('caches hashed assets immutably', async () => {
    const res = await app.inject({ method: 'GET', url: '/assets/index-AbC123.js' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toContain('javascript')
    expect(res.headers['cache-control']).toBe('public, max-age=31536000, immutable')
    expect(res.headers['content-security-policy']).toContain("default-src 'none'")
    // The page is answered only with its nonce filled in.
    expect((await app.inject({ method: 'GET', url: '/index.html' })).body).not.toContain('__CSP_NONCE__')
  })

  it('falls back to the page for app paths, never for /api, /health, /metrics or a missing asset', async () => {
    for (const url of ['/prompts', '/prompts/0123456789abcdef01234567/history?x=1', '/sign-in']) {
      const res = await app.inject({ method: 'GET', url })
      expect(res.statusCode, url).toBe(200)
      expect(res.body, url).toContain('id="root"')
      expect(res.headers['content-security-policy'], url).toMatch(/^default-src 'none'; script-src 'self';/)
    }
    for (const url of ['/api', '/api/v2/prompts', '/health/nope', '/metrics', '/assets/missing-123.js']) {
      const res = await app.inject({ method: 'GET', url })
      expect(res.statusCode, url).toBe(404)
      expect(res.json().error.code, url).toBe('NOT_FOUND')
    }
    const live = await app.inject({ method: 'GET', url: '/health/live' })
    expect(live.json()).toEqual({ status: 'ok' })
  })

  it('drops Secure from the refresh cookie only in development on plain HTTP', async () => {
    const login = {
      method: 'POST' as const,
      url: '/api/v1/auth/login',
      payload: { email: 'a@b.c', password: 'x' },
    }
    const dev = await app.inject(login)
    expect(dev.statusCode).toBe(200)
    expect([dev.headers['set-cookie']].flat()).toEqual([
      'pm_refresh=rt_x; Max-Age=60; Path=/api/v1/auth; HttpOnly; SameSite=Strict',
    ])
    const prod = await start({ NODE_ENV: 'production', REQUIRE_HTTPS: 'false' })
    try {
      const res = await prod.inject(login)
      expect([res.headers['set-cookie']].flat()).toEqual([COOKIE])
    } finally {
      await prod.close()
    }
  })
})
