import type { DatabaseSync, SQLInputValue } from 'node:sqlite'
import {
  closeSqlite,
  isUniqueViolation,
  openSqlite,
  queryAll,
  queryOne,
  queryPage,
  type SqliteRow,
  text,
  textOrNull,
  transaction,
} from '@pm/kit'
import type { AuditEntry, EnvironmentName, ImportRowError } from '@pm/contracts'
import {
  type ChangeEvents,
  DuplicateImportError,
  DuplicateSlugError,
  type ImportBatchRecord,
  type AuditCursor,
  type AuditFilter,
  type EnvHistoryRecord,
  type PinWrite,
  type ImportStep,
  type SplitCount,
  LeaseLostError,
  type OutboxRecord,
  type Page,
  type PromptFilter,
  type PromptPatch,
  type PromptRecord,
  type PromptStore,
  type VersionBuilder,
  type VersionRecord,
  uniqueWrites,
} from './types.ts'

const SCHEMA = [
  `CREATE TABLE IF NOT EXISTS prompts (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, name TEXT NOT NULL, slug TEXT NOT NULL,
    description TEXT NOT NULL, tags TEXT NOT NULL, template TEXT NOT NULL, variables TEXT NOT NULL,
    is_public INTEGER NOT NULL, version_count INTEGER NOT NULL, current_version_id TEXT,
    forked_from_version_id TEXT, environments TEXT NOT NULL, created_by TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, UNIQUE (organization_id, slug))`,
  'CREATE INDEX IF NOT EXISTS prompts_org_created ON prompts(organization_id, created_at DESC)',
  'CREATE INDEX IF NOT EXISTS prompts_public ON prompts(is_public, current_version_id)',
  `CREATE TABLE IF NOT EXISTS versions (
    id TEXT PRIMARY KEY, prompt_id TEXT NOT NULL, organization_id TEXT NOT NULL, version INTEGER NOT NULL,
    status TEXT NOT NULL, published_at TEXT NOT NULL, template TEXT NOT NULL, variables TEXT NOT NULL,
    created_by TEXT NOT NULL, change_log TEXT NOT NULL, UNIQUE (prompt_id, version))`,
  `CREATE TABLE IF NOT EXISTS outbox (
    id TEXT PRIMARY KEY, subject TEXT NOT NULL, msg_id TEXT NOT NULL, payload TEXT NOT NULL,
    created_at TEXT NOT NULL, sent_at TEXT)`,
  'CREATE INDEX IF NOT EXISTS outbox_pending ON outbox(sent_at, created_at)',
  `CREATE TABLE IF NOT EXISTS import_batches (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, created_by TEXT NOT NULL, status TEXT NOT NULL,
    total INTEGER NOT NULL, created INTEGER NOT NULL, failed INTEGER NOT NULL, errors TEXT NOT NULL,
    created_at TEXT NOT NULL, updated_at TEXT NOT NULL, finished_at TEXT)`,
  // An import's file, kept while its batch runs so that another process can resume it.
  'CREATE TABLE IF NOT EXISTS import_files (batch_id TEXT PRIMARY KEY, content BLOB NOT NULL)',
]

/**
 * Changes to the tables above, applied once each, in order (PRAGMA user_version counts them).
 * A database of any age, new ones included, goes through the same steps.
 */
const MIGRATIONS: string[][] = [
  // 1. Chat prompts and config (DESIGN section 9): existing prompts and versions are text, with no config.
  [
    "ALTER TABLE prompts ADD COLUMN type TEXT NOT NULL DEFAULT 'text'",
    'ALTER TABLE prompts ADD COLUMN messages TEXT',
    'ALTER TABLE prompts ADD COLUMN config TEXT',
    "ALTER TABLE versions ADD COLUMN type TEXT NOT NULL DEFAULT 'text'",
    'ALTER TABLE versions ADD COLUMN messages TEXT',
    'ALTER TABLE versions ADD COLUMN config TEXT',
  ],
  // 2. Resumable imports (issue 21): a batch's position, lease, resume time, file hash and
  // Idempotency-Key (files written before read as never resumed, with no hash or key).
  [
    'ALTER TABLE import_batches ADD COLUMN resumed_at TEXT',
    'ALTER TABLE import_batches ADD COLUMN position INTEGER NOT NULL DEFAULT 0',
    'ALTER TABLE import_batches ADD COLUMN content_hash TEXT',
    'ALTER TABLE import_batches ADD COLUMN idempotency_key TEXT',
    'ALTER TABLE import_batches ADD COLUMN lease_owner TEXT',
    'ALTER TABLE import_batches ADD COLUMN lease_until TEXT',
    `CREATE UNIQUE INDEX import_batches_hash ON import_batches(organization_id, content_hash)
     WHERE content_hash IS NOT NULL`,
    `CREATE UNIQUE INDEX import_batches_key ON import_batches(organization_id, created_by, idempotency_key)
     WHERE idempotency_key IS NOT NULL`,
    'CREATE INDEX import_batches_lease ON import_batches(status, lease_until)',
  ],
  // 3. The trace context of the request that wrote an outbox event (its publish continues that trace, issue 18).
  ['ALTER TABLE outbox ADD COLUMN trace_headers TEXT'],
  // 4. Release safety (issue 29): each environment's history, and invocations per split variant.
  [
    `CREATE TABLE env_history (
      id TEXT PRIMARY KEY, prompt_id TEXT NOT NULL, organization_id TEXT NOT NULL, environment TEXT NOT NULL,
      version_id TEXT NOT NULL, version INTEGER NOT NULL, split TEXT, promoted_by TEXT NOT NULL,
      promoted_by_type TEXT NOT NULL, promoted_at TEXT NOT NULL)`,
    'CREATE INDEX env_history_prompt ON env_history(prompt_id, environment, promoted_at DESC, id DESC)',
    `CREATE TABLE split_counts (
      split_id TEXT NOT NULL, variant INTEGER NOT NULL, count INTEGER NOT NULL, PRIMARY KEY (split_id, variant))`,
    // The audit log: entries copied from the outbox by the relay (written there with their change).
    `CREATE TABLE audit_log (
      id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, at TEXT NOT NULL, actor_type TEXT NOT NULL,
      actor_id TEXT NOT NULL, actor_name TEXT NOT NULL, action TEXT NOT NULL, resource_type TEXT NOT NULL,
      resource_id TEXT NOT NULL, request_id TEXT NOT NULL, ip TEXT NOT NULL, summary TEXT NOT NULL)`,
    'CREATE INDEX audit_log_org ON audit_log(organization_id, at DESC, id DESC)',
    'CREATE INDEX audit_log_at ON audit_log(at)',
  ],
]

function migrate(db: DatabaseSync): void {
  // The version is read under the write lock: two processes opening one file apply each step once.
  for (;;) {
    const done = transaction(db, () => {
      const current = Number(queryOne(db, 'PRAGMA user_version')?.user_version ?? 0)
      const step = MIGRATIONS[current]
      if (!step) return true
      for (const statement of step) db.exec(statement)
      db.exec(`PRAGMA user_version = ${current + 1}`)
      return false
    })
    if (done) return
  }
}

type Row = SqliteRow
const s = text

const json = (v: unknown): string | null => (v === undefined || v === null ? null : JSON.stringify(v))

/** The content columns added by migration 1: type, and messages and config when set. */
function contentOf(r: Row): Pick<PromptRecord, 'type' | 'messages' | 'config'> {
  return {
    type: r.type === 'chat' ? 'chat' : 'text',
    ...(r.messages ? { messages: JSON.parse(s(r.messages)) as PromptRecord['messages'] } : {}),
    ...(r.config ? { config: JSON.parse(s(r.config)) as PromptRecord['config'] } : {}),
  }
}

function toPrompt(r: Row): PromptRecord {
  return {
    _id: s(r.id),
    organizationId: s(r.organization_id),
    name: s(r.name),
    slug: s(r.slug),
    description: s(r.description),
    tags: JSON.parse(s(r.tags)) as string[],
    template: s(r.template),
    variables: JSON.parse(s(r.variables)) as PromptRecord['variables'],
    ...contentOf(r),
    isPublic: r.is_public === 1,
    versionCount: Number(r.version_count),
    currentVersionId: r.current_version_id === null ? null : s(r.current_version_id),
    ...(r.forked_from_version_id ? { forkedFromVersionId: s(r.forked_from_version_id) } : {}),
    environments: JSON.parse(s(r.environments)) as PromptRecord['environments'],
    createdBy: s(r.created_by),
    createdAt: s(r.created_at),
    updatedAt: s(r.updated_at),
  }
}

function toVersion(r: Row): VersionRecord {
  return {
    _id: s(r.id),
    promptId: s(r.prompt_id),
    organizationId: s(r.organization_id),
    version: Number(r.version),
    status: s(r.status) as VersionRecord['status'],
    publishedAt: s(r.published_at),
    template: s(r.template),
    variables: JSON.parse(s(r.variables)) as VersionRecord['variables'],
    ...contentOf(r),
    createdBy: JSON.parse(s(r.created_by)) as VersionRecord['createdBy'],
    changeLog: s(r.change_log),
  }
}

function toOutbox(r: Row): OutboxRecord {
  return {
    _id: s(r.id),
    subject: s(r.subject),
    msgId: s(r.msg_id),
    payload: JSON.parse(s(r.payload)),
    createdAt: s(r.created_at),
    sentAt: r.sent_at === null ? null : s(r.sent_at),
    traceHeaders:
      typeof r.trace_headers === 'string' ? (JSON.parse(r.trace_headers) as Record<string, string>) : null,
  }
}

function toBatch(r: Row): ImportBatchRecord {
  return {
    _id: s(r.id),
    organizationId: s(r.organization_id),
    createdBy: s(r.created_by),
    status: s(r.status) as ImportBatchRecord['status'],
    total: Number(r.total),
    created: Number(r.created),
    failed: Number(r.failed),
    errors: JSON.parse(s(r.errors)) as ImportBatchRecord['errors'],
    createdAt: s(r.created_at),
    updatedAt: s(r.updated_at),
    finishedAt: textOrNull(r.finished_at),
    resumedAt: textOrNull(r.resumed_at),
    position: Number(r.position),
    contentHash: textOrNull(r.content_hash),
    idempotencyKey: textOrNull(r.idempotency_key),
    leaseOwner: textOrNull(r.lease_owner),
    leaseUntil: textOrNull(r.lease_until),
  }
}

const escapeLike = (v: string) => v.replace(/[\\%_]/g, (c) => `\\${c}`)

const unique = uniqueWrites(isUniqueViolation)

/** The WHERE clause of an audit log query (exact matches, an inclusive time range). */
function auditWhere(filter: AuditFilter): { clause: string; params: SQLInputValue[] } {
  const where = ['organization_id = ?']
  const params: SQLInputValue[] = [filter.organizationId]
  if (filter.actor !== undefined) {
    where.push('actor_id = ?')
    params.push(filter.actor)
  }
  if (filter.action !== undefined) {
    where.push('action = ?')
    params.push(filter.action)
  }
  if (filter.resourceId !== undefined) {
    where.push('resource_id = ?')
    params.push(filter.resourceId)
  }
  if (filter.from !== undefined) {
    where.push('at >= ?')
    params.push(filter.from)
  }
  if (filter.to !== undefined) {
    where.push('at <= ?')
    params.push(filter.to)
  }
  return { clause: where.join(' AND '), params }
}

function auditOf(r: Row): AuditEntry {
  return {
    id: s(r.id),
    at: s(r.at),
    organizationId: s(r.organization_id),
    actor: {
      type: r.actor_type === 'apiKey' ? 'apiKey' : 'user',
      id: s(r.actor_id),
      name: s(r.actor_name),
    },
    action: s(r.action) as AuditEntry['action'],
    resource: { type: s(r.resource_type), id: s(r.resource_id) },
    requestId: s(r.request_id),
    ip: s(r.ip),
    summary: s(r.summary),
  }
}

export class SqlitePromptStore implements PromptStore {
  private readonly db: DatabaseSync

  constructor(file: string) {
    this.db = openSqlite(file, SCHEMA)
    migrate(this.db)
  }

  private insertPrompt(p: PromptRecord): void {
    this.db
      .prepare(
        `INSERT INTO prompts (id, organization_id, name, slug, description, tags, template, variables, is_public,
         version_count, current_version_id, forked_from_version_id, environments, created_by, created_at, updated_at,
         type, messages, config)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        p._id,
        p.organizationId,
        p.name,
        p.slug,
        p.description,
        JSON.stringify(p.tags),
        p.template,
        JSON.stringify(p.variables),
        p.isPublic ? 1 : 0,
        p.versionCount,
        p.currentVersionId,
        p.forkedFromVersionId ?? null,
        JSON.stringify(p.environments),
        p.createdBy,
        p.createdAt,
        p.updatedAt,
        p.type,
        json(p.messages),
        json(p.config),
      )
  }

  private insertVersion(v: VersionRecord): void {
    this.db
      .prepare(
        `INSERT INTO versions (id, prompt_id, organization_id, version, status, published_at, template, variables,
         created_by, change_log, type, messages, config) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
      )
      .run(
        v._id,
        v.promptId,
        v.organizationId,
        v.version,
        v.status,
        v.publishedAt,
        v.template,
        JSON.stringify(v.variables),
        JSON.stringify(v.createdBy),
        v.changeLog,
        v.type,
        json(v.messages),
        json(v.config),
      )
  }

  private insertOutbox(o: OutboxRecord): void {
    this.db
      .prepare(
        'INSERT INTO outbox (id, subject, msg_id, payload, created_at, sent_at, trace_headers) VALUES (?, ?, ?, ?, ?, ?, ?)',
      )
      .run(
        o._id,
        o.subject,
        o.msgId,
        JSON.stringify(o.payload),
        o.createdAt,
        o.sentAt,
        o.traceHeaders ? JSON.stringify(o.traceHeaders) : null,
      )
  }

  async createPrompt(p: PromptRecord, outbox: OutboxRecord[] = []): Promise<void> {
    await unique(DuplicateSlugError, () =>
      transaction(this.db, () => {
        this.insertPrompt(p)
        for (const o of outbox) this.insertOutbox(o)
      }),
    )
  }

  /** Inserts an entry unless its id is known (a relayed or copied entry may come twice). */
  private insertAudit(e: AuditEntry): void {
    this.db
      .prepare(
        `INSERT INTO audit_log (id, organization_id, at, actor_type, actor_id, actor_name, action, resource_type,
         resource_id, request_id, ip, summary) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING`,
      )
      .run(
        e.id,
        e.organizationId,
        e.at,
        e.actor.type,
        e.actor.id,
        e.actor.name,
        e.action,
        e.resource.type,
        e.resource.id,
        e.requestId,
        e.ip,
        e.summary,
      )
  }

  async recordAudit(row: OutboxRecord, at: string): Promise<void> {
    transaction(this.db, () => {
      this.insertAudit(row.payload as AuditEntry)
      this.db.prepare('UPDATE outbox SET sent_at = ? WHERE id = ?').run(at, row._id)
    })
  }

  async ingestAudit(entry: AuditEntry): Promise<void> {
    this.insertAudit(entry)
  }

  async listAudit(filter: AuditFilter, page: Page): Promise<{ entries: AuditEntry[]; total: number }> {
    const { clause, params } = auditWhere(filter)
    const rows = this.db
      .prepare(`SELECT * FROM audit_log WHERE ${clause} ORDER BY at DESC, id DESC LIMIT ? OFFSET ?`)
      .all(...params, page.limit, (page.page - 1) * page.limit) as Row[]
    const total = Number(
      queryOne(this.db, `SELECT COUNT(*) AS n FROM audit_log WHERE ${clause}`, ...params)?.n ?? 0,
    )
    return { entries: rows.map(auditOf), total }
  }

  async auditPage(filter: AuditFilter, after: AuditCursor | null, limit: number): Promise<AuditEntry[]> {
    const { clause, params } = auditWhere(filter)
    // A row value against the last entry read: the index (organization_id, at DESC, id DESC) seeks to it.
    const rows = after
      ? (this.db
          .prepare(
            `SELECT * FROM audit_log WHERE ${clause} AND (at, id) < (?, ?) ORDER BY at DESC, id DESC LIMIT ?`,
          )
          .all(...params, after.at, after.id, limit) as Row[])
      : (this.db
          .prepare(`SELECT * FROM audit_log WHERE ${clause} ORDER BY at DESC, id DESC LIMIT ?`)
          .all(...params, limit) as Row[])
    return rows.map(auditOf)
  }

  async pruneAudit(before: string): Promise<number> {
    return Number(this.db.prepare('DELETE FROM audit_log WHERE at < ?').run(before).changes)
  }

  /** The row of `table` whose columns match `where`, read by `map`; null when there is none. */
  private findOne<T>(table: string, map: (r: Row) => T, where: string, ...params: SQLInputValue[]): T | null {
    const r = queryOne(this.db, `SELECT * FROM ${table} WHERE ${where}`, ...params)
    return r ? map(r) : null
  }

  /** The workspace's prompt `id`, as this connection sees it now (inside a transaction or not). */
  private findPrompt(organizationId: string, id: string): PromptRecord | null {
    return this.findOne('prompts', toPrompt, 'id = ? AND organization_id = ?', id, organizationId)
  }

  async getPrompt(organizationId: string, id: string): Promise<PromptRecord | null> {
    return this.findPrompt(organizationId, id)
  }

  async getPromptById(id: string): Promise<PromptRecord | null> {
    return this.findOne('prompts', toPrompt, 'id = ?', id)
  }

  async getPromptBySlug(organizationId: string, slug: string): Promise<PromptRecord | null> {
    return this.findOne('prompts', toPrompt, 'organization_id = ? AND slug = ?', organizationId, slug)
  }

  async slugsStartingWith(organizationId: string, prefix: string): Promise<string[]> {
    // GLOB is case-sensitive and, with a pattern that starts with literal text, a range on the
    // (organization_id, slug) unique index. Its wildcards in the prefix are bracketed.
    const pattern = `${prefix.replace(/[*?[]/g, '[$&]')}*`
    return queryAll(
      this.db,
      'SELECT slug FROM prompts WHERE organization_id = ? AND slug GLOB ?',
      organizationId,
      pattern,
    ).map((r) => String(r.slug))
  }

  async isSlugTaken(organizationId: string, slug: string): Promise<boolean> {
    return (
      queryOne(
        this.db,
        'SELECT 1 AS x FROM prompts WHERE organization_id = ? AND slug = ?',
        organizationId,
        slug,
      ) !== undefined
    )
  }

  /** One page of the prompts matching every condition of `where`, newest first, and their count. */
  private page(
    where: string[],
    params: SQLInputValue[],
    page: Page,
  ): { prompts: PromptRecord[]; total: number } {
    const { rows, total } = queryPage(this.db, 'prompts', where, params, page)
    return { prompts: rows.map(toPrompt), total }
  }

  async listPrompts(filter: PromptFilter, page: Page): Promise<{ prompts: PromptRecord[]; total: number }> {
    const where = ['organization_id = ?']
    const params: SQLInputValue[] = [filter.organizationId]
    if (filter.search) {
      where.push("(name LIKE ? ESCAPE '\\' OR description LIKE ? ESCAPE '\\' OR slug LIKE ? ESCAPE '\\')")
      const like = `%${escapeLike(filter.search)}%`
      params.push(like, like, like)
    }
    if (filter.tags && filter.tags.length > 0) {
      where.push(
        `EXISTS (SELECT 1 FROM json_each(prompts.tags) WHERE value IN (${filter.tags.map(() => '?').join(', ')}))`,
      )
      params.push(...filter.tags)
    }
    if (filter.visibility === 'public') where.push('is_public = 1')
    if (filter.visibility === 'private') where.push('is_public = 0')
    return this.page(where, params, page)
  }

  async summary(organizationId: string): Promise<{ total: number; public: number; published: number }> {
    const r = queryOne(
      this.db,
      `SELECT COUNT(*) AS total, COALESCE(SUM(is_public), 0) AS public,
       COALESCE(SUM(CASE WHEN current_version_id IS NOT NULL THEN 1 ELSE 0 END), 0) AS published
       FROM prompts WHERE organization_id = ?`,
      organizationId,
    )
    return {
      total: Number(r?.total ?? 0),
      public: Number(r?.public ?? 0),
      published: Number(r?.published ?? 0),
    }
  }

  async listPublic(
    search: string | undefined,
    page: Page,
  ): Promise<{ prompts: PromptRecord[]; total: number }> {
    const where = ['is_public = 1', 'current_version_id IS NOT NULL']
    const params: SQLInputValue[] = []
    if (search) {
      where.push("(name LIKE ? ESCAPE '\\' OR description LIKE ? ESCAPE '\\')")
      const like = `%${escapeLike(search)}%`
      params.push(like, like)
    }
    return this.page(where, params, page)
  }

  async updatePrompt(
    organizationId: string,
    id: string,
    patch: PromptPatch,
    events?: ChangeEvents,
    expectedUpdatedAt?: string,
  ): Promise<PromptRecord | null> {
    const columns: Record<string, (v: unknown) => SQLInputValue> = {
      name: (v) => s(v),
      slug: (v) => s(v),
      description: (v) => s(v),
      tags: (v) => JSON.stringify(v),
      template: (v) => s(v),
      messages: (v) => json(v),
      variables: (v) => JSON.stringify(v),
      config: (v) => json(v),
      isPublic: (v) => (v ? 1 : 0),
      environments: (v) => JSON.stringify(v),
      updatedAt: (v) => s(v),
    }
    const names: Record<string, string> = { isPublic: 'is_public', updatedAt: 'updated_at' }
    const sets: string[] = []
    const params: SQLInputValue[] = []
    for (const [key, value] of Object.entries(patch)) {
      const encode = columns[key]
      if (!encode || value === undefined) continue
      sets.push(`${names[key] ?? key} = ?`)
      params.push(encode(value))
    }
    const write = (): PromptRecord | null => {
      const before = events ? this.findPrompt(organizationId, id) : null
      const unchanged = expectedUpdatedAt === undefined ? '' : ' AND updated_at = ?'
      const result = this.db
        .prepare(`UPDATE prompts SET ${sets.join(', ')} WHERE id = ? AND organization_id = ?${unchanged}`)
        .run(...params, id, organizationId, ...(expectedUpdatedAt === undefined ? [] : [expectedUpdatedAt]))
      if (result.changes === 0) return null
      const after = this.findPrompt(organizationId, id)
      if (after && events && before) for (const o of events(before, after)) this.insertOutbox(o)
      return after
    }
    return unique(DuplicateSlugError, () => (events ? transaction(this.db, write) : write()))
  }

  async deletePrompt(
    organizationId: string,
    id: string,
    event?: (deleted: PromptRecord) => OutboxRecord,
  ): Promise<PromptRecord | null> {
    return transaction(this.db, () => {
      const deleted = this.findPrompt(organizationId, id)
      if (!deleted) return null
      this.db.prepare('DELETE FROM prompts WHERE id = ? AND organization_id = ?').run(id, organizationId)
      this.db.prepare('DELETE FROM versions WHERE prompt_id = ?').run(id)
      this.db.prepare('DELETE FROM env_history WHERE prompt_id = ?').run(id)
      if (event) for (const o of [event(deleted)].flat()) this.insertOutbox(o)
      return deleted
    })
  }

  async setPin(
    organizationId: string,
    id: string,
    env: EnvironmentName,
    build: (stored: PromptRecord) => PinWrite,
  ): Promise<PromptRecord | null> {
    // BEGIN IMMEDIATE: the write lock is held from the read on, so no other process promotes
    // between the stored pin that `build` dates from and the write.
    return transaction(this.db, () => {
      const stored = this.findPrompt(organizationId, id)
      if (!stored) return null
      const { pin, events, history } = build(stored)
      // json_set on the one key: a concurrent promote of the other environment is not overwritten.
      this.db
        .prepare(
          // max(): never back to an earlier updatedAt (a save's compare-and-set would then match
          // a draft it read before another save, and undo that save).
          `UPDATE prompts SET environments = json_set(environments, ?, json(?)), updated_at = max(updated_at, ?)
           WHERE id = ? AND organization_id = ?`,
        )
        .run(`$.${env}`, JSON.stringify(pin), pin.promotedAt, id, organizationId)
      const after = this.findPrompt(organizationId, id)
      if (after && events) for (const o of events(after)) this.insertOutbox(o)
      if (after && history) {
        this.db
          .prepare(
            `INSERT INTO env_history (id, prompt_id, organization_id, environment, version_id, version, split,
             promoted_by, promoted_by_type, promoted_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(
            history._id,
            history.promptId,
            history.organizationId,
            history.environment,
            history.versionId,
            history.version,
            json(history.split),
            history.promotedBy,
            history.promotedByType,
            history.promotedAt,
          )
      }
      return after
    })
  }

  async listEnvHistory(
    promptId: string,
    env: EnvironmentName,
    page: Page,
  ): Promise<{ entries: EnvHistoryRecord[]; total: number }> {
    const rows = this.db
      .prepare(
        `SELECT * FROM env_history WHERE prompt_id = ? AND environment = ?
         ORDER BY promoted_at DESC, id DESC LIMIT ? OFFSET ?`,
      )
      .all(promptId, env, page.limit, (page.page - 1) * page.limit) as Row[]
    const total = Number(
      queryOne(
        this.db,
        'SELECT COUNT(*) AS n FROM env_history WHERE prompt_id = ? AND environment = ?',
        promptId,
        env,
      )?.n ?? 0,
    )
    return {
      entries: rows.map((r) => ({
        _id: s(r.id),
        promptId: s(r.prompt_id),
        organizationId: s(r.organization_id),
        environment: s(r.environment) as EnvironmentName,
        versionId: s(r.version_id),
        version: Number(r.version),
        ...(r.split ? { split: JSON.parse(s(r.split)) as EnvHistoryRecord['split'] } : {}),
        promotedBy: s(r.promoted_by),
        promotedByType: r.promoted_by_type === 'apiKey' ? 'apiKey' : 'user',
        promotedAt: s(r.promoted_at),
      })),
      total,
    }
  }

  async addSplitCounts(counts: SplitCount[]): Promise<void> {
    if (counts.length === 0) return
    transaction(this.db, () => {
      const add = this.db.prepare(
        `INSERT INTO split_counts (split_id, variant, count) VALUES (?, ?, ?)
         ON CONFLICT (split_id, variant) DO UPDATE SET count = count + excluded.count`,
      )
      for (const c of counts) add.run(c.splitId, c.variant, c.count)
    })
  }

  async splitCounts(splitIds: string[]): Promise<Map<string, number[]>> {
    const found = new Map<string, number[]>()
    if (splitIds.length === 0) return found
    const rows = this.db
      .prepare(`SELECT * FROM split_counts WHERE split_id IN (${splitIds.map(() => '?').join(', ')})`)
      .all(...splitIds) as Row[]
    for (const r of rows) {
      const id = s(r.split_id)
      const list = found.get(id) ?? []
      list[Number(r.variant)] = Number(r.count)
      found.set(id, list)
    }
    return found
  }

  async publish(
    organizationId: string,
    promptId: string,
    build: VersionBuilder,
  ): Promise<VersionRecord | null> {
    // BEGIN IMMEDIATE takes the write lock first, so concurrent publishes are serialised
    // and each reads the count the previous one wrote.
    return transaction(this.db, () => {
      const prompt = this.findPrompt(organizationId, promptId)
      if (!prompt) return null
      const { version, outbox, extra } = build(prompt, prompt.versionCount + 1)
      this.insertVersion(version)
      this.db
        // max(): never back to an earlier updatedAt (setEnvironment).
        .prepare(
          'UPDATE prompts SET version_count = ?, current_version_id = ?, updated_at = max(updated_at, ?) WHERE id = ?',
        )
        .run(version.version, version._id, version.publishedAt, promptId)
      this.insertOutbox(outbox)
      for (const o of extra ?? []) this.insertOutbox(o)
      return version
    })
  }

  async createWithVersion(
    prompt: PromptRecord,
    version: VersionRecord,
    outbox: OutboxRecord | OutboxRecord[],
  ): Promise<void> {
    await unique(DuplicateSlugError, () =>
      transaction(this.db, () => {
        this.insertPrompt(prompt)
        this.insertVersion(version)
        for (const o of [outbox].flat()) this.insertOutbox(o)
      }),
    )
  }

  async listVersions(promptId: string, order: 'version' | 'publishedAt'): Promise<VersionRecord[]> {
    const by = order === 'version' ? 'version DESC' : 'published_at DESC, version DESC'
    return queryAll(this.db, `SELECT * FROM versions WHERE prompt_id = ? ORDER BY ${by}`, promptId).map(
      toVersion,
    )
  }

  async getVersion(promptId: string, versionId: string): Promise<VersionRecord | null> {
    return this.findOne('versions', toVersion, 'id = ? AND prompt_id = ?', versionId, promptId)
  }

  async getVersionByNumber(promptId: string, version: number): Promise<VersionRecord | null> {
    return this.findOne('versions', toVersion, 'prompt_id = ? AND version = ?', promptId, version)
  }

  async listContaining(
    organizationId: string,
    needle: string,
    excludeId: string,
  ): Promise<Array<{ prompt: PromptRecord; current: VersionRecord | null }>> {
    const rows = queryAll(
      this.db,
      `SELECT p.* FROM prompts p LEFT JOIN versions v ON v.id = p.current_version_id
       WHERE p.organization_id = ? AND p.id <> ? AND (instr(p.template, ?) > 0 OR instr(v.template, ?) > 0)`,
      organizationId,
      excludeId,
      needle,
      needle,
    ).map(toPrompt)
    const ids = rows.flatMap((p) => (p.currentVersionId ? [p.currentVersionId] : []))
    const versions = new Map((await this.getVersionsByIds(ids)).map((v) => [v._id, v]))
    return rows.map((prompt) => ({
      prompt,
      current: prompt.currentVersionId ? (versions.get(prompt.currentVersionId) ?? null) : null,
    }))
  }

  async getVersionsByIds(ids: string[]): Promise<VersionRecord[]> {
    if (ids.length === 0) return []
    return queryAll(
      this.db,
      `SELECT * FROM versions WHERE id IN (${ids.map(() => '?').join(', ')})`,
      ...ids,
    ).map(toVersion)
  }

  async pendingOutbox(limit: number): Promise<OutboxRecord[]> {
    return queryAll(
      this.db,
      'SELECT * FROM outbox WHERE sent_at IS NULL ORDER BY created_at, id LIMIT ?',
      limit,
    ).map(toOutbox)
  }

  async markOutboxSent(id: string, at: string): Promise<void> {
    this.db.prepare('UPDATE outbox SET sent_at = ? WHERE id = ?').run(at, id)
  }

  async outboxBacklog(): Promise<{ count: number; oldestCreatedAt: string | null }> {
    const row = queryOne(
      this.db,
      'SELECT COUNT(*) AS n, MIN(created_at) AS oldest FROM outbox WHERE sent_at IS NULL',
    )
    return { count: Number(row?.n ?? 0), oldestCreatedAt: textOrNull(row?.oldest) }
  }

  async pruneOutbox(before: string): Promise<number> {
    const result = this.db.prepare('DELETE FROM outbox WHERE sent_at IS NOT NULL AND sent_at < ?').run(before)
    return Number(result.changes)
  }

  async createBatch(b: ImportBatchRecord, file: Buffer | null): Promise<void> {
    await unique(DuplicateImportError, () =>
      transaction(this.db, () => {
        this.db
          .prepare(
            `INSERT INTO import_batches (id, organization_id, created_by, status, total, created, failed, errors,
             created_at, updated_at, finished_at, resumed_at, position, content_hash, idempotency_key, lease_owner,
             lease_until) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
          )
          .run(
            b._id,
            b.organizationId,
            b.createdBy,
            b.status,
            b.total,
            b.created,
            b.failed,
            JSON.stringify(b.errors),
            b.createdAt,
            b.updatedAt,
            b.finishedAt,
            b.resumedAt,
            b.position,
            b.contentHash,
            b.idempotencyKey,
            b.leaseOwner,
            b.leaseUntil,
          )
        if (file)
          this.db.prepare('INSERT INTO import_files (batch_id, content) VALUES (?, ?)').run(b._id, file)
      }),
    )
  }

  async getBatch(organizationId: string, id: string): Promise<ImportBatchRecord | null> {
    return this.findOne('import_batches', toBatch, 'id = ? AND organization_id = ?', id, organizationId)
  }

  async findBatchByHash(organizationId: string, contentHash: string): Promise<ImportBatchRecord | null> {
    return this.findOne(
      'import_batches',
      toBatch,
      'organization_id = ? AND content_hash = ?',
      organizationId,
      contentHash,
    )
  }

  async findBatchByKey(
    organizationId: string,
    userId: string,
    key: string,
  ): Promise<ImportBatchRecord | null> {
    return this.findOne(
      'import_batches',
      toBatch,
      'organization_id = ? AND created_by = ? AND idempotency_key = ?',
      organizationId,
      userId,
      key,
    )
  }

  async forgetBatchKeys(id: string): Promise<void> {
    this.db
      .prepare('UPDATE import_batches SET content_hash = NULL, idempotency_key = NULL WHERE id = ?')
      .run(id)
  }

  async getImportFile(batchId: string): Promise<Buffer | null> {
    const r = queryOne(this.db, 'SELECT content FROM import_files WHERE batch_id = ?', batchId)
    return r?.content instanceof Uint8Array ? Buffer.from(r.content) : null
  }

  /** Moves the batch from `step.from` to `step.to` if `step.owner` still holds it; throws otherwise. */
  private advance(step: ImportStep, counts: string, params: SQLInputValue[]): void {
    const result = this.db
      .prepare(
        `UPDATE import_batches SET ${counts}, position = ?, updated_at = ?
         WHERE id = ? AND lease_owner = ? AND position = ? AND status = 'processing'`,
      )
      .run(...params, step.to, step.at, step.batchId, step.owner, step.from)
    if (result.changes !== 1) throw new LeaseLostError()
  }

  async importRows(step: ImportStep, prompts: PromptRecord[], errors: ImportRowError[]): Promise<void> {
    await unique(DuplicateSlugError, () =>
      transaction(this.db, () => {
        this.advance(step, 'created = created + ?, failed = failed + ?', [prompts.length, errors.length])
        // json_insert at '$[#]' appends in place: no read-modify-write of the list.
        const append = this.db.prepare(
          "UPDATE import_batches SET errors = json_insert(errors, '$[#]', json(?)) WHERE id = ?",
        )
        for (const error of errors) append.run(JSON.stringify(error), step.batchId)
        for (const prompt of prompts) this.insertPrompt(prompt)
      }),
    )
  }

  async finishBatch(
    batchId: string,
    owner: string,
    status: 'completed' | 'failed',
    at: string,
  ): Promise<void> {
    transaction(this.db, () => {
      const result = this.db
        .prepare(
          `UPDATE import_batches SET status = ?, finished_at = ?, updated_at = ?, lease_owner = NULL,
           lease_until = NULL WHERE id = ? AND lease_owner = ? AND status = 'processing'`,
        )
        .run(status, at, at, batchId, owner)
      if (result.changes !== 1) throw new LeaseLostError()
      this.db.prepare('DELETE FROM import_files WHERE batch_id = ?').run(batchId)
    })
  }

  async claimBatch(owner: string, at: string, until: string): Promise<ImportBatchRecord | null> {
    const findFree = () =>
      queryOne(
        this.db,
        `SELECT id FROM import_batches WHERE status = 'processing' AND (lease_until IS NULL OR lease_until < ?)
         ORDER BY created_at LIMIT 1`,
        at,
      )
    // Every process asks every IMPORT_POLL_MS: a plain read first, the write lock only when there is one.
    if (!findFree()) return null
    // BEGIN IMMEDIATE: two processes on one file cannot both take the same free batch.
    return transaction(this.db, () => {
      const free = findFree()
      if (!free) return null
      this.db
        .prepare(
          'UPDATE import_batches SET lease_owner = ?, lease_until = ?, resumed_at = ?, updated_at = ? WHERE id = ?',
        )
        .run(owner, until, at, at, s(free.id))
      return this.findOne('import_batches', toBatch, 'id = ?', s(free.id))
    })
  }

  async renewLease(batchId: string, owner: string, until: string): Promise<boolean> {
    const result = this.db
      .prepare(
        `UPDATE import_batches SET lease_until = ? WHERE id = ? AND lease_owner = ? AND status = 'processing'`,
      )
      .run(until, batchId, owner)
    return result.changes === 1
  }

  async releaseLease(batchId: string, owner: string): Promise<void> {
    this.db
      .prepare(
        'UPDATE import_batches SET lease_owner = NULL, lease_until = NULL WHERE id = ? AND lease_owner = ?',
      )
      .run(batchId, owner)
  }

  async check(): Promise<void> {
    queryOne(this.db, 'SELECT 1 AS ok')
  }

  async close(): Promise<void> {
    closeSqlite(this.db)
  }
}
