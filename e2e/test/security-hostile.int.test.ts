import { ALL_SCHEMAS, ERROR_CODES, listRoutes, type RouteSpec } from '@pm/contracts'
import type { TObject, TSchema } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { Ajv, type ValidateFunction } from 'ajv'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { type InProcess, startInProcess, type Tenant } from '../src/inProcess.ts'

/**
 * Issue 14: every public route of the catalogue, fed hostile path, query and body values
 * through the gateway. Never a 5xx; every refusal carries the error envelope with a code of the
 * closed list; a value its schema does not allow is a 4xx.
 */

const LONG = 'x'.repeat(5_000) // path and query: the URL stays within Node's header limit
const HOSTILE_TEXT = [
  '\u0000',
  'a\u0000b',
  'a\tb',
  '\u0001\u001f\u007f',
  '/',
  '?',
  '#',
  '%',
  '%00',
  '../../internal',
  'a/b?c#d',
  LONG,
  '1e308',
  '99999999999999999999',
  '-1',
  'Infinity',
  'NaN',
  '{{__proto__}}',
]
const HOSTILE_BODY_VALUES: unknown[] = [
  ...HOSTILE_TEXT,
  'x'.repeat(200_000),
  1e308,
  -1e308,
  2 ** 64,
  -1,
  0.5,
  null,
  true,
  [],
  ['\u0000'],
  { $ne: null },
]

interface Answer {
  status: number
  body: unknown
}

function expectEnvelopeOrSuccess(where: string, res: Answer, mustRefuse: boolean): void {
  expect(res.status, where).toBeLessThan(500)
  if (mustRefuse) expect(res.status, where).toBeGreaterThanOrEqual(400)
  if (res.status >= 400) {
    const error = (res.body as { error?: { code?: string; requestId?: string } } | null)?.error
    expect(ERROR_CODES, `${where}: ${JSON.stringify(res.body)}`).toContain(error?.code)
    expect(error?.requestId, where).toBeTruthy()
  }
}

// The services' validator settings (packages/kit createService): types are coerced, also in
// bodies (a number for a string is its text, a one-element array its element, null "" or false).
const ajv = new Ajv({ coerceTypes: 'array', useDefaults: true, strict: false, validateFormats: false })
for (const schema of ALL_SCHEMAS) ajv.addSchema(schema)

/** Each field's validator, compiled once (a schema object new on each call compiled again each time). */
const fieldValidators = new WeakMap<TSchema, ValidateFunction>()

/** Whether the services' validator accepts the value for this field. */
function accepts(schema: TSchema | undefined, value: unknown): boolean {
  if (!schema) return false
  let validate = fieldValidators.get(schema)
  if (!validate) {
    validate = ajv.compile({ type: 'object', properties: { v: schema } })
    fieldValidators.set(schema, validate)
  }
  return validate({ v: value })
}

function baseBody(schema: TSchema | undefined): Record<string, unknown> {
  if (!schema) return {}
  try {
    const created = Value.Create(schema)
    return created && typeof created === 'object' ? (created as Record<string, unknown>) : {}
  } catch {
    return {}
  }
}

describe('hostile input on every public route never gives a 5xx', () => {
  let app: InProcess
  let tenant: Tenant
  let promptId: string

  beforeAll(async () => {
    app = await startInProcess({
      RATE_LIMIT_LOGIN_IP_POINTS: '1000000',
      RATE_LIMIT_LOGIN_EMAIL_POINTS: '1000000',
      RATE_LIMIT_PUBLIC_POINTS: '1000000',
      RATE_LIMIT_BAD_KEY_IP_POINTS: '1000000',
    })
    tenant = await app.signUp('hostile')
    const created = await call<{ data: { _id: string } }>(app.base, 'POST', '/api/v1/prompts', {
      token: tenant.accessToken,
      body: { organizationId: tenant.organizationId, name: 'target', template: 'Hi {{name}}' },
    })
    promptId = created.body.data._id
  }, 60_000)

  afterAll(async () => {
    await app?.close()
  })

  /** A valid value for each path parameter, so that only the hostile one is wrong. */
  const validParam = (route: RouteSpec, name: string): string => {
    if (name === 'id')
      return route.path.startsWith('/api/v1/organizations') ? tenant.organizationId : promptId
    if (name === 'env') return 'preview'
    if (name === 'name') return 'name'
    return '0123456789abcdef01234567'
  }

  const pathWith = (route: RouteSpec, values: Record<string, string>): string =>
    route.path.replace(/:([A-Za-z]+)/g, (_, name: string) =>
      encodeURIComponent(values[name] ?? validParam(route, name)),
    )

  const send = async (route: RouteSpec, path: string, query: Record<string, string>, body?: unknown) => {
    const q = new URLSearchParams(query)
    if (route.auth !== 'public' && !('organizationId' in query) && route.path.startsWith('/api/v1/prompts'))
      q.set('organizationId', tenant.organizationId)
    const qs = q.toString()
    const url = `${path}${qs ? `?${qs}` : ''}`
    const hasBody = route.body !== undefined && route.bodyType !== 'multipart' && body !== undefined
    return call(app.base, route.method, url, {
      token: route.auth === 'public' ? undefined : tenant.accessToken,
      ...(hasBody ? { body } : {}),
    })
  }

  const routes = listRoutes().filter((r) => !r.gateway)

  it('covers the catalogue', () => {
    expect(routes.length).toBeGreaterThan(40)
  })

  it.each(routes.map((r) => [`${r.method} ${r.path}`, r] as const))(
    '%s',
    async (_label, route) => {
      let checked = 0
      const params = (route.params as TObject | undefined)?.properties ?? {}
      for (const name of Object.keys(params)) {
        for (const value of HOSTILE_TEXT) {
          const res = await send(route, pathWith(route, { [name]: value }), {}, baseBody(route.body))
          // A path parameter is an id, an environment or a variable name: none of these is valid
          // (or, for a variable name, it names nothing): always refused.
          expectEnvelopeOrSuccess(
            `${route.method} ${route.path} :${name}=${JSON.stringify(value.slice(0, 40))}`,
            res,
            true,
          )
          checked++
        }
      }
      const query = (route.query as TObject | undefined)?.properties ?? {}
      for (const [name, schema] of Object.entries(query)) {
        for (const value of HOSTILE_TEXT) {
          const res = await send(route, pathWith(route, {}), { [name]: value }, baseBody(route.body))
          expectEnvelopeOrSuccess(
            `${route.method} ${route.path} ?${name}=${JSON.stringify(value.slice(0, 40))}`,
            res,
            !accepts(schema, value),
          )
          checked++
        }
      }
      const body = route.body as TObject | undefined
      if (body?.properties && route.bodyType !== 'multipart') {
        for (const [name, schema] of Object.entries(body.properties)) {
          for (const value of HOSTILE_BODY_VALUES) {
            const sent = { ...baseBody(body), [name]: value }
            const res = await send(route, pathWith(route, {}), {}, sent)
            const label = JSON.stringify(value)?.slice(0, 40)
            expectEnvelopeOrSuccess(
              `${route.method} ${route.path} body.${name}=${label}`,
              res,
              // The services coerce types (ajv coerceTypes, also on bodies): a number sent
              // for a string is taken as its text. Refusal is required where even that fails.
              !accepts(schema, value),
            )
            checked++
          }
        }
      }
      expect(checked + 1).toBeGreaterThan(0)
    },
    120_000,
  )
})
