import type { AuditAction, AuditEntry } from '@pm/contracts'
import { type AuditContext, auditEntry } from '@pm/kit'
import type { OutboxRecord } from '../store/types.ts'

export type { AuditContext } from '@pm/kit'

/**
 * Audit entries (DESIGN section 15) travel as outbox rows: written in the transaction of their
 * change, they are copied into the audit log by the outbox relay (idempotently, by entry id).
 * So an entry exists exactly when its change committed, and a crash between the change and the
 * copy loses nothing: the row is still unsent at the next start. This subject never reaches the bus.
 */
export const AUDIT_SUBJECT = 'pm.audit.entry'

export function auditRow(
  ctx: AuditContext | undefined,
  organizationId: string,
  action: AuditAction,
  resource: { type: string; id: string },
  summary: string,
): OutboxRecord[] {
  if (!ctx) return []
  const entry = auditEntry(ctx, organizationId, action, resource, summary)
  return [
    {
      _id: entry.id,
      subject: AUDIT_SUBJECT,
      msgId: entry.id,
      payload: entry,
      createdAt: entry.at,
      sentAt: null,
    },
  ]
}

const CSV_COLUMNS = [
  'id',
  'at',
  'organizationId',
  'actorType',
  'actorId',
  'actorName',
  'action',
  'resourceType',
  'resourceId',
  'requestId',
  'ip',
  'summary',
] as const

/**
 * One CSV cell (RFC 4180 quoting). A cell a spreadsheet would run as a formula (starting with
 * = + - @, tab or carriage return) gets a leading `'` (OWASP's advice on CSV injection).
 */
export function csvCell(value: string): string {
  const safe = /^[=+\-@\t\r]/.test(value) ? `'${value}` : value
  return /[",\r\n']/.test(safe) || safe !== value ? `"${safe.replace(/"/g, '""')}"` : safe
}

export function csvHeader(): string {
  return `${CSV_COLUMNS.join(',')}\r\n`
}

export function csvLine(e: AuditEntry): string {
  const cells = [
    e.id,
    e.at,
    e.organizationId,
    e.actor.type,
    e.actor.id,
    e.actor.name,
    e.action,
    e.resource.type,
    e.resource.id,
    e.requestId,
    e.ip,
    e.summary,
  ]
  return `${cells.map(csvCell).join(',')}\r\n`
}

export function jsonLine(e: AuditEntry): string {
  return `${JSON.stringify(e)}\n`
}
