import type { DatabaseSync, SQLInputValue } from 'node:sqlite'
import type { AuditEntry, ExperimentStatus } from '@pm/contracts'
import {
  AUDIT_OUTBOX_SCHEMA,
  type AuditOutbox,
  addColumnIfMissing,
  closeSqlite,
  insertAuditOutbox,
  openSqlite,
  queryAll,
  queryOne,
  type SqliteRow,
  sqliteAuditOutbox,
  text,
  textOrNull,
  transaction,
} from '@pm/kit'
import type {
  AddItemsOutcome,
  DatasetRecord,
  DeleteDatasetOutcome,
  ExperimentRecord,
  ExperimentStore,
  ItemRecord,
  NewItem,
  Page,
  PageArgs,
  UnitRecord,
  UnitResult,
} from './types.ts'

const SCHEMA = [
  // Audit entries written with their change, until the relay has published them (DESIGN section 15).
  ...AUDIT_OUTBOX_SCHEMA,
  `CREATE TABLE IF NOT EXISTS datasets (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, name TEXT NOT NULL, description TEXT NOT NULL,
    item_count INTEGER NOT NULL, next_position INTEGER NOT NULL, created_at TEXT NOT NULL, updated_at TEXT NOT NULL)`,
  'CREATE INDEX IF NOT EXISTS datasets_org ON datasets(organization_id, created_at)',
  `CREATE TABLE IF NOT EXISTS items (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, dataset_id TEXT NOT NULL, position INTEGER NOT NULL,
    variables TEXT NOT NULL, expected TEXT, metadata TEXT, created_at TEXT NOT NULL,
    UNIQUE (dataset_id, position))`,
  `CREATE TABLE IF NOT EXISTS experiments (
    id TEXT PRIMARY KEY, organization_id TEXT NOT NULL, name TEXT NOT NULL, dataset_id TEXT NOT NULL,
    variants TEXT NOT NULL, prompt_ids TEXT NOT NULL, connection_id TEXT NOT NULL, model TEXT, params TEXT,
    evaluators TEXT NOT NULL, concurrency INTEGER NOT NULL, status TEXT NOT NULL, total INTEGER NOT NULL,
    caller TEXT NOT NULL, error TEXT, summary TEXT, announced INTEGER NOT NULL, created_at TEXT NOT NULL,
    started_at TEXT, finished_at TEXT)`,
  'CREATE INDEX IF NOT EXISTS experiments_org ON experiments(organization_id, created_at)',
  'CREATE INDEX IF NOT EXISTS experiments_status ON experiments(status)',
  // The primary key is the (experiment, item, variant) triple: a unit exists once, is done once.
  `CREATE TABLE IF NOT EXISTS units (
    id TEXT PRIMARY KEY, experiment_id TEXT NOT NULL, organization_id TEXT NOT NULL, item_id TEXT NOT NULL,
    position INTEGER NOT NULL, variant INTEGER NOT NULL, status TEXT NOT NULL, lease_token TEXT,
    lease_until TEXT, not_before TEXT, output TEXT, scores TEXT NOT NULL, evaluator_errors TEXT NOT NULL,
    passed INTEGER NOT NULL, latency_ms REAL, input_tokens INTEGER NOT NULL, output_tokens INTEGER NOT NULL,
    error TEXT, finished_at TEXT)`,
  'CREATE INDEX IF NOT EXISTS units_queue ON units(experiment_id, status, position, variant)',
]

type Row = SqliteRow
const s = text
const sOrNull = textOrNull
const json = <T>(v: unknown): T => JSON.parse(s(v)) as T
const jsonOrNull = <T>(v: unknown): T | null =>
  v === null || v === undefined ? null : (JSON.parse(s(v)) as T)

const toDataset = (r: Row): DatasetRecord => ({
  _id: s(r.id),
  organizationId: s(r.organization_id),
  name: s(r.name),
  description: s(r.description),
  itemCount: Number(r.item_count),
  createdAt: s(r.created_at),
  updatedAt: s(r.updated_at),
})

const toItem = (r: Row): ItemRecord => ({
  _id: s(r.id),
  organizationId: s(r.organization_id),
  datasetId: s(r.dataset_id),
  position: Number(r.position),
  variables: json(r.variables),
  expected: sOrNull(r.expected),
  metadata: jsonOrNull(r.metadata),
  createdAt: s(r.created_at),
})

const toExperiment = (r: Row): ExperimentRecord => ({
  _id: s(r.id),
  organizationId: s(r.organization_id),
  name: s(r.name),
  datasetId: s(r.dataset_id),
  variants: json(r.variants),
  connectionId: s(r.connection_id),
  model: sOrNull(r.model),
  params: jsonOrNull(r.params),
  evaluators: json(r.evaluators),
  concurrency: Number(r.concurrency),
  status: s(r.status) as ExperimentStatus,
  total: Number(r.total),
  caller: json(r.caller),
  error: sOrNull(r.error),
  summary: jsonOrNull(r.summary),
  announced: r.announced === 1,
  createdAt: s(r.created_at),
  startedAt: sOrNull(r.started_at),
  finishedAt: sOrNull(r.finished_at),
})

const toUnit = (r: Row): UnitRecord => ({
  _id: s(r.id),
  experimentId: s(r.experiment_id),
  organizationId: s(r.organization_id),
  itemId: s(r.item_id),
  position: Number(r.position),
  variant: Number(r.variant),
  status: s(r.status) as UnitRecord['status'],
  leaseToken: sOrNull(r.lease_token),
  leaseUntil: sOrNull(r.lease_until),
  notBefore: sOrNull(r.not_before),
  rateLimited: Number(r.rate_limited ?? 0),
  output: sOrNull(r.output),
  scores: json(r.scores),
  evaluatorErrors: json(r.evaluator_errors),
  passed: r.passed === 1,
  latencyMs: r.latency_ms === null || r.latency_ms === undefined ? null : Number(r.latency_ms),
  inputTokens: Number(r.input_tokens),
  outputTokens: Number(r.output_tokens),
  error: sOrNull(r.error),
  finishedAt: sOrNull(r.finished_at),
})

function page(
  db: DatabaseSync,
  sql: string,
  where: string,
  params: SQLInputValue[],
  order: string,
  p: PageArgs,
): { rows: Row[]; total: number } {
  const total = Number(queryOne(db, `SELECT COUNT(*) AS n FROM ${sql} WHERE ${where}`, ...params)?.n ?? 0)
  const rows = queryAll(
    db,
    `SELECT * FROM ${sql} WHERE ${where} ORDER BY ${order} LIMIT ? OFFSET ?`,
    ...params,
    p.limit,
    (p.page - 1) * p.limit,
  )
  return { rows, total }
}

/** SQLite (node:sqlite) implementation: `experiments.db` in DATA_DIR. */
export class SqliteExperimentStore implements ExperimentStore {
  private readonly db: DatabaseSync
  private readonly outbox: AuditOutbox

  constructor(file: string) {
    this.db = openSqlite(file, SCHEMA)
    addColumnIfMissing(this.db, 'units', 'rate_limited', 'INTEGER NOT NULL DEFAULT 0')
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

  async createDataset(d: DatasetRecord, audit: AuditEntry[] = []): Promise<void> {
    transaction(this.db, () => {
      this.db
        .prepare(
          'INSERT INTO datasets (id, organization_id, name, description, item_count, next_position, created_at, updated_at) VALUES (?, ?, ?, ?, 0, 1, ?, ?)',
        )
        .run(d._id, d.organizationId, d.name, d.description, d.createdAt, d.updatedAt)
      insertAuditOutbox(this.db, audit)
    })
  }

  async getDataset(organizationId: string, id: string): Promise<DatasetRecord | null> {
    const r = queryOne(
      this.db,
      'SELECT * FROM datasets WHERE id = ? AND organization_id = ?',
      id,
      organizationId,
    )
    return r ? toDataset(r) : null
  }

  async listDatasets(organizationId: string, p: PageArgs): Promise<Page<DatasetRecord>> {
    const { rows, total } = page(
      this.db,
      'datasets',
      'organization_id = ?',
      [organizationId],
      'created_at DESC, id DESC',
      p,
    )
    return { rows: rows.map(toDataset), total }
  }

  async updateDataset(
    organizationId: string,
    id: string,
    patch: { name?: string; description?: string; updatedAt: string },
    audit: AuditEntry[] = [],
  ): Promise<DatasetRecord | null> {
    return transaction(this.db, () => {
      const gone = this.db
        .prepare(
          'UPDATE datasets SET name = COALESCE(?, name), description = COALESCE(?, description), updated_at = ? WHERE id = ? AND organization_id = ?',
        )
        .run(patch.name ?? null, patch.description ?? null, patch.updatedAt, id, organizationId)
      if (Number(gone.changes) === 0) return null
      insertAuditOutbox(this.db, audit)
      const r = queryOne(this.db, 'SELECT * FROM datasets WHERE id = ?', id)
      return r ? toDataset(r) : null
    })
  }

  async deleteDataset(
    organizationId: string,
    id: string,
    audit: AuditEntry[] = [],
  ): Promise<DeleteDatasetOutcome> {
    return transaction(this.db, (): DeleteDatasetOutcome => {
      const active = queryOne(
        this.db,
        "SELECT 1 AS n FROM experiments WHERE dataset_id = ? AND status IN ('queued', 'running') LIMIT 1",
        id,
      )
      const exists = queryOne(
        this.db,
        'SELECT 1 AS n FROM datasets WHERE id = ? AND organization_id = ?',
        id,
        organizationId,
      )
      if (!exists) return 'not-found'
      if (active) return 'in-use'
      this.db.prepare('DELETE FROM datasets WHERE id = ?').run(id)
      this.db.prepare('DELETE FROM items WHERE dataset_id = ?').run(id)
      insertAuditOutbox(this.db, audit)
      return 'deleted'
    })
  }

  async addItems(
    organizationId: string,
    datasetId: string,
    items: NewItem[],
    max: number,
    audit: AuditEntry[] = [],
  ): Promise<AddItemsOutcome> {
    return transaction(this.db, (): AddItemsOutcome => {
      const d = queryOne(
        this.db,
        'SELECT item_count, next_position FROM datasets WHERE id = ? AND organization_id = ?',
        datasetId,
        organizationId,
      )
      if (!d) return 'not-found'
      const count = Number(d.item_count)
      if (count + items.length > max) return 'too-many'
      let position = Number(d.next_position)
      const insert = this.db.prepare(
        'INSERT INTO items (id, organization_id, dataset_id, position, variables, expected, metadata, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)',
      )
      for (const it of items) {
        insert.run(
          it._id,
          organizationId,
          datasetId,
          position++,
          JSON.stringify(it.variables),
          it.expected,
          it.metadata === null ? null : JSON.stringify(it.metadata),
          it.createdAt,
        )
      }
      this.db
        .prepare('UPDATE datasets SET item_count = ?, next_position = ?, updated_at = ? WHERE id = ?')
        .run(count + items.length, position, new Date().toISOString(), datasetId)
      insertAuditOutbox(this.db, audit)
      return { itemCount: count + items.length }
    })
  }

  async listItems(organizationId: string, datasetId: string, p: PageArgs): Promise<Page<ItemRecord>> {
    const { rows, total } = page(
      this.db,
      'items',
      'dataset_id = ? AND organization_id = ?',
      [datasetId, organizationId],
      'position ASC',
      p,
    )
    return { rows: rows.map(toItem), total }
  }

  async allItems(datasetId: string): Promise<ItemRecord[]> {
    return queryAll(this.db, 'SELECT * FROM items WHERE dataset_id = ? ORDER BY position', datasetId).map(
      toItem,
    )
  }

  async getItem(datasetId: string, itemId: string): Promise<ItemRecord | null> {
    const r = queryOne(this.db, 'SELECT * FROM items WHERE id = ? AND dataset_id = ?', itemId, datasetId)
    return r ? toItem(r) : null
  }

  async deleteItem(
    organizationId: string,
    datasetId: string,
    itemId: string,
    audit: AuditEntry[] = [],
  ): Promise<boolean> {
    return transaction(this.db, () => {
      const gone = this.db
        .prepare('DELETE FROM items WHERE id = ? AND dataset_id = ? AND organization_id = ?')
        .run(itemId, datasetId, organizationId)
      if (Number(gone.changes) === 0) return false
      this.db
        .prepare('UPDATE datasets SET item_count = item_count - 1, updated_at = ? WHERE id = ?')
        .run(new Date().toISOString(), datasetId)
      insertAuditOutbox(this.db, audit)
      return true
    })
  }

  async createExperiment(
    e: ExperimentRecord,
    units: UnitRecord[],
    audit: AuditEntry[] = [],
  ): Promise<boolean> {
    return transaction(this.db, () => {
      // In the transaction that a dataset's delete also takes: the delete sees this experiment.
      const dataset = queryOne(
        this.db,
        'SELECT 1 AS n FROM datasets WHERE id = ? AND organization_id = ?',
        e.datasetId,
        e.organizationId,
      )
      if (!dataset) return false
      this.db
        .prepare(
          `INSERT INTO experiments (id, organization_id, name, dataset_id, variants, prompt_ids, connection_id, model, params,
           evaluators, concurrency, status, total, caller, error, summary, announced, created_at, started_at, finished_at)
           VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
        )
        .run(
          e._id,
          e.organizationId,
          e.name,
          e.datasetId,
          JSON.stringify(e.variants),
          // ",id1,id2," for the prompt filter of the list.
          `,${e.variants.map((v) => v.promptId).join(',')},`,
          e.connectionId,
          e.model,
          e.params === null ? null : JSON.stringify(e.params),
          JSON.stringify(e.evaluators),
          e.concurrency,
          e.status,
          e.total,
          JSON.stringify(e.caller),
          e.error,
          e.summary === null ? null : JSON.stringify(e.summary),
          e.announced ? 1 : 0,
          e.createdAt,
          e.startedAt,
          e.finishedAt,
        )
      const insert = this.db.prepare(
        `INSERT INTO units (id, experiment_id, organization_id, item_id, position, variant, status, scores, evaluator_errors,
         passed, input_tokens, output_tokens) VALUES (?, ?, ?, ?, ?, ?, 'pending', '{}', '{}', 0, 0, 0)`,
      )
      for (const u of units)
        insert.run(u._id, u.experimentId, u.organizationId, u.itemId, u.position, u.variant)
      insertAuditOutbox(this.db, audit)
      return true
    })
  }

  async getExperiment(organizationId: string | null, id: string): Promise<ExperimentRecord | null> {
    const r =
      organizationId === null
        ? queryOne(this.db, 'SELECT * FROM experiments WHERE id = ?', id)
        : queryOne(
            this.db,
            'SELECT * FROM experiments WHERE id = ? AND organization_id = ?',
            id,
            organizationId,
          )
    return r ? toExperiment(r) : null
  }

  async listExperiments(
    organizationId: string,
    p: PageArgs,
    promptId?: string,
  ): Promise<Page<ExperimentRecord>> {
    const where =
      promptId === undefined ? 'organization_id = ?' : 'organization_id = ? AND instr(prompt_ids, ?) > 0'
    const params = promptId === undefined ? [organizationId] : [organizationId, `,${promptId},`]
    const { rows, total } = page(this.db, 'experiments', where, params, 'created_at DESC, id DESC', p)
    return { rows: rows.map(toExperiment), total }
  }

  async transition(
    id: string,
    from: readonly ExperimentStatus[],
    to: ExperimentStatus,
    fields: Partial<Pick<ExperimentRecord, 'startedAt' | 'finishedAt' | 'error' | 'summary'>> = {},
    audit: AuditEntry[] = [],
  ): Promise<boolean> {
    const sets = ['status = ?']
    const params: SQLInputValue[] = [to]
    if (fields.startedAt !== undefined) sets.push('started_at = ?') && params.push(fields.startedAt)
    if (fields.finishedAt !== undefined) sets.push('finished_at = ?') && params.push(fields.finishedAt)
    if (fields.error !== undefined) sets.push('error = ?') && params.push(fields.error)
    if (fields.summary !== undefined)
      sets.push('summary = ?') && params.push(fields.summary === null ? null : JSON.stringify(fields.summary))
    const update = () =>
      Number(
        this.db
          .prepare(
            `UPDATE experiments SET ${sets.join(', ')} WHERE id = ? AND status IN (${from.map(() => '?').join(', ')})`,
          )
          .run(...params, id, ...from).changes,
      ) > 0
    if (audit.length === 0) return update()
    return transaction(this.db, () => {
      if (!update()) return false
      insertAuditOutbox(this.db, audit)
      return true
    })
  }

  async activeExperiments(): Promise<ExperimentRecord[]> {
    return queryAll(
      this.db,
      "SELECT * FROM experiments WHERE status IN ('queued', 'running') ORDER BY created_at",
    ).map(toExperiment)
  }

  async unannounced(): Promise<ExperimentRecord[]> {
    return queryAll(
      this.db,
      "SELECT * FROM experiments WHERE announced = 0 AND status IN ('completed', 'failed', 'cancelled')",
    ).map(toExperiment)
  }

  async markAnnounced(id: string): Promise<void> {
    this.db.prepare('UPDATE experiments SET announced = 1 WHERE id = ?').run(id)
  }

  async claimUnits(
    experimentId: string,
    n: number,
    now: string,
    leaseUntil: string,
    token: string,
  ): Promise<UnitRecord[]> {
    return transaction(this.db, () => {
      const rows = queryAll(
        this.db,
        `SELECT * FROM units WHERE experiment_id = ? AND status = 'pending'
         AND (lease_until IS NULL OR lease_until <= ?) AND (not_before IS NULL OR not_before <= ?)
         ORDER BY position, variant LIMIT ?`,
        experimentId,
        now,
        now,
        n,
      )
      const lease = this.db.prepare('UPDATE units SET lease_token = ?, lease_until = ? WHERE id = ?')
      for (const r of rows) lease.run(token, leaseUntil, s(r.id))
      return rows.map((r) => ({ ...toUnit(r), leaseToken: token, leaseUntil }))
    })
  }

  async renewLeases(ids: readonly string[], token: string, leaseUntil: string): Promise<void> {
    if (ids.length === 0) return
    this.db
      .prepare(
        `UPDATE units SET lease_until = ? WHERE id IN (${ids.map(() => '?').join(', ')}) AND lease_token = ? AND status = 'pending'`,
      )
      .run(leaseUntil, ...ids, token)
  }

  async releaseUnit(id: string, token: string, notBefore: string | null, rateLimited = false): Promise<void> {
    this.db
      .prepare(
        "UPDATE units SET lease_token = NULL, lease_until = NULL, not_before = ?, rate_limited = rate_limited + ? WHERE id = ? AND lease_token = ? AND status = 'pending'",
      )
      .run(notBefore, rateLimited ? 1 : 0, id, token)
  }

  async cancelUnits(experimentId: string): Promise<void> {
    this.db
      .prepare(
        "UPDATE units SET status = 'cancelled', lease_token = NULL, lease_until = NULL WHERE experiment_id = ? AND status = 'pending'",
      )
      .run(experimentId)
  }

  async completeUnit(id: string, r: UnitResult): Promise<boolean> {
    const res = this.db
      .prepare(
        `UPDATE units SET status = 'done', lease_token = NULL, lease_until = NULL, output = ?, scores = ?, evaluator_errors = ?,
         passed = ?, latency_ms = ?, input_tokens = ?, output_tokens = ?, error = ?, finished_at = ? WHERE id = ? AND status = 'pending'`,
      )
      .run(
        r.output,
        JSON.stringify(r.scores),
        JSON.stringify(r.evaluatorErrors),
        r.passed ? 1 : 0,
        r.latencyMs,
        r.inputTokens,
        r.outputTokens,
        r.error,
        r.finishedAt,
        id,
      )
    return Number(res.changes) > 0
  }

  async countUnits(experimentId: string): Promise<{ done: number; pending: number }> {
    const rows = queryAll(
      this.db,
      'SELECT status, COUNT(*) AS n FROM units WHERE experiment_id = ? GROUP BY status',
      experimentId,
    )
    const of = (st: string) => Number(rows.find((r) => r.status === st)?.n ?? 0)
    return { done: of('done'), pending: of('pending') }
  }

  async doneUnits(experimentId: string): Promise<UnitRecord[]> {
    return queryAll(
      this.db,
      "SELECT * FROM units WHERE experiment_id = ? AND status = 'done'",
      experimentId,
    ).map(toUnit)
  }

  async listResults(
    experimentId: string,
    p: PageArgs,
    filter: { variant?: number; failed?: boolean },
  ): Promise<Page<UnitRecord>> {
    const where = ["experiment_id = ? AND status = 'done'"]
    const params: SQLInputValue[] = [experimentId]
    if (filter.variant !== undefined) where.push('variant = ?') && params.push(filter.variant)
    if (filter.failed === true) where.push('(error IS NOT NULL OR passed = 0)')
    const { rows, total } = page(
      this.db,
      'units',
      where.join(' AND '),
      params,
      'position ASC, variant ASC',
      p,
    )
    return { rows: rows.map(toUnit), total }
  }

  async check(): Promise<void> {
    queryOne(this.db, 'SELECT 1')
  }

  async close(): Promise<void> {
    closeSqlite(this.db)
  }
}
