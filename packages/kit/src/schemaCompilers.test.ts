import { Writable } from 'node:stream'
import { ALL_SCHEMAS, API_ROUTES, type CallerContext, CONTEXT_HEADER, type RouteSpec } from '@pm/contracts'
import { type TSchema, Type } from '@sinclair/typebox'
import { Ajv } from 'ajv'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { signContext } from './context.ts'
import { route } from './route.ts'
import { keyOf } from './schemaCompilers.ts'
import { compileSchemasNow, createService, type Service } from './service.ts'

const secret = 's'.repeat(32)
const quiet = () => new Writable({ write: (_c, _e, done) => done() })
const caller: CallerContext = {
  kind: 'apiKey',
  apiKeyId: 'k1',
  organizationId: 'a'.repeat(24),
  scopes: ['prompts:read'],
  requestId: 'r',
}
const headers = { [CONTEXT_HEADER]: signContext(caller, secret) }

describe("routes' schemas compile on first use", () => {
  let app: Service
  beforeAll(async () => {
    app = createService({ name: 'lazy-test', internalSecret: secret, logStream: quiet() })
    app.get(
      '/items',
      {
        schema: {
          querystring: Type.Object({ tag: Type.Array(Type.String()), limit: Type.Integer({ maximum: 10 }) }),
          response: { 200: Type.Object({ tags: Type.Array(Type.String()), limit: Type.Integer() }) },
        },
      },
      async (request) => {
        const { tag, limit } = request.query as { tag: string[]; limit: number }
        return { tags: tag, limit, secret: 'not in the schema' }
      },
    )
    app.post(
      '/items',
      {
        schema: {
          body: Type.Object({ name: Type.String({ minLength: 2 }) }, { additionalProperties: false }),
        },
      },
      async () => ({ ok: true }),
    )
    await app.ready()
  })
  afterAll(() => app.close())

  it('validates, coerces and serializes as Fastify does', async () => {
    const ok = await app.inject({ method: 'GET', url: '/items?tag=a&limit=3', headers })
    expect(ok.statusCode, ok.body).toBe(200)
    // One value coerced to an array and a number; the field outside the response schema dropped.
    expect(ok.json()).toEqual({ tags: ['a'], limit: 3 })
    const tooMany = await app.inject({ method: 'GET', url: '/items?tag=a&limit=11', headers })
    expect([tooMany.statusCode, tooMany.json().error.code]).toEqual([400, 'VALIDATION_ERROR'])
    // Ajv's errors reach the answer through the lazy validator.
    expect(tooMany.json().error.details).toEqual([{ path: '/query/limit', message: 'must be <= 10' }])
    const short = await app.inject({ method: 'POST', url: '/items', headers, payload: { name: 'x' } })
    expect([short.statusCode, short.json().error.code]).toEqual([400, 'VALIDATION_ERROR'])
    const extra = await app.inject({ method: 'POST', url: '/items', headers, payload: { name: 'xy', b: 1 } })
    expect(extra.statusCode).toBe(400)
    const good = await app.inject({ method: 'POST', url: '/items', headers, payload: { name: 'xy' } })
    expect([good.statusCode, good.json()]).toEqual([200, { ok: true }])
  })

  it('compileSchemasNow compiles only what no request has compiled', () => {
    // Every schema above has been used; the health routes' own remain at most.
    const left = compileSchemasNow(app)
    expect(compileSchemasNow(app)).toBe(0)
    expect(left).toBeLessThan(4)
  })
})

describe('a shared schema used whole by one route and by reference by another', () => {
  it('serves both, whichever is asked first', async () => {
    const Thing = Type.Object({ name: Type.String() }, { $id: 'LazyThing' })
    for (const first of ['/whole', '/ref']) {
      const app = createService({ name: 'order-test', internalSecret: secret, logStream: quiet() })
      app.addSchema(Thing)
      app.get('/whole', { schema: { response: { 200: Thing } } }, async () => ({ name: 'a', x: 1 }))
      app.get(
        '/ref',
        { schema: { response: { 200: Type.Object({ thing: Type.Ref(Thing) }) } } },
        async () => ({ thing: { name: 'b', x: 1 } }),
      )
      await app.ready()
      // Compiling the schema with the $id first once dropped it from the shared schemas that
      // later compiles resolve references in (fast-json-stringify-compiler shares its options).
      for (const url of first === '/whole' ? ['/whole', '/ref'] : ['/ref', '/whole']) {
        const res = await app.inject({ method: 'GET', url, headers })
        expect(res.statusCode, `${first} first, then ${url}: ${res.body}`).toBe(200)
        expect(res.json()).toEqual(url === '/whole' ? { name: 'a' } : { thing: { name: 'b' } })
      }
      await app.close()
    }
  })
})

describe('every public route declared in contracts', () => {
  it("has request and response schemas that compile (a service's first request could not)", async () => {
    const app = createService({ name: 'all-routes', internalSecret: secret, logStream: quiet() })
    // The health routes are createService's own.
    for (const spec of Object.values(API_ROUTES) as RouteSpec[])
      if (!spec.path.startsWith('/health')) route(app, spec, async () => ({}) as never)
    await app.ready()
    const compiled = compileSchemasNow(app)
    // Each route has at least a response schema; most a params, query or body schema too.
    expect(compiled).toBeGreaterThan(Object.keys(API_ROUTES).length)
    await app.close()
  })

  it('has only valid JSON Schemas, as are the shared ones: the services do not check them against the meta-schema at start', () => {
    // What Ajv's validateSchema would check at each start (createService turns it off).
    const ajv = new Ajv({ validateSchema: true })
    const invalid: string[] = []
    const check = (where: string, schema: TSchema | undefined) => {
      if (schema !== undefined && !ajv.validateSchema(schema)) invalid.push(`${where}: ${ajv.errorsText()}`)
    }
    for (const schema of ALL_SCHEMAS) check(String(schema.$id), schema)
    let checked = 0
    for (const [name, spec] of Object.entries(API_ROUTES) as [string, RouteSpec][]) {
      for (const part of ['params', 'query', 'body', 'response'] as const) {
        check(`${name}.${part}`, spec[part])
        if (spec[part] !== undefined) checked++
      }
    }
    expect(invalid).toEqual([])
    expect(checked).toBeGreaterThan(Object.keys(API_ROUTES).length)
    // The check can fail: a misspelt type is no valid schema.
    expect(ajv.validateSchema({ type: 'strin' })).toBe(false)
  })

  it('SCHEMA_COMPILE=eager compiles them before ready, and a schema that does not compile fails the start', async () => {
    const eager = createService({
      name: 'eager',
      internalSecret: secret,
      logStream: quiet(),
      compileSchemas: 'eager',
    })
    route(eager, API_ROUTES.invokePrompt, async () => ({}) as never)
    await eager.ready()
    expect(compileSchemasNow(eager)).toBe(0)
    await eager.close()

    const broken = createService({
      name: 'broken',
      internalSecret: secret,
      logStream: quiet(),
      compileSchemas: 'eager',
    })
    broken.get('/x', { schema: { querystring: { $ref: 'nowhere#' } } }, async () => ({}))
    await expect(broken.ready()).rejects.toThrow(/nowhere/)
    const lazy = createService({ name: 'lazy', internalSecret: secret, logStream: quiet() })
    lazy.get('/x', { schema: { querystring: { $ref: 'nowhere#' } } }, async () => ({}))
    await lazy.ready()
    expect(() => compileSchemasNow(lazy)).toThrow(/nowhere/)
    await lazy.close()
  })
})

describe('keyOf (the shared compilers of a process)', () => {
  it('gives a copy of the same schemas and options the same key, and any other set another', () => {
    const a = { $id: 'a', type: 'string' }
    const b = { $id: 'b', type: 'integer' }
    const opts = { customOptions: { coerceTypes: 'array' } }
    const key = keyOf({ a, b }, opts)
    // Fastify hands each plugin context a fresh copy: the same key, asked again and again.
    expect(keyOf({ a, b }, { customOptions: { coerceTypes: 'array' } })).toBe(key)
    expect(keyOf({ a, b }, opts)).toBe(key)
    // Another options object between two asks does not disturb the first options' key.
    const other = keyOf({ a, b }, null)
    expect(other).not.toBe(key)
    expect(keyOf({ a, b }, opts)).toBe(key)
    // An equal schema that is another object, one schema more or less, another order of ids or
    // other options: another key.
    expect(keyOf({ a, b: { ...b } }, opts)).not.toBe(key)
    expect(keyOf({ a }, opts)).not.toBe(key)
    expect(keyOf({ a, b, c: { $id: 'c' } }, opts)).not.toBe(key)
    expect(keyOf({ b, a }, opts)).not.toBe(key)
    expect(keyOf({ a, b }, { customOptions: { coerceTypes: false } })).not.toBe(key)
    // And back: the first set's key again.
    expect(keyOf({ a, b }, opts)).toBe(key)
  })
})
