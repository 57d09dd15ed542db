import { AjvCompiler, type ValidatorFactory } from '@fastify/ajv-compiler'
import { type SerializerFactory, SerializerSelector } from '@fastify/fast-json-stringify-compiler'

/**
 * Fastify's own schema compilers (Ajv for requests, fast-json-stringify for responses), shared by
 * every instance a process builds and run on a route's first use rather than at its start.
 *
 * Compiling every route's schemas was most of a start's CPU: an embedded default start spent
 * about 1.2 s of main-thread CPU in fast-json-stringify and 0.6 s in Ajv out of 7 s, on routes a
 * test, a CLI command or a quiet replica mostly never calls. Compiled lazily, each schema costs
 * its route's first request a few milliseconds instead. Every public route's schemas are compiled
 * in a unit test (`compileSchemasNow`), so a schema that does not compile fails there, not on a
 * user's first request.
 *
 * The compilers are kept by the shared schemas and options (keyOf) for the whole process: the
 * embedded default's services and a unit test's many apps use one Ajv and reuse compiled
 * serializers (fast-json-stringify compiles each response schema once per process here).
 *
 * With a validator compiler of its own, Fastify hands a route's `headers` schema over as written,
 * without lowercasing its property names: a route that declares headers names them in lowercase,
 * as Node gives them (no route declares any today).
 */

type Validator = ((data: unknown, dataCxt?: object) => unknown) & { errors?: unknown; schemaEnv?: unknown }
type Serializer = (doc: unknown) => string
/** What Fastify hands a compiler for each schema of a route (its types say the schema only). */
type RouteSchema = { schema: unknown; method: string; url: string; httpPart?: string; httpStatus?: string }

type CompileValidator = (route: RouteSchema) => Validator
type CompileSerializer = (route: RouteSchema) => Serializer

/** Validator compilers (each with its Ajv) by shared schemas and options: keyOf. */
const validatorCompilers = new Map<string, CompileValidator>()
/** Serializer compilers and what they compiled, by response schema, by the same key. */
const serializerCompilers = new Map<string, { compile: CompileSerializer; done: Map<string, Serializer> }>()

const schemaIds = new WeakMap<object, number>()
let lastSchemaId = 0

/**
 * The key of an instance's shared schemas and compiler options: each shared schema by its
 * object's identity (the contract's schemas are module constants), the options as JSON. Fastify's
 * pools key them by their JSON, which for the contract's schemas cost each instance about 35 ms.
 */
export function keyOf(externalSchemas: unknown, options: unknown): string {
  const schemas = (externalSchemas ?? {}) as Record<string, unknown>
  const optionsJson = JSON.stringify(options ?? null)
  // Fastify asks once per plugin context for the validators and once for the serializers, each
  // time with a new copy of the same shared schemas (about 110 asks a service start, 0.3 ms each
  // built anew, 5 % of a start's CPU): the same ids and schema objects in the same order as the
  // last ask with these options give its key without building it.
  const last = lastKeys.get(optionsJson)
  if (last && sameEntries(schemas, last.ids, last.schemas)) return last.key
  const ids: string[] = []
  const values: unknown[] = []
  const parts: string[] = []
  for (const [id, schema] of Object.entries(schemas)) {
    ids.push(id)
    values.push(schema)
    if (typeof schema !== 'object' || schema === null) {
      parts.push(`${id}=${JSON.stringify(schema)}`)
      continue
    }
    let n = schemaIds.get(schema)
    if (n === undefined) {
      n = ++lastSchemaId
      schemaIds.set(schema, n)
    }
    parts.push(`${id}#${n}`)
  }
  const key = `${parts.join(',')}|${optionsJson}`
  lastKeys.set(optionsJson, { ids, schemas: values, key })
  return key
}

/** By the options' JSON, the last key keyOf made with them and the shared schemas it was made of. */
const lastKeys = new Map<string, { ids: string[]; schemas: unknown[]; key: string }>()

/** Whether `schemas` holds exactly `ids` with the very `values`, in that order. */
function sameEntries(schemas: Record<string, unknown>, ids: string[], values: unknown[]): boolean {
  let i = 0
  for (const id in schemas) {
    if (!Object.hasOwn(schemas, id)) continue
    if (ids[i] !== id || values[i] !== schemas[id]) return false
    i++
  }
  return i === ids.length
}

export interface SchemaCompilers {
  buildValidator: ValidatorFactory
  buildSerializer: SerializerFactory
  /** Compiles what no request has compiled yet; answers how many schemas that was. */
  compileNow(): number
}

/** One instance's compilers (what Fastify's `schemaController.compilersFactory` takes). */
export function schemaCompilers(): SchemaCompilers {
  /** The compiles not done yet, so that compileNow can do them. */
  const pending = new Set<() => void>()

  const buildValidator = ((
    externalSchemas: Parameters<ReturnType<typeof AjvCompiler>>[0],
    options: Parameters<ReturnType<typeof AjvCompiler>>[1],
  ) => {
    const key = keyOf(externalSchemas, options)
    let compile = validatorCompilers.get(key)
    if (!compile) {
      compile = AjvCompiler()(externalSchemas, options) as unknown as CompileValidator
      validatorCompilers.set(key, compile)
    }
    const compileRoute = compile
    return (route: RouteSchema): Validator => {
      let validate: Validator | undefined
      const ready = (): Validator => {
        if (!validate) {
          validate = compileRoute(route)
          pending.delete(ready)
        }
        return validate
      }
      pending.add(ready)
      // Fastify passes the parent object to an Ajv validator (one with `schemaEnv`), so that
      // coercion can replace a root value (a query string's array); every validator here is Ajv's.
      const lazy: Validator = (data, dataCxt) => {
        const v = ready()
        const ok = dataCxt === undefined ? v(data) : v(data, dataCxt)
        lazy.errors = v.errors
        return ok
      }
      lazy.schemaEnv = true
      return lazy
    }
  }) as ValidatorFactory

  const buildSerializer: SerializerFactory = (externalSchemas, options) => {
    const key = keyOf(externalSchemas, options)
    let shared = serializerCompilers.get(key)
    if (!shared) {
      // A fresh factory for each schema: the factory's options are shared by what it compiles, and
      // compiling a schema with an `$id` drops that id from their shared schemas, for every
      // schema compiled after it (fast-json-stringify-compiler's responseSchemaCompiler).
      const factory = SerializerSelector()
      const compile: CompileSerializer = (route) =>
        (factory(externalSchemas, options) as unknown as CompileSerializer)(route)
      shared = { compile, done: new Map() }
      serializerCompilers.set(key, shared)
    }
    const { compile, done: cache } = shared
    return ((route: RouteSchema) => {
      let serialize: Serializer | undefined
      const ready = (): Serializer => {
        if (!serialize) {
          // A serializer depends only on its schema and the shared schemas (the key); both are JSON.
          const schemaKey = JSON.stringify(route.schema)
          serialize = cache.get(schemaKey) ?? compile(route)
          cache.set(schemaKey, serialize)
          pending.delete(ready)
        }
        return serialize
      }
      pending.add(ready)
      return (doc: unknown) => ready()(doc)
    }) as ReturnType<SerializerFactory>
  }

  return {
    buildValidator,
    buildSerializer,
    compileNow() {
      const todo = [...pending]
      for (const compile of todo) compile()
      return todo.length
    },
  }
}
