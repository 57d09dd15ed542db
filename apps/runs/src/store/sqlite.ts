import type { DatabaseSync, SQLInputValue } from 'node:sqlite'
import type { AuditEntry, Provider, RunRecord } from '@pm/contracts'
import {
  AUDIT_OUTBOX_SCHEMA,
  type AuditOutbox,
  closeSqlite,
  insertAuditOutbox,
  openSqlite,
  queryAll,
  queryOne,
  queryPage,
  type SqliteRow,
  sqliteAuditOutbox,
  statement,
  text,
  textOrNull,
  transaction,
  resealColumns,
} from '@pm/kit'
import type { ConnectionPatch, ConnectionRecord, Page, RunStore } from './types.ts'

const SCHEMA = [
  // Audit entries written with their change, until the relay has published them (DESIGN section 15).
  ...AUDIT_OUTBOX_SCHEMA,
  `CREATE TABLE IF NOT EXISTS connections (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, name TEXT NOT NULL, provider TEXT NOT NULL,
    base_url TEXT, sealed_key TEXT NOT NULL, key_hint TEXT NOT NULL, models TEXT NOT NULL,
    sealed_headers TEXT, header_names TEXT NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)`,
  'CREATE INDEX IF NOT EXISTS connections_org ON connections(organization_id, created_at)',
  // One JSON document per run: the log is read whole, never queried inside.
  `CREATE TABLE IF NOT EXISTS runs (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, prompt_id TEXT NOT NULL,
    created_at TEXT NOT NULL, doc TEXT NOT NULL)`,
  'CREATE INDEX IF NOT EXISTS runs_prompt ON runs(organization_id, prompt_id, created_at DESC, id DESC)',
  'CREATE INDEX IF NOT EXISTS runs_created ON runs(created_at)',
]

const COLUMNS: Record<Exclude<keyof ConnectionPatch, 'updatedAt'>, string> = {
  name: 'name',
  baseUrl: 'base_url',
  sealedKey: 'sealed_key',
  keyHint: 'key_hint',
  models: 'models',
  sealedHeaders: 'sealed_headers',
  headerNames: 'header_names',
}

function toConnection(r: SqliteRow): ConnectionRecord {
  return {
    _id: text(r.id),
    organizationId: text(r.organization_id),
    name: text(r.name),
    provider: text(r.provider) as Provider,
    baseUrl: textOrNull(r.base_url),
    sealedKey: text(r.sealed_key),
    keyHint: text(r.key_hint),
    models: JSON.parse(text(r.models)) as string[],
    sealedHeaders: textOrNull(r.sealed_headers),
    headerNames: JSON.parse(text(r.header_names)) as string[],
    createdAt: text(r.created_at),
    updatedAt: text(r.updated_at),
  }
}

const toRun = (r: SqliteRow): RunRecord => JSON.parse(text(r.doc)) as RunRecord

export class SqliteRunStore implements RunStore {
  private readonly db: DatabaseSync
  private readonly outbox: AuditOutbox

  constructor(file: string) {
    this.db = openSqlite(file, SCHEMA)
    this.outbox = sqliteAuditOutbox(() => this.db)
  }

  pendingAudit(limit: number): Promise<AuditEntry[]> {
    return this.outbox.pendingAudit(limit)
  }
  markAuditSent(ids: string[], at: string): Promise<void> {
    return this.outbox.markAuditSent(ids, at)
  }
  pruneAuditOutbox(before: string): Promise<number> {
    return this.outbox.pruneAuditOutbox(before)
  }

  async insertConnection(
    c: ConnectionRecord,
    maxPerOrganization: number,
    audit: AuditEntry[] = [],
  ): Promise<boolean> {
    return transaction(this.db, () => {
      const held = queryOne(
        this.db,
        'SELECT COUNT(*) AS n FROM connections WHERE organization_id = ?',
        c.organizationId,
      )
      if (Number(held?.n ?? 0) >= maxPerOrganization) return false
      this.db
        .prepare(
          `INSERT INTO connections (id, organization_id, name, provider, base_url, sealed_key, key_hint, models,
           sealed_headers, header_names, created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          c._id,
          c.organizationId,
          c.name,
          c.provider,
          c.baseUrl,
          c.sealedKey,
          c.keyHint,
          JSON.stringify(c.models),
          c.sealedHeaders,
          JSON.stringify(c.headerNames),
          c.createdAt,
          c.updatedAt,
        )
      insertAuditOutbox(this.db, audit)
      return true
    })
  }

  async listConnections(organizationId: string): Promise<ConnectionRecord[]> {
    return queryAll(
      this.db,
      'SELECT * FROM connections WHERE organization_id = ? ORDER BY created_at, id',
      organizationId,
    ).map(toConnection)
  }

  async getConnection(organizationId: string, id: string): Promise<ConnectionRecord | null> {
    const row = queryOne(
      this.db,
      'SELECT * FROM connections WHERE id = ? AND organization_id = ?',
      id,
      organizationId,
    )
    return row ? toConnection(row) : null
  }

  async updateConnection(
    organizationId: string,
    id: string,
    patch: ConnectionPatch,
    audit: AuditEntry[] = [],
  ): Promise<ConnectionRecord | null> {
    const sets = ['updated_at = ?']
    const values: SQLInputValue[] = [patch.updatedAt]
    for (const [field, column] of Object.entries(COLUMNS) as [keyof typeof COLUMNS, string][]) {
      const value = patch[field]
      if (value === undefined) continue
      sets.push(`${column} = ?`)
      values.push(Array.isArray(value) ? JSON.stringify(value) : value)
    }
    return transaction(this.db, () => {
      const result = this.db
        .prepare(`UPDATE connections SET ${sets.join(', ')} WHERE id = ? AND organization_id = ?`)
        .run(...values, id, organizationId)
      if (result.changes === 0) return null
      insertAuditOutbox(this.db, audit)
      const row = queryOne(this.db, 'SELECT * FROM connections WHERE id = ?', id)
      return row ? toConnection(row) : null
    })
  }

  async deleteConnection(organizationId: string, id: string, audit: AuditEntry[] = []): Promise<boolean> {
    return transaction(this.db, () => {
      const result = this.db
        .prepare('DELETE FROM connections WHERE id = ? AND organization_id = ?')
        .run(id, organizationId)
      if (result.changes === 0) return false
      insertAuditOutbox(this.db, audit)
      return true
    })
  }

  async insertRun(run: RunRecord): Promise<void> {
    statement(
      this.db,
      'INSERT INTO runs (id, organization_id, prompt_id, created_at, doc) VALUES (?, ?, ?, ?, ?)',
    ).run(run._id, run.organizationId, run.prompt.promptId, run.createdAt, JSON.stringify(run))
  }

  async listRuns(
    organizationId: string,
    promptId: string,
    page: number,
    limit: number,
  ): Promise<Page<RunRecord>> {
    const { rows, total } = queryPage(
      this.db,
      'runs',
      ['organization_id = ?', 'prompt_id = ?'],
      [organizationId, promptId],
      { page, limit },
    )
    return { items: rows.map(toRun), total }
  }

  async getRun(organizationId: string, id: string): Promise<RunRecord | null> {
    const row = queryOne(
      this.db,
      'SELECT doc FROM runs WHERE id = ? AND organization_id = ?',
      id,
      organizationId,
    )
    return row ? toRun(row) : null
  }

  async deleteRunsBefore(before: string): Promise<number> {
    return Number(this.db.prepare('DELETE FROM runs WHERE created_at < ?').run(before).changes)
  }

  async resealConnections(reseal: (id: string, stored: string) => string | null): Promise<number> {
    return resealColumns(this.db, 'connections', 'sealed_key', 'sealed_headers', reseal)
  }

  async check(): Promise<void> {
    queryOne(this.db, 'SELECT 1 AS ok')
  }

  async close(): Promise<void> {
    closeSqlite(this.db)
  }
}
