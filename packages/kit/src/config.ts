import type { Static, TObject } from '@sinclair/typebox'
import { Ajv } from 'ajv'
import addFormats from 'ajv-formats'

export class ConfigError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}

/**
 * Validates settings once, at start. Values come from `env` (process.env by default: the
 * only place that reads it); numbers and booleans are coerced; defaults are applied. A bad
 * or missing setting throws a ConfigError naming every variable at fault.
 */
export function loadConfig<T extends TObject>(
  schema: T,
  env: Record<string, string | undefined> = process.env,
): Static<T> {
  const ajv = new Ajv({ coerceTypes: true, useDefaults: true, allErrors: true, removeAdditional: true })
  addFormats.default(ajv)
  const input: Record<string, unknown> = {}
  for (const key of Object.keys(schema.properties)) {
    const value = env[key]
    if (value !== undefined && value !== '') input[key] = value
  }
  const validate = ajv.compile(schema)
  if (!validate(input)) {
    const problems = (validate.errors ?? []).map((e) => {
      const name =
        e.keyword === 'required'
          ? String((e.params as { missingProperty: string }).missingProperty)
          : e.instancePath.replace(/^\//, '')
      return `${name}: ${e.keyword === 'required' ? 'is required' : e.message}`
    })
    throw new ConfigError(`invalid configuration: ${[...new Set(problems)].join('; ')}`)
  }
  return input as Static<T>
}
