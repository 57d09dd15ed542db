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

/** The OpenAPI document itself, as `GET /api/v1/openapi.json` serves it (no envelope). */
export const OpenApiDocumentBody = Type.Object(
  {
    openapi: Type.String(),
    info: Type.Object({ title: Type.String(), version: Type.String() }),
    paths: Type.Record(Type.String(), Type.Unknown()),
  },
  { $id: 'OpenApiDocumentBody' },
)
