import type { ApiRoutes, OperationId } from '@pm/contracts'
import type { Static, TSchema } from '@sinclair/typebox'

/**
 * Input and result types of every operation, read off the route catalogue of @pm/contracts:
 * a route's schemas are the one source of both the OpenAPI document and these types.
 */

type Route<K extends OperationId> = ApiRoutes[K]

/** A file for the CSV import: its bytes (or text) and a file name. */
export interface UploadFile {
  file: Blob | Uint8Array | string
  filename?: string
  /** More files in the same field `file` (prompt file import). */
  more?: { file: Blob | Uint8Array | string; filename?: string }[]
  /** Plain form fields sent with the files. */
  fields?: Record<string, string>
}

export type ParamsOf<K extends OperationId> =
  Route<K> extends { params: infer P extends TSchema } ? Static<P> : never
/** Query fields are all optional from the caller's side (the service fills the defaults). */
export type QueryOf<K extends OperationId> =
  Route<K> extends { query: infer Q extends TSchema } ? Partial<Static<Q>> : never
export type BodyOf<K extends OperationId> =
  Route<K> extends { bodyType: 'multipart' }
    ? UploadFile
    : Route<K> extends { body: infer B extends TSchema }
      ? Static<B>
      : never
export type ResultOf<K extends OperationId> =
  Route<K> extends { produces: 'text/html' | 'text/plain' | 'text/csv' }
    ? string
    : Route<K> extends { produces: 'application/gzip' }
      ? Uint8Array
      : Route<K> extends { response: infer R extends TSchema }
        ? Static<R>
        : undefined

export interface CallOptions {
  signal?: AbortSignal
  headers?: Record<string, string>
}

type ParamsPart<K extends OperationId> = [ParamsOf<K>] extends [never] ? unknown : { params: ParamsOf<K> }
type QueryPart<K extends OperationId> = [QueryOf<K>] extends [never] ? unknown : { query?: QueryOf<K> }
type BodyPart<K extends OperationId> = [BodyOf<K>] extends [never]
  ? unknown
  : Route<K> extends { bodyOptional: true }
    ? { body?: BodyOf<K> }
    : { body: BodyOf<K> }

export type InputOf<K extends OperationId> = ParamsPart<K> & QueryPart<K> & BodyPart<K> & CallOptions

/** `client.api.<operationId>(input)`: one typed method per route of the catalogue. */
export type ApiMethods = {
  [K in OperationId]: object extends InputOf<K>
    ? (input?: InputOf<K>) => Promise<ResultOf<K>>
    : (input: InputOf<K>) => Promise<ResultOf<K>>
}

/** The loose shape the transport works with. */
export interface RawInput extends CallOptions {
  params?: Record<string, unknown>
  query?: Record<string, unknown>
  body?: unknown
}
