import { type Static, Type } from '@sinclair/typebox'
import { ObjectId, PageQuery, Pagination, Timestamp } from './common.ts'

/** Audit log (DESIGN section 15): one entry per committed change, written with it. */

export const AuditActor = Type.Object(
  {
    type: Type.Union([Type.Literal('user'), Type.Literal('apiKey')]),
    id: Type.String(),
    name: Type.String(),
  },
  { $id: 'AuditActor' },
)
export type AuditActor = Static<typeof AuditActor>

export const AuditEntry = Type.Object(
  {
    id: ObjectId,
    at: Timestamp,
    organizationId: ObjectId,
    actor: Type.Ref(AuditActor),
    /** For instance `prompt.published`, `environment.promoted`. */
    action: Type.String(),
    resource: Type.Object({ type: Type.String(), id: Type.String() }),
    requestId: Type.String(),
    ip: Type.String(),
    summary: Type.String(),
  },
  { $id: 'AuditEntry' },
)
export type AuditEntry = Static<typeof AuditEntry>

const AUDIT_FILTERS = {
  /** An actor's id (user or API key). */
  actor: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' })),
  action: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-z][a-z0-9_.-]*$' })),
  resourceId: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' })),
  from: Type.Optional(Timestamp),
  to: Type.Optional(Timestamp),
}

export const AuditQuery = Type.Object(
  { ...PageQuery, ...AUDIT_FILTERS },
  { $id: 'AuditQuery', additionalProperties: false },
)
export type AuditQuery = Static<typeof AuditQuery>

export const AuditExportQuery = Type.Object(
  { format: Type.Union([Type.Literal('jsonl'), Type.Literal('csv')]), ...AUDIT_FILTERS },
  { $id: 'AuditExportQuery', additionalProperties: false },
)
export type AuditExportQuery = Static<typeof AuditExportQuery>

export const AuditList = Type.Object(
  { entries: Type.Array(Type.Ref(AuditEntry)), pagination: Type.Ref(Pagination) },
  { $id: 'AuditList' },
)
export type AuditList = Static<typeof AuditList>
