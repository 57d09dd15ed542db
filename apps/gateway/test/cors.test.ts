import { MemoryBus } from '@pm/bus'
import { ConfigError } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, loadGatewayConfig } from '../src/app.ts'
import { parseCorsOrigins } from '../src/cors.ts'
import { offlineConfig } from './offline.ts'

const LISTED = 'https://app.example.com'
const OTHER = 'https://evil.example.net'

async function gateway(env: Record<string, string>) {
  const bus = new MemoryBus()
  // Upstreams nobody listens on: CORS is decided before anything is proxied.
  const config = offlineConfig(env)
  const app = await buildApp({ config, bus })
  return {
    app,
    close: async () => {
      await app.close()
      await bus.close()
    },
  }
}

const preflight = (origin: string, method = 'POST') => ({
  method: 'OPTIONS' as const,
  url: '/api/v1/prompts/0123456789abcdef01234567/invoke',
  headers: {
    origin,
    'access-control-request-method': method,
    'access-control-request-headers': 'authorization,content-type',
  },
})

describe('CORS_ORIGINS', () => {
  it('parses a comma-separated list and refuses anything but scheme://host[:port]', () => {
    expect(parseCorsOrigins(' https://a.example.com/, http://localhost:5173 ')).toEqual([
      'https://a.example.com',
      'http://localhost:5173',
    ])
    expect(parseCorsOrigins(undefined)).toEqual([])
    for (const bad of ['*', 'a.example.com', 'https://a.example.com/path', 'javascript:alert(1)']) {
      expect(
        () => loadGatewayConfig({ INTERNAL_AUTH_SECRET: 'x'.repeat(32), CORS_ORIGINS: bad }),
        bad,
      ).toThrow(ConfigError)
    }
  })

  describe('with an allowlist', () => {
    let gw: Awaited<ReturnType<typeof gateway>>
    beforeAll(async () => {
      gw = await gateway({ CORS_ORIGINS: `${LISTED},http://localhost:5173` })
    })
    afterAll(() => gw.close())

    it('answers a listed origin’s preflight with 204 and credentials', async () => {
      const res = await gw.app.inject(preflight(LISTED))
      expect(res.statusCode).toBe(204)
      expect(res.headers['access-control-allow-origin']).toBe(LISTED)
      expect(res.headers['access-control-allow-credentials']).toBe('true')
      expect(String(res.headers['access-control-allow-methods'])).toContain('POST')
      expect(String(res.headers['access-control-allow-headers'])).toContain('authorization')
      // A cookie-mode refresh sends x-csrf-protection; a split's sticky pick x-subject-id.
      expect(String(res.headers['access-control-allow-headers'])).toContain('x-csrf-protection')
      expect(String(res.headers['access-control-allow-headers'])).toContain('x-subject-id')
      expect(String(res.headers.vary)).toContain('Origin')
    })

    it('gives an unlisted origin no CORS header at all, and its preflight a 404', async () => {
      const res = await gw.app.inject(preflight(OTHER))
      expect(res.statusCode).toBe(404)
      expect(res.headers['access-control-allow-origin']).toBeUndefined()
      expect(res.headers['access-control-allow-credentials']).toBeUndefined()
      const get = await gw.app.inject({
        method: 'GET',
        url: '/api/v1/openapi.json',
        headers: { origin: OTHER },
      })
      expect(get.statusCode).toBe(200)
      expect(get.headers['access-control-allow-origin']).toBeUndefined()
      expect(get.headers['access-control-allow-credentials']).toBeUndefined()
    })

    it('lets a listed origin read responses, errors included, with the request id exposed', async () => {
      const ok = await gw.app.inject({
        method: 'GET',
        url: '/api/v1/openapi.json',
        headers: { origin: LISTED },
      })
      expect(ok.statusCode).toBe(200)
      expect(ok.headers['access-control-allow-origin']).toBe(LISTED)
      expect(String(ok.headers['access-control-expose-headers'])).toContain('x-request-id')
      const denied = await gw.app.inject({
        method: 'GET',
        url: '/api/v1/prompts',
        headers: { origin: 'http://localhost:5173' },
      })
      expect(denied.statusCode).toBe(401)
      expect(denied.json().error.code).toBe('AUTH_REQUIRED')
      expect(denied.headers['access-control-allow-origin']).toBe('http://localhost:5173')
      expect(denied.headers['access-control-allow-credentials']).toBe('true')
    })

    it('still refuses a malformed preflight of a listed origin', async () => {
      const res = await gw.app.inject({
        method: 'OPTIONS',
        url: '/api/v1/prompts',
        headers: { origin: LISTED },
      })
      expect(res.statusCode).toBe(400)
    })
  })

  describe('by default', () => {
    let gw: Awaited<ReturnType<typeof gateway>>
    beforeAll(async () => {
      gw = await gateway({})
    })
    afterAll(() => gw.close())

    it('sends no CORS header to anyone and answers no preflight', async () => {
      const res = await gw.app.inject(preflight(LISTED))
      expect(res.statusCode).toBe(404)
      expect(res.headers['access-control-allow-origin']).toBeUndefined()
      const get = await gw.app.inject({
        method: 'GET',
        url: '/api/v1/openapi.json',
        headers: { origin: LISTED },
      })
      expect(get.headers['access-control-allow-origin']).toBeUndefined()
      expect(get.headers['access-control-allow-credentials']).toBeUndefined()
    })
  })
})
