import { createHash } from 'node:crypto'
import { setImmediate as nextTurn, setTimeout as sleep } from 'node:timers/promises'
import { AppError, type ImportBatch, type ImportRowError } from '@pm/contracts'
import { newId } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { type CsvPrompt, type CsvRow, validatePromptCsv } from '../domain/csv.ts'
import { KnownSlugs } from '../domain/slug.ts'
import {
  DuplicateImportError,
  DuplicateSlugError,
  type ImportBatchRecord,
  type ImportStep,
  LeaseLostError,
  type PromptRecord,
  type PromptStore,
} from '../store/types.ts'
import type { PromptsService } from './prompts.ts'

export interface ImporterOptions {
  /** How long a process holds a batch without renewing it; a dead writer's batch is free after this. */
  leaseMs: number
  /** How often every process looks for batches whose writer stopped or died. */
  pollMs: number
  /** How long after a batch ends the same file (or Idempotency-Key) still answers it. */
  dedupeMs: number
  /** A pause after each row (0 in production; the crash tests slow imports down with it). */
  rowDelayMs: number
}

export interface ImportRequest {
  organizationId: string
  userId: string
  /** The parsed file, every row (bad ones with their message). */
  rows: CsvRow[]
  /** The file as uploaded: hashed for re-sends and kept for a resume until the batch ends. */
  file: Buffer
  idempotencyKey?: string
}

/** Attempts at a row whose write fails for a reason other than the row itself (the store). */
const ROW_ATTEMPTS = 3
/** Rows written in one transaction (one commit), and the most text they may carry together. */
const ROWS_PER_TRANSACTION = 100
const CHARS_PER_TRANSACTION = 1_000_000

/** A good row of the file with its index among the file's rows. */
interface FileRow {
  index: number
  row: number
  value: CsvPrompt
}

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * Writes the rows of a validated CSV file as prompts, in the background. Rows are written in
 * runs of up to 100, each run one transaction with the batch's progress (created, failed,
 * errors, position), so the counts are exact at every moment and no row is written twice.
 * The batch is held with a lease that its writer renews; when a process stops or dies, any
 * process (this one after a restart, or another replica) takes the batch over once the lease
 * is free and goes on from its position, reading the rows again from the file kept with it.
 */
export class Importer {
  private readonly service: PromptsService
  private readonly store: PromptStore
  private readonly log: FastifyBaseLogger
  private readonly opts: ImporterOptions
  /** This process's name on the leases it holds. */
  private readonly owner = newId()
  private readonly running = new Map<string, Promise<void>>()
  private timer: NodeJS.Timeout | undefined
  private claiming: Promise<void> | undefined
  private stopped = false

  constructor(service: PromptsService, store: PromptStore, log: FastifyBaseLogger, opts: ImporterOptions) {
    this.service = service
    this.store = store
    this.log = log
    this.opts = opts
  }

  /** Starts looking for interrupted batches: at once, then every `pollMs`. */
  start(): void {
    if (this.stopped || this.timer) return
    this.timer = setInterval(() => this.claim(), this.opts.pollMs)
    this.claim()
  }

  /**
   * Records the batch (bad rows already in its errors, the file kept) and starts writing the
   * good rows; or, for a file or Idempotency-Key this workspace sent before, answers that batch.
   */
  async begin(req: ImportRequest): Promise<{ batch: ImportBatchRecord; replayed: boolean }> {
    if (this.stopped) throw new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down')
    const contentHash = createHash('sha256').update(req.file).digest('hex')
    for (let attempt = 0; attempt < 3; attempt++) {
      const earlier = await this.earlier(req, contentHash)
      if (earlier) return { batch: earlier, replayed: true }
      try {
        return { batch: await this.create(req, contentHash), replayed: false }
      } catch (err) {
        // The same file or key arrived at the same moment: the next lookup finds the twin.
        if (!(err instanceof DuplicateImportError)) throw err
      }
    }
    throw new AppError('CONFLICT', 'the same import is being received concurrently; send it again')
  }

  /** The batch this request repeats, if any (docs/decisions.md, "Resumable imports and re-sends"). */
  private async earlier(req: ImportRequest, contentHash: string): Promise<ImportBatchRecord | null> {
    const { store } = this
    if (req.idempotencyKey !== undefined) {
      const byKey = await this.remembered(
        await store.findBatchByKey(req.organizationId, req.userId, req.idempotencyKey),
      )
      if (byKey) {
        if (byKey.contentHash !== contentHash) {
          throw new AppError('CONFLICT', 'this Idempotency-Key was already used for a different file', [
            { path: '/headers/idempotency-key', message: `already used for batch ${byKey._id}` },
          ])
        }
        return byKey
      }
    }
    return this.remembered(await store.findBatchByHash(req.organizationId, contentHash))
  }

  /** The batch while it still answers re-sends: running, or ended less than `dedupeMs` ago. */
  private async remembered(batch: ImportBatchRecord | null): Promise<ImportBatchRecord | null> {
    if (!batch) return null
    const since = Date.parse(batch.finishedAt ?? batch.createdAt)
    if (batch.status === 'processing' || Date.now() - since < this.opts.dedupeMs) return batch
    await this.store.forgetBatchKeys(batch._id)
    return null
  }

  private async create(req: ImportRequest, contentHash: string): Promise<ImportBatchRecord> {
    const errors: ImportRowError[] = []
    let good = 0
    for (const r of req.rows) {
      if (r.ok) good++
      else errors.push({ row: r.row, message: r.message })
    }
    const now = Date.now()
    const pending = good > 0
    const batch: ImportBatchRecord = {
      _id: newId(),
      organizationId: req.organizationId,
      createdBy: req.userId,
      status: pending ? 'processing' : 'completed',
      total: req.rows.length,
      created: 0,
      failed: errors.length,
      errors,
      createdAt: iso(now),
      updatedAt: iso(now),
      finishedAt: pending ? null : iso(now),
      resumedAt: null,
      position: 0,
      contentHash,
      idempotencyKey: req.idempotencyKey ?? null,
      leaseOwner: pending ? this.owner : null,
      leaseUntil: pending ? iso(now + this.opts.leaseMs) : null,
    }
    await this.store.createBatch(batch, pending ? req.file : null)
    if (pending) this.launch(batch, req.rows)
    return batch
  }

  /** Takes over every batch whose lease is free (its writer stopped or died). */
  private claim(): void {
    if (this.claiming || this.stopped) return
    this.claiming = (async () => {
      try {
        while (!this.stopped) {
          const now = Date.now()
          const batch = await this.store.claimBatch(this.owner, iso(now), iso(now + this.opts.leaseMs))
          if (!batch) return
          // Our own run whose lease lapsed (a stall): the claim renewed it, the run goes on.
          if (this.running.has(batch._id)) continue
          this.log.info({ batchId: batch._id, position: batch.position }, 'resuming an interrupted import')
          this.launch(batch, null)
        }
      } catch (err) {
        this.log.warn({ err }, 'could not look for interrupted imports')
      } finally {
        this.claiming = undefined
      }
    })()
  }

  private launch(batch: ImportBatchRecord, rows: CsvRow[] | null): void {
    const run = this.run(batch, rows)
      .catch((err: unknown) => {
        // The lease runs out and a process takes the batch up again from its position.
        this.log.error({ err, batchId: batch._id }, 'import interrupted by an error; it will be resumed')
      })
      .finally(() => this.running.delete(batch._id))
    this.running.set(batch._id, run)
  }

  private async run(batch: ImportBatchRecord, parsed: CsvRow[] | null): Promise<void> {
    const { store } = this
    const id = batch._id
    let lost = false
    const heartbeat = setInterval(
      () => {
        store.renewLease(id, this.owner, iso(Date.now() + this.opts.leaseMs)).then(
          (held) => {
            if (!held) lost = true
          },
          (err: unknown) => this.log.warn({ err, batchId: id }, 'could not renew an import lease'),
        )
      },
      Math.max(50, Math.floor(this.opts.leaseMs / 3)),
    )
    try {
      const rows = parsed ?? (await this.load(batch))
      if (!rows) {
        await store.finishBatch(id, this.owner, 'failed', iso(Date.now()))
        return
      }
      let position = batch.position
      let next = position
      // Slugs this run has taken, so that many rows with one name do not rescan the store.
      const taken = new KnownSlugs()
      while (next < rows.length) {
        if (lost) return
        if (this.stopped) {
          // Shutting down: hand the batch over at once rather than when the lease runs out.
          await store.releaseLease(id, this.owner)
          return
        }
        // The next rows of the file, up to ROWS_PER_TRANSACTION (fewer when they are large).
        // Rows refused at upload are in the batch's errors and counts from the start: skipped.
        const run: FileRow[] = []
        let chars = 0
        let end = next
        while (end < rows.length && run.length < ROWS_PER_TRANSACTION && chars < CHARS_PER_TRANSACTION) {
          const r = rows[end]
          if (r?.ok) {
            run.push({ index: end, row: r.row, value: r.value })
            chars += JSON.stringify(r.value).length
          }
          end++
        }
        position = await this.writeRun(batch, run, position, end, taken)
        next = end
        // Let requests (the status route among them) and the lease's heartbeat in between runs.
        await (this.opts.rowDelayMs > 0 ? sleep(this.opts.rowDelayMs * Math.max(1, run.length)) : nextTurn())
      }
      await store.finishBatch(id, this.owner, 'completed', iso(Date.now()))
    } catch (err) {
      if (!(err instanceof LeaseLostError)) throw err
      this.log.info({ batchId: id }, 'import taken over by another process')
    } finally {
      clearInterval(heartbeat)
    }
  }

  /** The rows of a resumed batch, read again from its file; null when it cannot be read. */
  private async load(batch: ImportBatchRecord): Promise<CsvRow[] | null> {
    const file = await this.store.getImportFile(batch._id)
    if (!file) {
      this.log.error({ batchId: batch._id }, 'the file of an interrupted import is gone; the batch fails')
      return null
    }
    try {
      return (await validatePromptCsv(file, { maxBytes: file.length, maxRows: batch.total })).rows
    } catch (err) {
      this.log.error(
        { err, batchId: batch._id },
        'the file of an interrupted import is unreadable; the batch fails',
      )
      return null
    }
  }

  private step(batch: ImportBatchRecord, from: number, to: number): ImportStep {
    return { batchId: batch._id, owner: this.owner, from, to, at: iso(Date.now()) }
  }

  /**
   * Writes rows `from`..`to` of the file in one transaction with the batch's progress; if that
   * fails (a slug taken meanwhile by someone else, or the store), writes them one at a time.
   * Answers the batch's position afterwards.
   */
  private async writeRun(
    batch: ImportBatchRecord,
    run: FileRow[],
    from: number,
    to: number,
    taken: KnownSlugs,
  ): Promise<number> {
    const before = taken.copy()
    const prompts: PromptRecord[] = []
    const errors: ImportRowError[] = []
    for (const item of run) {
      try {
        // Picks a free slug and builds the record; the store writes the whole run below.
        await this.service.create(batch.organizationId, batch.createdBy, item.value, taken, async (r) => {
          prompts.push(r)
        })
      } catch (err) {
        if (!(err instanceof AppError)) throw err
        errors.push({ row: item.row, message: err.message })
      }
    }
    try {
      await this.store.importRows(this.step(batch, from, to), prompts, errors)
      return to
    } catch (err) {
      if (err instanceof LeaseLostError) throw err
      if (!(err instanceof DuplicateSlugError)) {
        this.log.warn({ err, batchId: batch._id }, 'a run of import rows failed; writing them one by one')
      }
    }
    // Nothing of the run was written: the slugs it picked are free again.
    taken.restore(before)
    let position = from
    for (const item of run) {
      await this.writeOne(batch, item, position, taken)
      position = item.index + 1
    }
    return position
  }

  /** Writes one row with the batch's progress, or records why it could not be written. */
  private async writeOne(
    batch: ImportBatchRecord,
    item: FileRow,
    from: number,
    taken: KnownSlugs,
  ): Promise<void> {
    const { store } = this
    const step = () => this.step(batch, from, item.index + 1)
    for (let attempt = 1; ; attempt++) {
      try {
        await this.service.create(batch.organizationId, batch.createdBy, item.value, taken, (record) =>
          store.importRows(step(), [record], []),
        )
        return
      } catch (err) {
        if (err instanceof LeaseLostError) throw err
        // The row itself cannot be written (no free slug): reported, and the import goes on.
        if (err instanceof AppError)
          return store.importRows(step(), [], [{ row: item.row, message: err.message }])
        if (attempt >= ROW_ATTEMPTS) {
          this.log.warn({ err, row: item.row }, 'import row failed')
          return store.importRows(step(), [], [{ row: item.row, message: 'could not be saved' }])
        }
        await sleep(200 * attempt)
      }
    }
  }

  /** A batch of the workspace as the status route shows it. */
  async get(organizationId: string, batchId: string): Promise<ImportBatch> {
    const batch = await this.store.getBatch(organizationId, batchId)
    if (!batch) throw new AppError('NOT_FOUND', 'import batch not found')
    return this.view(batch)
  }

  /** The status route's view. */
  view(batch: ImportBatchRecord): ImportBatch {
    return {
      batchId: batch._id,
      status: batch.status,
      total: batch.total,
      created: batch.created,
      failed: batch.failed,
      errors: [...batch.errors].sort((a, b) => a.row - b.row),
      createdAt: batch.createdAt,
      updatedAt: batch.updatedAt,
      finishedAt: batch.finishedAt,
      resumedAt: batch.resumedAt,
    }
  }

  /** Stops after the rows being written and hands their batches over (released leases). */
  async stop(): Promise<void> {
    this.stopped = true
    clearInterval(this.timer)
    await this.claiming
    await Promise.all(this.running.values())
  }
}
