import type { DatabaseSync, SQLInputValue } from 'node:sqlite'
import { isUniqueViolation, openSqlite, transaction } from '@pm/kit'
import type { EnvironmentName, Pin } from '@pm/contracts'
import {
  DuplicateSlugError,
  type ImportBatchRecord,
  type ImportBatchUpdate,
  type OutboxRecord,
  type Page,
  type PromptFilter,
  type PromptPatch,
  type PromptRecord,
  type PromptStore,
  type VersionBuilder,
  type VersionRecord,
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
]

type Row = Record<string, SQLInputValue>
const s = (v: unknown): string => String(v)

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
    finishedAt: r.finished_at === null ? null : s(r.finished_at),
  }
}

const escapeLike = (v: string) => v.replace(/[\\%_]/g, (c) => `\\${c}`)

export class SqlitePromptStore implements PromptStore {
  private readonly db: DatabaseSync

  constructor(file: string) {
    this.db = openSqlite(file, SCHEMA)
  }

  private one(sql: string, ...params: SQLInputValue[]): Row | undefined {
    return this.db.prepare(sql).get(...params) as Row | undefined
  }
  private all(sql: string, ...params: SQLInputValue[]): Row[] {
    return this.db.prepare(sql).all(...params) as Row[]
  }

  private insertPrompt(p: PromptRecord): void {
    this.db
      .prepare(
        `INSERT INTO prompts (id, organization_id, name, slug, description, tags, template, variables, is_public,
         version_count, current_version_id, forked_from_version_id, environments, created_by, created_at, updated_at)
         VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
      )
  }

  private insertVersion(v: VersionRecord): void {
    this.db
      .prepare(
        `INSERT INTO versions (id, prompt_id, organization_id, version, status, published_at, template, variables,
         created_by, change_log) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
      )
  }

  private insertOutbox(o: OutboxRecord): void {
    this.db
      .prepare(
        'INSERT INTO outbox (id, subject, msg_id, payload, created_at, sent_at) VALUES (?, ?, ?, ?, ?, ?)',
      )
      .run(o._id, o.subject, o.msgId, JSON.stringify(o.payload), o.createdAt, o.sentAt)
  }

  async createPrompt(p: PromptRecord): Promise<void> {
    try {
      this.insertPrompt(p)
    } catch (err) {
      if (isUniqueViolation(err)) throw new DuplicateSlugError()
      throw err
    }
  }

  async getPrompt(organizationId: string, id: string): Promise<PromptRecord | null> {
    const r = this.one('SELECT * FROM prompts WHERE id = ? AND organization_id = ?', id, organizationId)
    return r ? toPrompt(r) : null
  }

  async getPromptById(id: string): Promise<PromptRecord | null> {
    const r = this.one('SELECT * FROM prompts WHERE id = ?', id)
    return r ? toPrompt(r) : null
  }

  async isSlugTaken(organizationId: string, slug: string): Promise<boolean> {
    return (
      this.one('SELECT 1 AS x FROM prompts WHERE organization_id = ? AND slug = ?', organizationId, slug) !==
      undefined
    )
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
    const clause = where.join(' AND ')
    const total = Number(this.one(`SELECT COUNT(*) AS n FROM prompts WHERE ${clause}`, ...params)?.n ?? 0)
    const rows = this.all(
      `SELECT * FROM prompts WHERE ${clause} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
      ...params,
      page.limit,
      (page.page - 1) * page.limit,
    )
    return { prompts: rows.map(toPrompt), total }
  }

  async summary(organizationId: string): Promise<{ total: number; public: number; published: number }> {
    const r = this.one(
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
    const clause = where.join(' AND ')
    const total = Number(this.one(`SELECT COUNT(*) AS n FROM prompts WHERE ${clause}`, ...params)?.n ?? 0)
    const rows = this.all(
      `SELECT * FROM prompts WHERE ${clause} ORDER BY created_at DESC, id DESC LIMIT ? OFFSET ?`,
      ...params,
      page.limit,
      (page.page - 1) * page.limit,
    )
    return { prompts: rows.map(toPrompt), total }
  }

  async updatePrompt(organizationId: string, id: string, patch: PromptPatch): Promise<PromptRecord | null> {
    const columns: Record<string, (v: unknown) => SQLInputValue> = {
      name: (v) => s(v),
      slug: (v) => s(v),
      description: (v) => s(v),
      tags: (v) => JSON.stringify(v),
      template: (v) => s(v),
      variables: (v) => JSON.stringify(v),
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
    try {
      const result = this.db
        .prepare(`UPDATE prompts SET ${sets.join(', ')} WHERE id = ? AND organization_id = ?`)
        .run(...params, id, organizationId)
      if (result.changes === 0) return null
    } catch (err) {
      if (isUniqueViolation(err)) throw new DuplicateSlugError()
      throw err
    }
    return this.getPrompt(organizationId, id)
  }

  async deletePrompt(organizationId: string, id: string): Promise<boolean> {
    return transaction(this.db, () => {
      const result = this.db
        .prepare('DELETE FROM prompts WHERE id = ? AND organization_id = ?')
        .run(id, organizationId)
      if (result.changes === 0) return false
      this.db.prepare('DELETE FROM versions WHERE prompt_id = ?').run(id)
      return true
    })
  }

  async setPin(
    organizationId: string,
    id: string,
    env: EnvironmentName,
    pin: Pin,
    updatedAt: string,
  ): Promise<PromptRecord | null> {
    // json_set on the one key: a concurrent promote of the other environment is not overwritten.
    const result = this.db
      .prepare(
        `UPDATE prompts SET environments = json_set(environments, ?, json(?)), updated_at = ?
         WHERE id = ? AND organization_id = ?`,
      )
      .run(`$.${env}`, JSON.stringify(pin), updatedAt, id, organizationId)
    if (result.changes === 0) return null
    return this.getPrompt(organizationId, id)
  }

  async publish(
    organizationId: string,
    promptId: string,
    build: VersionBuilder,
  ): Promise<VersionRecord | null> {
    // BEGIN IMMEDIATE takes the write lock first, so concurrent publishes are serialised
    // and each reads the count the previous one wrote.
    return transaction(this.db, () => {
      const r = this.one(
        'SELECT * FROM prompts WHERE id = ? AND organization_id = ?',
        promptId,
        organizationId,
      )
      if (!r) return null
      const prompt = toPrompt(r)
      const { version, outbox } = build(prompt, prompt.versionCount + 1)
      this.insertVersion(version)
      this.db
        .prepare('UPDATE prompts SET version_count = ?, current_version_id = ?, updated_at = ? WHERE id = ?')
        .run(version.version, version._id, version.publishedAt, promptId)
      this.insertOutbox(outbox)
      return version
    })
  }

  async createWithVersion(prompt: PromptRecord, version: VersionRecord, outbox: OutboxRecord): Promise<void> {
    try {
      transaction(this.db, () => {
        this.insertPrompt(prompt)
        this.insertVersion(version)
        this.insertOutbox(outbox)
      })
    } catch (err) {
      if (isUniqueViolation(err)) throw new DuplicateSlugError()
      throw err
    }
  }

  async listVersions(promptId: string, order: 'version' | 'publishedAt'): Promise<VersionRecord[]> {
    const by = order === 'version' ? 'version DESC' : 'published_at DESC, version DESC'
    return this.all(`SELECT * FROM versions WHERE prompt_id = ? ORDER BY ${by}`, promptId).map(toVersion)
  }

  async getVersion(promptId: string, versionId: string): Promise<VersionRecord | null> {
    const r = this.one('SELECT * FROM versions WHERE id = ? AND prompt_id = ?', versionId, promptId)
    return r ? toVersion(r) : null
  }

  async getVersionByNumber(promptId: string, version: number): Promise<VersionRecord | null> {
    const r = this.one('SELECT * FROM versions WHERE prompt_id = ? AND version = ?', promptId, version)
    return r ? toVersion(r) : null
  }

  async getVersionsByIds(ids: string[]): Promise<VersionRecord[]> {
    if (ids.length === 0) return []
    return this.all(`SELECT * FROM versions WHERE id IN (${ids.map(() => '?').join(', ')})`, ...ids).map(
      toVersion,
    )
  }

  async pendingOutbox(limit: number): Promise<OutboxRecord[]> {
    return this.all('SELECT * FROM outbox WHERE sent_at IS NULL ORDER BY created_at, id LIMIT ?', limit).map(
      toOutbox,
    )
  }

  async markOutboxSent(id: string, at: string): Promise<void> {
    this.db.prepare('UPDATE outbox SET sent_at = ? WHERE id = ?').run(at, id)
  }

  async pruneOutbox(before: string): Promise<number> {
    const result = this.db.prepare('DELETE FROM outbox WHERE sent_at IS NOT NULL AND sent_at < ?').run(before)
    return Number(result.changes)
  }

  async createBatch(b: ImportBatchRecord): Promise<void> {
    this.db
      .prepare(
        `INSERT INTO import_batches (id, organization_id, created_by, status, total, created, failed, errors,
         created_at, updated_at, finished_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
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
      )
  }

  async getBatch(organizationId: string, id: string): Promise<ImportBatchRecord | null> {
    const r = this.one(
      'SELECT * FROM import_batches WHERE id = ? AND organization_id = ?',
      id,
      organizationId,
    )
    return r ? toBatch(r) : null
  }

  async updateBatch(id: string, u: ImportBatchUpdate): Promise<void> {
    const sets = ['updated_at = ?']
    const params: SQLInputValue[] = [u.updatedAt]
    if (u.status !== undefined) {
      sets.push('status = ?')
      params.push(u.status)
    }
    if (u.created !== undefined) {
      sets.push('created = ?')
      params.push(u.created)
    }
    if (u.failed !== undefined) {
      sets.push('failed = ?')
      params.push(u.failed)
    }
    if (u.finishedAt !== undefined) {
      sets.push('finished_at = ?')
      params.push(u.finishedAt)
    }
    transaction(this.db, () => {
      if (u.appendErrors && u.appendErrors.length > 0) {
        const r = this.one('SELECT errors FROM import_batches WHERE id = ?', id)
        const errors = r ? (JSON.parse(s(r.errors)) as ImportBatchRecord['errors']) : []
        sets.push('errors = ?')
        params.push(JSON.stringify([...errors, ...u.appendErrors]))
      }
      this.db.prepare(`UPDATE import_batches SET ${sets.join(', ')} WHERE id = ?`).run(...params, id)
    })
  }

  async check(): Promise<void> {
    this.one('SELECT 1 AS ok')
  }

  async close(): Promise<void> {
    if (this.db.isOpen) this.db.close()
  }
}
