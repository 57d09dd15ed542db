import type {
  AuditEntry,
  Author,
  ChatMessage,
  EnvironmentName,
  ImportRowError,
  ImportStatus,
  Pin,
  PromptConfig,
  Split,
  PromptType,
  Variable,
  VersionStatus,
} from '@pm/contracts'

export interface PromptRecord {
  _id: string
  organizationId: string
  name: string
  slug: string
  description: string
  tags: string[]
  /** Rows written before chat prompts existed read as text. */
  type: PromptType
  template: string
  /** Chat prompts only. */
  messages?: ChatMessage[]
  variables: Variable[]
  /** Absent when none is set. */
  config?: PromptConfig
  isPublic: boolean
  versionCount: number
  currentVersionId: string | null
  forkedFromVersionId?: string
  environments: { preview: Pin | null; production: Pin | null }
  createdBy: string
  createdAt: string
  updatedAt: string
}

export interface VersionRecord {
  _id: string
  promptId: string
  organizationId: string
  version: number
  status: VersionStatus
  publishedAt: string
  type: PromptType
  template: string
  messages?: ChatMessage[]
  variables: Variable[]
  config?: PromptConfig
  createdBy: Author
  changeLog: string
}

/** One promote of an environment (DESIGN section 15), written in the promote's transaction. */
/** What a promote writes (`setPin`): the pin, the events of the prompt after it, its history entry. */
export interface PinWrite {
  pin: Pin
  events?: (after: PromptRecord) => OutboxRecord[]
  history?: EnvHistoryRecord
}

export interface EnvHistoryRecord {
  _id: string
  promptId: string
  organizationId: string
  environment: EnvironmentName
  versionId: string
  version: number
  split?: Split
  promotedBy: string
  promotedByType: 'user' | 'apiKey'
  promotedAt: string
}

/** Invocations of one variant of a split, as render reports them (added to what is counted). */
export interface SplitCount {
  splitId: string
  variant: number
  count: number
}

export interface OutboxRecord {
  _id: string
  subject: string
  msgId: string
  payload: unknown
  createdAt: string
  sentAt: string | null
  /** Trace context of the request that wrote it (traceparent, tracestate): the event continues that trace. */
  traceHeaders?: Record<string, string> | null
}

/**
 * A CSV import. Its counts move in the same transaction as the rows they count, so they are
 * exact at every moment; `position` says where a resumed run starts; the lease says which
 * process is writing it (any replica may take over a batch whose lease has run out).
 */
export interface ImportBatchRecord {
  _id: string
  organizationId: string
  createdBy: string
  status: ImportStatus
  total: number
  created: number
  failed: number
  errors: ImportRowError[]
  createdAt: string
  updatedAt: string
  finishedAt: string | null
  /** When a process last took the batch over from one that stopped or died. */
  resumedAt: string | null
  /** Rows of the file handled so far, in file order (rows refused at upload count from the start). */
  position: number
  /** SHA-256 (hex) of the uploaded file; the same file sent again to the workspace answers this batch. */
  contentHash: string | null
  /** The request's Idempotency-Key, scoped to the workspace and the user. */
  idempotencyKey: string | null
  /** The process writing the batch, and until when it holds it (ISO time). */
  leaseOwner: string | null
  leaseUntil: string | null
}

/** A write on behalf of an import run: refused unless `owner` still holds the batch at `from`. */
export interface ImportStep {
  batchId: string
  owner: string
  /** The batch's position the writer last saw. */
  from: number
  /** The position once this step is written. */
  to: number
  at: string
}

/** The batch is no longer this writer's (its lease ran out and another process took it, or it ended). */
export class LeaseLostError extends Error {
  constructor() {
    super('import batch lease lost')
    this.name = 'LeaseLostError'
  }
}

/** Another batch of the workspace already has this file (or this user's Idempotency-Key). */
export class DuplicateImportError extends Error {
  constructor() {
    super('import already received')
    this.name = 'DuplicateImportError'
  }
}

/** Which audit entries of a workspace (DESIGN section 15). */
export interface AuditFilter {
  organizationId: string
  actor?: string
  action?: string
  resourceId?: string
  from?: string
  to?: string
}

/** The last audit entry an export read: the next page starts after it. */
export interface AuditCursor {
  at: string
  id: string
}

export interface PromptFilter {
  organizationId: string
  search?: string
  tags?: string[]
  visibility?: 'all' | 'public' | 'private'
}

export interface Page {
  page: number
  limit: number
}

export type PromptPatch = Partial<
  Pick<
    PromptRecord,
    | 'name'
    | 'slug'
    | 'description'
    | 'tags'
    | 'template'
    | 'messages'
    | 'variables'
    | 'isPublic'
    | 'environments'
  >
> & {
  /** null removes the config. */
  config?: PromptConfig | null
  updatedAt: string
}

/**
 * Events to write with a change, in the same transaction, built from the prompt before and
 * after it (so that "did visibility change" is decided on what the transaction saw).
 */
export type ChangeEvents = (before: PromptRecord, after: PromptRecord) => OutboxRecord[]

/** A new version and the event announcing it, built from the prompt as it is inside the transaction. */
export type VersionBuilder = (
  prompt: PromptRecord,
  nextVersion: number,
) => { version: VersionRecord; outbox: OutboxRecord; extra?: OutboxRecord[] }

export class DuplicateSlugError extends Error {
  constructor() {
    super('slug taken')
    this.name = 'DuplicateSlugError'
  }
}

/**
 * How a store runs a write that a unique index guards: `isDuplicate` is the driver's test for a
 * unique-index violation (SQLite's UNIQUE constraint, MongoDB's duplicate key), and such a
 * violation is thrown as the store's own `Duplicate` error (a taken slug, a file already imported).
 */
export function uniqueWrites(isDuplicate: (err: unknown) => boolean) {
  return async <T>(Duplicate: new () => Error, write: () => T | Promise<T>): Promise<T> => {
    try {
      return await write()
    } catch (err) {
      throw isDuplicate(err) ? new Duplicate() : err
    }
  }
}

/**
 * The prompts service's data. `publish` is the one step that must be atomic across
 * records: the version, the prompt's counters and the outbox event are written together
 * or not at all, and two concurrent publishes get consecutive numbers.
 */
export interface PromptStore {
  /** With `outbox`, those rows are written in the same transaction (audit entries). */
  createPrompt(prompt: PromptRecord, outbox?: OutboxRecord[]): Promise<void>
  getPrompt(organizationId: string, id: string): Promise<PromptRecord | null>
  /** Without a workspace check: for internal lookups that check visibility themselves. */
  getPromptById(id: string): Promise<PromptRecord | null>
  isSlugTaken(organizationId: string, slug: string): Promise<boolean>
  /** The workspace's slugs that start with `prefix` (one query: slug allocation reads them at once). */
  slugsStartingWith(organizationId: string, prefix: string): Promise<string[]>
  listPrompts(filter: PromptFilter, page: Page): Promise<{ prompts: PromptRecord[]; total: number }>
  summary(organizationId: string): Promise<{ total: number; public: number; published: number }>
  listPublic(search: string | undefined, page: Page): Promise<{ prompts: PromptRecord[]; total: number }>
  getPromptBySlug(organizationId: string, slug: string): Promise<PromptRecord | null>
  /**
   * Null when the prompt is not in the workspace, or, with `expectedUpdatedAt`, when its
   * `updatedAt` is no longer that (another write came between the caller's read and this one).
   * With `events`, the events it builds are written to the outbox atomically with the change.
   */
  updatePrompt(
    organizationId: string,
    id: string,
    patch: PromptPatch,
    events?: ChangeEvents,
    expectedUpdatedAt?: string,
  ): Promise<PromptRecord | null>
  /**
   * Removes the prompt and its versions, with the event `event` builds from the removed prompt
   * written to the outbox atomically; null when it was not there.
   */
  deletePrompt(
    organizationId: string,
    id: string,
    event?: (deleted: PromptRecord) => OutboxRecord | OutboxRecord[],
  ): Promise<PromptRecord | null>
  /**
   * Sets one environment's pin without touching the other (two promotes at once both land),
   * with the event `event` builds from the prompt after it, atomically.
   */
  /**
   * Pins `env` in a transaction that first reads the prompt: `build` gets it as stored there
   * and answers the pin (`updatedAt` is its `promotedAt`), its events and its history entry,
   * all written in that transaction. A promote is dated from the pin it replaces, which only
   * this read sees as it is (another replica may have promoted since the caller's own read).
   * `build` may run more than once (MongoDB retries a transaction that met a write conflict).
   */
  setPin(
    organizationId: string,
    id: string,
    env: EnvironmentName,
    build: (stored: PromptRecord) => PinWrite,
  ): Promise<PromptRecord | null>
  /** An environment's promotes, newest first. */
  listEnvHistory(
    promptId: string,
    env: EnvironmentName,
    page: Page,
  ): Promise<{ entries: EnvHistoryRecord[]; total: number }>
  /** Adds render's counts of invocations per split variant. */
  addSplitCounts(counts: SplitCount[]): Promise<void>
  /** The counts of these splits, by split id (index = variant). */
  splitCounts(splitIds: string[]): Promise<Map<string, number[]>>

  publish(organizationId: string, promptId: string, build: VersionBuilder): Promise<VersionRecord | null>
  /** Writes a forked prompt with its first version and event, atomically. */
  createWithVersion(
    prompt: PromptRecord,
    version: VersionRecord,
    outbox: OutboxRecord | OutboxRecord[],
  ): Promise<void>
  listVersions(promptId: string, order: 'version' | 'publishedAt'): Promise<VersionRecord[]>
  getVersion(promptId: string, versionId: string): Promise<VersionRecord | null>
  getVersionByNumber(promptId: string, version: number): Promise<VersionRecord | null>
  /**
   * Prompts of the workspace, other than `excludeId`, whose draft or current version template
   * contains `needle` (a prefilter for references; the caller parses), with that current version.
   */
  listContaining(
    organizationId: string,
    needle: string,
    excludeId: string,
  ): Promise<Array<{ prompt: PromptRecord; current: VersionRecord | null }>>
  /** The versions with these ids (any prompt), in no particular order. */
  getVersionsByIds(ids: string[]): Promise<VersionRecord[]>

  /** Copies an audit row of the outbox into the audit log (once, by entry id) and marks it sent, atomically. */
  recordAudit(row: OutboxRecord, at: string): Promise<void>
  /** Stores an entry another service relayed (identity, webhooks), once by entry id. */
  ingestAudit(entry: AuditEntry): Promise<void>
  /** A workspace's audit entries, newest first. */
  listAudit(filter: AuditFilter, page: Page): Promise<{ entries: AuditEntry[]; total: number }>
  /**
   * Up to `limit` entries after `after` in the list's order (newest first, then id), none
   * counted: the export's walk, which entries written meanwhile cannot shift.
   */
  auditPage(filter: AuditFilter, after: AuditCursor | null, limit: number): Promise<AuditEntry[]>
  /** Forgets entries older than `before` (AUDIT_RETENTION_DAYS). */
  pruneAudit(before: string): Promise<number>

  pendingOutbox(limit: number): Promise<OutboxRecord[]>
  markOutboxSent(id: string, at: string): Promise<void>
  /** Forgets events sent before `before` (long past JetStream's duplicate window). */
  pruneOutbox(before: string): Promise<number>
  /** How many events are not yet sent, and when the oldest of them was written (metrics). */
  outboxBacklog(): Promise<{ count: number; oldestCreatedAt: string | null }>

  /**
   * Records a batch with its file (kept until the batch ends, for a resume), atomically.
   * Throws DuplicateImportError when the workspace has a batch with the same contentHash, or
   * the user one with the same idempotencyKey.
   */
  createBatch(batch: ImportBatchRecord, file: Buffer | null): Promise<void>
  getBatch(organizationId: string, id: string): Promise<ImportBatchRecord | null>
  findBatchByHash(organizationId: string, contentHash: string): Promise<ImportBatchRecord | null>
  findBatchByKey(organizationId: string, userId: string, key: string): Promise<ImportBatchRecord | null>
  /** Clears a batch's contentHash and idempotencyKey: the file may be imported again. */
  forgetBatchKeys(id: string): Promise<void>
  getImportFile(batchId: string): Promise<Buffer | null>
  /**
   * Writes a run of imported rows in one transaction: the prompts, the errors of the rows that
   * could not be written, and the batch's counts (created, failed) and position. Throws
   * DuplicateSlugError or LeaseLostError having written nothing.
   */
  importRows(step: ImportStep, prompts: PromptRecord[], errors: ImportRowError[]): Promise<void>
  /** Ends the batch (completed or failed), gives up its lease and deletes its file. LeaseLostError. */
  finishBatch(batchId: string, owner: string, status: 'completed' | 'failed', at: string): Promise<void>
  /**
   * Takes one processing batch whose lease is free or ran out before `at`, for `owner` until
   * `until`, marking it resumed at `at`; null when there is none. Two callers never get the same one.
   */
  claimBatch(owner: string, at: string, until: string): Promise<ImportBatchRecord | null>
  /** Extends the owner's lease; false when the batch is no longer the owner's. */
  renewLease(batchId: string, owner: string, until: string): Promise<boolean>
  /** Gives the batch up so that another process (or the next start) takes it at once. */
  releaseLease(batchId: string, owner: string): Promise<void>

  check(): Promise<void>
  close(): Promise<void>
}
