import type { JsonSchema } from './jsonSchema.ts'

/**
 * Example values made from the schemas themselves, so that every operation shows a request and
 * a response example and none can drift from its schema (a test validates each one against
 * its schema, and Redocly's lint does again). Field names pick plausible values; formats and
 * patterns pick valid ones.
 */

const ID = '6651f0c2a1b2c3d4e5f60718'
const WHEN = '2026-11-23T09:30:00.000Z'

/** Values by property name, used when they fit the property's schema. */
const BY_NAME: Record<string, unknown> = {
  name: 'Greeting',
  email: 'ada@example.com',
  password: 'correct horse battery staple',
  template: 'Hello {{name}}, welcome to {{place}}!',
  renderedContent: 'Hello Ada, welcome to London!',
  content: 'Hello {{name}}, welcome to {{place}}!',
  description: 'Greets a new user',
  changeLog: 'First version',
  slug: 'greeting',
  url: 'https://hooks.example.com/prompts',
  key: 'pk_4Fq8ZC2mYp0HnK7bV1sW9xTe3RgLd6Ua',
  secret: 'whsec_MfKQ9r8GdHjwu1V2sq0v4mA5KpT3PbYx',
  prefix: 'pk_4Fq8ZC2m',
  accessToken: 'eyJhbGciOiJFUzI1NiIsImtpZCI6ImsxIn0.eyJzdWIiOiI2NjUxZjBjMiJ9.c2lnbmF0dXJl',
  refreshToken: 'rt_9c1f7e3a5b8d2c4e6f0a1b3c5d7e9f1a',
  tokenType: 'Bearer',
  requestId: '0b8f3c1e-2d4a-4f6b-9c7e-1a2b3c4d5e6f',
  message: 'request is invalid',
  tags: ['onboarding'],
  env: 'production',
  reason: 'rotated',
  title: 'Greeting',
  query: 'greeting',
  search: 'greeting',
  defaultValue: 'friend',
  place: 'London',
}

/** Fills a variables map (`Record<string, string>`) with the example template's variables. */
const VARIABLES = { name: 'Ada', place: 'London' }

export interface ExampleContext {
  /** `#/components/schemas/<Name>` targets. */
  schemas: Record<string, JsonSchema>
}

const SCHEMA_REF = '#/components/schemas/'

function fits(value: unknown, schema: JsonSchema): boolean {
  if (schema.enum && Array.isArray(schema.enum)) return schema.enum.includes(value)
  if (schema.const !== undefined) return schema.const === value
  const type = schema.type
  if (typeof value === 'string') {
    if (type !== undefined && type !== 'string') return false
    if (typeof schema.maxLength === 'number' && value.length > schema.maxLength) return false
    if (typeof schema.minLength === 'number' && value.length < schema.minLength) return false
    if (typeof schema.pattern === 'string' && !new RegExp(schema.pattern, 'u').test(value)) return false
    if (schema.format === 'email' && !value.includes('@')) return false
    if (schema.format === 'date-time' && Number.isNaN(Date.parse(value))) return false
    return true
  }
  if (Array.isArray(value)) return type === 'array'
  return false
}

function str(schema: JsonSchema, name: string | undefined): string {
  const hinted = name !== undefined ? BY_NAME[name] : undefined
  if (typeof hinted === 'string' && fits(hinted, schema)) return hinted
  if (schema.format === 'date-time') return WHEN
  if (schema.format === 'email') return 'ada@example.com'
  if (schema.format === 'uri') return 'https://hooks.example.com/prompts'
  if (typeof schema.pattern === 'string') {
    for (const candidate of [ID, BY_NAME.key, BY_NAME.secret, BY_NAME.url, 'greeting', 'name', 'Greeting']) {
      if (typeof candidate === 'string' && fits(candidate, schema)) return candidate
    }
  }
  const base = name ?? 'text'
  const min = typeof schema.minLength === 'number' ? schema.minLength : 0
  const max = typeof schema.maxLength === 'number' ? schema.maxLength : 200
  return base.padEnd(min, 'x').slice(0, max)
}

/** An example value that is valid against `schema`. */
export function exampleOf(schema: JsonSchema, ctx: ExampleContext, name?: string, depth = 0): unknown {
  if (depth > 40) return null
  if (typeof schema.$ref === 'string') {
    const target = ctx.schemas[schema.$ref.slice(SCHEMA_REF.length)]
    return target ? exampleOf(target, ctx, name, depth + 1) : null
  }
  if (Array.isArray(schema.examples) && schema.examples.length > 0) return schema.examples[0]
  if (schema.const !== undefined) return schema.const
  if (Array.isArray(schema.enum) && schema.enum.length > 0) {
    const hinted = name !== undefined ? BY_NAME[name] : undefined
    return schema.enum.includes(hinted) ? hinted : schema.enum[0]
  }
  if (Array.isArray(schema.allOf)) {
    let merged: unknown
    for (const part of schema.allOf as JsonSchema[]) {
      const value = exampleOf(part, ctx, name, depth + 1)
      merged =
        merged && typeof merged === 'object' && value && typeof value === 'object'
          ? deepMerge(merged as Record<string, unknown>, value as Record<string, unknown>)
          : (value ?? merged)
    }
    return merged
  }
  for (const key of ['anyOf', 'oneOf'] as const) {
    const options = schema[key]
    if (Array.isArray(options)) {
      const choice =
        (options as JsonSchema[]).find((o) => o.type !== 'null' && o.const !== null) ??
        (options[0] as JsonSchema)
      return exampleOf(choice, ctx, name, depth + 1)
    }
  }
  if (schema.default !== undefined) return schema.default
  const type = Array.isArray(schema.type) ? schema.type.find((t) => t !== 'null') : schema.type
  switch (type) {
    case 'string':
      return str(schema, name)
    case 'integer':
    case 'number': {
      const min = typeof schema.minimum === 'number' ? schema.minimum : 1
      const max = typeof schema.maximum === 'number' ? schema.maximum : Number.MAX_SAFE_INTEGER
      return Math.min(Math.max(min, 1), max)
    }
    case 'boolean':
      return true
    case 'null':
      return null
    case 'array': {
      const hinted = name !== undefined ? BY_NAME[name] : undefined
      const items = (schema.items ?? {}) as JsonSchema
      if (Array.isArray(hinted) && hinted.every((v) => fits(v, items))) return hinted
      const count = Math.max(1, typeof schema.minItems === 'number' ? schema.minItems : 1)
      const max = typeof schema.maxItems === 'number' ? schema.maxItems : count
      if (max === 0) return []
      const one = exampleOf(items, ctx, singular(name), depth + 1)
      return Array.from({ length: Math.min(count, max) }, () => one)
    }
    default: {
      if (type !== 'object' && !schema.properties) return {}
      const out: Record<string, unknown> = {}
      const props = (schema.properties ?? {}) as Record<string, JsonSchema>
      for (const [key, prop] of Object.entries(props)) out[key] = exampleOf(prop, ctx, key, depth + 1)
      const extra = schema.additionalProperties ?? schema.patternProperties
      if (Object.keys(props).length === 0 && extra && typeof extra === 'object') {
        // A map (variables): the example template's variables, when the values are strings.
        const valueSchema = (
          schema.patternProperties
            ? Object.values(schema.patternProperties as Record<string, JsonSchema>)[0]
            : extra
        ) as JsonSchema
        for (const [key, value] of Object.entries(VARIABLES)) {
          out[key] = fits(value, valueSchema) ? value : exampleOf(valueSchema, ctx, key, depth + 1)
        }
      }
      return out
    }
  }
}

function singular(name: string | undefined): string | undefined {
  if (!name) return name
  if (name === 'tags') return 'tag'
  return name.endsWith('s') ? name.slice(0, -1) : name
}

function deepMerge(a: Record<string, unknown>, b: Record<string, unknown>): Record<string, unknown> {
  const out = { ...a }
  for (const [key, value] of Object.entries(b)) {
    const prev = out[key]
    out[key] =
      prev && value && typeof prev === 'object' && typeof value === 'object' && !Array.isArray(value)
        ? deepMerge(prev as Record<string, unknown>, value as Record<string, unknown>)
        : value
  }
  return out
}
