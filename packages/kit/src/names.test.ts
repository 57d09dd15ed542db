import { Writable } from 'node:stream'
import {
  ALL_SCHEMAS,
  API_ROUTES,
  CONTEXT_HEADER,
  type CallerContext,
  DISPLAY_NAME_PATTERN,
  DisplayName,
  isDisplayName,
  Text,
  textControlAt,
} from '@pm/contracts'
import { type TSchema, Type } from '@sinclair/typebox'
import { Value } from '@sinclair/typebox/value'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { signContext } from './context.ts'
import { createService, type Service } from './service.ts'

const GOOD = ['Ada', '  Support bot  ', 'Ünïcödé 名前 🎉', 'a\u00a0b', 'x'.repeat(20)]
const BAD = [
  '',
  '   ',
  '\u00a0',
  'x'.repeat(21),
  'a\u0000b',
  'a\u0007',
  '\tname',
  'line\nbreak',
  'carriage\r',
  '\u001b[31mred',
  'del\u007f',
  'next\u0085line',
  'c1\u009b',
  'line\u2028sep',
  'para\u2029sep',
]

/** Each string schema under a property named `name` (or the items of `tags`) in a route's body. */
function nameSchemas(
  schema: TSchema,
  byId: Map<string, TSchema>,
  path: string,
  out: [string, TSchema][],
  fields: readonly string[] = ['name', 'tags'],
) {
  const s = schema as Record<string, unknown>
  if (typeof s.$ref === 'string') {
    const target = byId.get(s.$ref)
    if (target) nameSchemas(target, byId, path, out, fields)
    return
  }
  for (const key of ['anyOf', 'oneOf', 'allOf'] as const) {
    for (const sub of (s[key] as TSchema[] | undefined) ?? []) nameSchemas(sub, byId, path, out, fields)
  }
  if (s.items) nameSchemas(s.items as TSchema, byId, `${path}[]`, out, fields)
  const properties = (s.properties ?? {}) as Record<string, TSchema>
  for (const [key, value] of Object.entries(properties)) {
    const v = value as Record<string, unknown>
    if (fields.includes(key) && (v.type === 'string' || v.type === 'array')) {
      out.push([`${path}.${key}`, v.type === 'array' ? (v.items as TSchema) : value])
    }
    for (const branch of (v.anyOf as Record<string, unknown>[] | undefined) ?? []) {
      if (fields.includes(key) && branch.type === 'string') out.push([`${path}.${key}`, branch as TSchema])
    }
    nameSchemas(value, byId, `${path}.${key}`, out, fields)
  }
}

/** The fields named `fields` in every route's body, as `route.path` and the string schema. */
function routeFields(fields?: readonly string[]): { found: [string, TSchema][]; paths: Set<string> } {
  const byId = new Map(ALL_SCHEMAS.flatMap((s) => (s.$id ? [[s.$id, s] as const] : [])))
  const found: [string, TSchema][] = []
  for (const [id, route] of Object.entries(API_ROUTES)) {
    const body = (route as { body?: TSchema }).body
    if (body) nameSchemas(body, byId, id, found, fields)
  }
  return { found, paths: new Set(found.map(([path]) => path)) }
}

describe('names (one line, not blank: DISPLAY_NAME_PATTERN)', () => {
  let app: Service
  const secret = 's'.repeat(32)
  const caller: CallerContext = {
    kind: 'apiKey',
    apiKeyId: 'k1',
    organizationId: 'a'.repeat(24),
    scopes: ['prompts:write'],
    requestId: 'r',
  }
  beforeAll(async () => {
    app = createService({
      name: 'names-test',
      internalSecret: secret,
      logStream: new Writable({ write: (_c, _e, done) => done() }),
    })
    app.post(
      '/things',
      { schema: { body: Type.Object({ name: DisplayName(20) }, { additionalProperties: false }) } },
      async (request) => request.body,
    )
    await app.ready()
  })
  afterAll(() => app.close())

  it("the services' validator, TypeBox's (files) and isDisplayName (CSV rows, bootstrap) agree", async () => {
    const headers = { [CONTEXT_HEADER]: signContext(caller, secret) }
    for (const [name, ok] of [
      ...GOOD.map((n) => [n, true] as const),
      ...BAD.map((n) => [n, false] as const),
    ]) {
      const label = JSON.stringify(name)
      const res = await app.inject({ method: 'POST', url: '/things', headers, payload: { name } })
      expect(res.statusCode, label).toBe(ok ? 200 : 400)
      if (ok) expect(res.json(), label).toEqual({ name })
      else {
        expect(res.json().error.code, label).toBe('VALIDATION_ERROR')
        // Said in words where the pattern is the failing rule, not as the pattern.
        if (name.length >= 1 && name.length <= 20)
          expect(res.json().error.details, label).toEqual([
            {
              path: '/body/name',
              message: 'must not be blank, and must hold no control characters or line breaks',
            },
          ])
      }
      expect(Value.Check(DisplayName(20), name), label).toBe(ok)
      expect(isDisplayName(name, 20), label).toBe(ok)
    }
  })

  it('stays linear enough: 10,000 characters with a control character at the end are refused at once', () => {
    const long = `${'a '.repeat(5_000)}\u0007`
    const started = performance.now()
    expect(new RegExp(DISPLAY_NAME_PATTERN, 'u').test(long)).toBe(false)
    // A bound far above the quadratic worst case of 200 characters, far below a freeze.
    expect(performance.now() - started).toBeLessThan(2_000)
  })

  it('every name and tag a route takes follows the rule (a new route with a bare string fails here)', () => {
    const { found, paths } = routeFields()
    for (const expected of [
      'createPrompt.name',
      'createPrompt.tags',
      'updatePrompt.name',
      'updatePrompt.tags',
      'forkVersion.name',
      'forkPublicPrompt.name',
      'register.name',
      'createOrganization.name',
      'updateOrganization.name',
      'createApiKey.name',
      'renameApiKey.name',
      'createConnection.name',
      'updateConnection.name',
      'createDataset.name',
      'updateDataset.name',
      'createExperiment.name',
    ]) {
      expect(paths.has(expected), expected).toBe(true)
    }
    for (const [path, schema] of found) {
      const pattern = (schema as { pattern?: string }).pattern
      expect(pattern, path).toBeDefined()
      const re = new RegExp(pattern as string, 'u')
      for (const bad of ['   ', 'a\u0007', 'a\nb', 'a\u2028b'])
        expect(re.test(bad), `${path} ${JSON.stringify(bad)}`).toBe(false)
    }
  })

  it('text (templates, messages, descriptions, change logs) keeps tab and line breaks and refuses the other controls', () => {
    for (const [text, ok] of [
      ['Hello {{name}},\n\tthanks.\r\n', true],
      ['Ünïcödé 名前 🎉 \u0085\u2028', true],
      ['a\u0000b', false],
      ['\u001b[31mred', false],
      ['bell\u0007', false],
      ['del\u007f', false],
      ['vt\u000b', false],
    ] as const) {
      expect(Value.Check(Text(100), text), JSON.stringify(text)).toBe(ok)
      expect(textControlAt(text) < 0, JSON.stringify(text)).toBe(ok)
    }
    const { found, paths } = routeFields(['template', 'content', 'description', 'changeLog', 'defaultValue'])
    for (const expected of [
      'createPrompt.template',
      'createPrompt.messages[].content',
      'createPrompt.description',
      'createPrompt.variables[].defaultValue',
      'updatePrompt.template',
      'publishPrompt.changeLog',
      'updateVariable.description',
      'updateVariable.defaultValue',
      'createDataset.description',
    ]) {
      expect(paths.has(expected), `${expected} in ${[...paths].join(', ')}`).toBe(true)
    }
    for (const [path, schema] of found) {
      // Tools' descriptions are the model's business (OpenAI's shape), not text this service shows.
      if (path.includes('.tools[]')) continue
      const pattern = (schema as { pattern?: string }).pattern
      expect(pattern, path).toBeDefined()
      const re = new RegExp(pattern as string, 'u')
      expect(re.test('a\tb\r\nc'), path).toBe(true)
      for (const bad of ['a\u0000', '\u001b[0m', 'x\u007f'])
        expect(re.test(bad), `${path} ${JSON.stringify(bad)}`).toBe(false)
    }
  })
})
