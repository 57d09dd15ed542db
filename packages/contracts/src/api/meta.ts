import { type Static, Type } from '@sinclair/typebox'

/** `GET /health/live` and `/health/ready` of every service and the gateway (no envelope). */
export const HealthStatus = Type.Object(
  {
    status: Type.Union([Type.Literal('ok'), Type.Literal('unavailable')]),
    checks: Type.Optional(Type.Record(Type.String(), Type.String())),
  },
  { $id: 'HealthStatus' },
)
export type HealthStatus = Static<typeof HealthStatus>

/**
 * What the HTTP server answers, before any route runs, to a request it cannot read (a
 * malformed request line or header: 400; headers past the size limit: 431). Every route can get
 * it, the health probes included; it is not the `{error}` envelope of the service's own refusals.
 */
export const HttpClientError = Type.Object(
  {
    statusCode: Type.Integer({ minimum: 400, maximum: 499, examples: [400] }),
    error: Type.String({ examples: ['Bad Request'] }),
    message: Type.String({ examples: ['Client Error'] }),
  },
  { $id: 'HttpClientError' },
)
export type HttpClientError = Static<typeof HttpClientError>

/** The OpenAPI document itself, as `GET /api/v1/openapi.json` serves it (no envelope). */
export const OpenApiDocumentBody = Type.Object(
  {
    openapi: Type.String(),
    info: Type.Object({ title: Type.String(), version: Type.String() }),
    paths: Type.Record(Type.String(), Type.Unknown()),
  },
  { $id: 'OpenApiDocumentBody' },
)
