import { randomBytes } from 'node:crypto'
import { MemoryBus } from '@pm/bus'
import { listRoutes } from '@pm/contracts'
import { createService } from '@pm/kit'
import { buildOpenApiDocument, type HttpVerb, toOpenApiPath } from '@pm/openapi'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { buildApp, loadGatewayConfig } from '../src/app.ts'
import { docsRoutes, scalarDir } from '../src/docs.ts'
import { buildPolicyLookup, ROUTES } from '../src/policy.ts'

const doc = buildOpenApiDocument()
const key = (method: string, path: string) => `${method.toUpperCase()} ${toOpenApiPath(path)}`

/** A concrete path for a template: each parameter gets a plausible value. */
function samplePath(path: string): string {
  return path.replace(/:([A-Za-z]+)/g, (_m, name: string) =>
    name === 'env' ? 'production' : name === 'name' ? 'topic' : '0123456789abcdef01234567',
  )
}

describe('the OpenAPI document and the gateway route table', () => {
  it('documents every route of the gateway table, with its credential and scope', () => {
    for (const policy of ROUTES) {
      const op = doc.paths[toOpenApiPath(policy.url)]?.[policy.method.toLowerCase() as HttpVerb]
      expect(op, key(policy.method, policy.url)).toBeDefined()
      expect(op?.['x-auth'], key(policy.method, policy.url)).toBe(policy.auth)
      expect(op?.['x-scope'], key(policy.method, policy.url)).toBe(policy.scope)
    }
  })

  it('documents nothing the gateway does not serve', () => {
    const table = new Set(ROUTES.map((p) => key(p.method, p.url)))
    const own = new Set(
      listRoutes()
        .filter((r) => r.gateway)
        .map((r) => key(r.method, r.path)),
    )
    const documented = Object.entries(doc.paths).flatMap(([path, item]) =>
      Object.keys(item).map((verb) => `${verb.toUpperCase()} ${path}`),
    )
    const extra = documented.filter((k) => !table.has(k) && !own.has(k))
    expect(extra).toEqual([])
    expect(documented).toHaveLength(table.size + own.size)
  })

  it('routes a concrete path of every proxied route to the same table entry', () => {
    const lookup = buildPolicyLookup()
    for (const route of listRoutes().filter((r) => !r.gateway)) {
      const match = lookup(route.method, samplePath(route.path))
      expect(match?.policy.url, route.operationId).toBe(route.path)
    }
  })
})

describe('the gateway serves the document and its reference page', () => {
  let app: Awaited<ReturnType<typeof buildApp>>
  const bus = new MemoryBus()

  beforeAll(async () => {
    const config = loadGatewayConfig({
      NODE_ENV: 'test',
      LOG_LEVEL: 'silent',
      INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
    })
    app = await buildApp({ config, bus })
  })

  afterAll(async () => {
    await app?.close()
    await bus.close()
  })

  it('GET /api/v1/openapi.json: the generated document, without a credential or envelope', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toContain('application/json')
    expect(res.headers['x-request-id']).toBeTruthy()
    expect(res.json()).toEqual(JSON.parse(JSON.stringify(doc)))
  })

  it('GET /api/v1/docs: the reference page, its scripts from this origin under its own CSP', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/docs' })
    expect(res.statusCode).toBe(200)
    expect(res.headers['content-type']).toContain('text/html')
    expect(res.body).toContain('href="/api/v1/openapi.json"')
    const csp = String(res.headers['content-security-policy'])
    expect(csp).toContain("script-src 'self'")
    expect(csp).toContain("connect-src 'self'")
    const scripts = [...res.body.matchAll(/<script src="([^"]+)"><\/script>/g)].map((m) => m[1] ?? '')
    expect(scripts).toHaveLength(2)
    expect(scripts.every((src) => src.startsWith('/api-docs/'))).toBe(true)
    const [bundle, init] = scripts as [string, string]
    expect(bundle).toMatch(/^\/api-docs\/scalar-\d+\.\d+\.\d+\.js$/)
    const js = await app.inject({ method: 'GET', url: bundle })
    expect(js.statusCode).toBe(200)
    expect(js.headers['content-type']).toContain('text/javascript')
    expect(js.headers['cache-control']).toContain('immutable')
    expect(js.body).toContain('createApiReference')
    const zipped = await app.inject({
      method: 'GET',
      url: bundle,
      headers: { 'accept-encoding': 'gzip, br' },
    })
    expect(zipped.headers['content-encoding']).toBe('gzip')
    expect(zipped.rawPayload.length).toBeLessThan(js.rawPayload.length / 2)
    const settings = await app.inject({ method: 'GET', url: init })
    expect(settings.statusCode).toBe(200)
    expect(settings.body).toContain("url: '/api/v1/openapi.json'")
    expect(settings.body).toContain('telemetry: false')
    expect(settings.body).toContain('withDefaultFonts: false')
  })

  it('still answers 404 NOT_FOUND for paths that are in neither', async () => {
    const res = await app.inject({ method: 'GET', url: '/api/v1/openapi.yaml' })
    expect(res.statusCode).toBe(404)
    expect(res.json().error.code).toBe('NOT_FOUND')
    const post = await app.inject({ method: 'POST', url: '/api/v1/openapi.json' })
    expect(post.statusCode).toBe(404)
  })
})

describe('without @scalar/api-reference (a bundled build without node_modules)', () => {
  it('finds no Scalar folder when the package does not resolve, and the installed one when it does', () => {
    expect(
      scalarDir(() => {
        throw new Error("Cannot find package '@scalar/api-reference'")
      }),
    ).toBeUndefined()
    expect(scalarDir()).toMatch(/api-reference$/)
  })

  it('still serves the document; the reference page answers 404 NOT_FOUND', async () => {
    const app = createService({
      name: 'gateway',
      logLevel: 'silent',
      internalSecret: randomBytes(32).toString('hex'),
      requireContext: false,
    })
    try {
      await docsRoutes(app, undefined)
      const json = await app.inject({ method: 'GET', url: '/api/v1/openapi.json' })
      expect(json.statusCode).toBe(200)
      expect(json.json()).toEqual(JSON.parse(JSON.stringify(doc)))
      const page = await app.inject({ method: 'GET', url: '/api/v1/docs' })
      expect(page.statusCode).toBe(404)
      expect(page.json().error.code).toBe('NOT_FOUND')
      expect(page.json().error.message).toContain('/api/v1/openapi.json')
    } finally {
      await app.close()
    }
  })
})
