import type { Static, TObject } from '@sinclair/typebox'
import { Ajv, type ValidateFunction } from 'ajv'
import addFormats from 'ajv-formats'
import { patternProblem } from '@pm/contracts'

export class ConfigError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'ConfigError'
  }
}

/** One Ajv for every settings schema of the process, and each schema compiled once. */
let ajv: Ajv | undefined
const validators = new WeakMap<TObject, ValidateFunction>()

/**
 * The settings schema's validator. An Ajv instance and a compile cost tens of milliseconds each:
 * a process loading the settings of several services (the embedded default: every service and
 * the operating settings) paid about 0.6 s of CPU at its start making one of each per call.
 */
function validatorOf(schema: TObject): ValidateFunction {
  const known = validators.get(schema)
  if (known) return known
  if (!ajv) {
    // Each validator runs once, at start: no meta-schema check of our own constant schemas and
    // no optimizing pass over the generated code, which halve the compile (the seven services'
    // schemas: about 125 ms of CPU against 245).
    ajv = new Ajv({
      coerceTypes: true,
      useDefaults: true,
      allErrors: true,
      removeAdditional: true,
      validateSchema: false,
      code: { optimize: false },
    })
    addFormats.default(ajv)
  }
  const validate = ajv.compile(schema)
  validators.set(schema, validate)
  return validate
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
  const input: Record<string, unknown> = {}
  for (const key of Object.keys(schema.properties)) {
    const value = env[key]
    if (value !== undefined && value !== '') input[key] = value
  }
  const validate = validatorOf(schema)
  if (!validate(input)) {
    const problems = (validate.errors ?? []).map((e) => {
      const name =
        e.keyword === 'required'
          ? String((e.params as { missingProperty: string }).missingProperty)
          : e.instancePath.replace(/^\//, '')
      const pattern = e.keyword === 'pattern' ? (e.params as { pattern?: string }).pattern : undefined
      const problem = pattern === undefined ? undefined : patternProblem(pattern)
      return `${name}: ${e.keyword === 'required' ? 'is required' : (problem ?? e.message)}`
    })
    throw new ConfigError(`invalid configuration: ${[...new Set(problems)].join('; ')}`)
  }
  return input as Static<T>
}
