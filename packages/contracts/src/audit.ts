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

/**
 * Every action the audit log records (DESIGN section 15), by the service that writes it. The
 * list only grows: an entry's action is one of these.
 */
export const AUDIT_ACTIONS = [
  // prompts
  'prompt.created',
  'prompt.updated',
  'prompt.visibility.changed',
  'prompt.published',
  'environment.promoted',
  'prompt.restored',
  'prompt.forked',
  'prompt.deleted',
  // identity
  'organization.created',
  'organization.updated',
  'member.added',
  'member.updated',
  'member.removed',
  'apiKey.created',
  'apiKey.revoked',
  'apiKey.renamed',
  'user.signed_in',
  'user.sign_in_failed',
  // webhooks
  'webhook.created',
  'webhook.updated',
  'webhook.deleted',
  'webhook.secret_rotated',
  // runs (provider connections)
  'connection.created',
  'connection.updated',
  'connection.deleted',
  // experiments (datasets, experiments)
  'dataset.created',
  'dataset.updated',
  'dataset.deleted',
  'dataset.items_added',
  'dataset.item_deleted',
  'experiment.created',
  'experiment.cancelled',
] as const
export type AuditAction = (typeof AUDIT_ACTIONS)[number]

export const AuditActionSchema = Type.Union(
  AUDIT_ACTIONS.map((a) => Type.Literal(a)),
  { $id: 'AuditAction', description: 'What was done; the list only grows.' },
)

export function isAuditAction(value: unknown): value is AuditAction {
  return typeof value === 'string' && (AUDIT_ACTIONS as readonly string[]).includes(value)
}

export const AuditEntry = Type.Object(
  {
    id: ObjectId,
    at: Timestamp,
    organizationId: ObjectId,
    actor: Type.Ref(AuditActor),
    /** For instance `prompt.published`, `environment.promoted`, `apiKey.revoked`, `webhook.created`. */
    action: Type.Ref(AuditActionSchema),
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
  /** One of AUDIT_ACTIONS (exact match; an unknown one matches nothing). */
  action: Type.Optional(Type.String({ minLength: 1, maxLength: 64, pattern: '^[a-zA-Z][a-zA-Z0-9_.-]*$' })),
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
