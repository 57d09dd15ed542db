import { setImmediate as nextTurn } from 'node:timers/promises'
import { AppError, type ImportBatch, type ImportRowError } from '@pm/contracts'
import { newId } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import type { ImportBatchRecord } from '../store/types.ts'
import type { CsvPrompt, CsvRow } from './csv.ts'
import type { PromptsService } from './prompts.ts'

export interface ImporterOptions {
  /** Rows written between two progress updates of the batch record. */
  progressEvery: number
  /** A batch still "processing" whose record has not moved for this long was interrupted. */
  staleMs: number
}

/**
 * Writes the rows of a validated CSV file as prompts, in the background, keeping the
 * batch's progress in the store so that any replica can answer the status route. Each row
 * is one insert: a row is either a whole prompt or reported in `errors`, never half-written.
 */
export class Importer {
  private readonly service: PromptsService
  private readonly log: FastifyBaseLogger
  private readonly opts: ImporterOptions
  private readonly running = new Set<Promise<void>>()
  private stopped = false

  constructor(service: PromptsService, log: FastifyBaseLogger, opts: ImporterOptions) {
    this.service = service
    this.log = log
    this.opts = opts
  }

  /** Records the batch (bad rows already in its errors) and starts writing the good rows. */
  async begin(organizationId: string, userId: string, rows: CsvRow[]): Promise<ImportBatchRecord> {
    if (this.stopped) throw new AppError('SERVICE_UNAVAILABLE', 'the service is shutting down')
    const errors: ImportRowError[] = []
    const good: Array<{ row: number; value: CsvPrompt }> = []
    for (const r of rows) {
      if (r.ok) good.push({ row: r.row, value: r.value })
      else errors.push({ row: r.row, message: r.message })
    }
    const now = new Date().toISOString()
    const batch: ImportBatchRecord = {
      _id: newId(),
      organizationId,
      createdBy: userId,
      status: good.length === 0 ? 'completed' : 'processing',
      total: rows.length,
      created: 0,
      failed: errors.length,
      errors,
      createdAt: now,
      updatedAt: now,
      finishedAt: good.length === 0 ? now : null,
    }
    await this.service.store.createBatch(batch)
    if (good.length > 0) {
      const run = this.run(batch, good).catch((err: unknown) => {
        this.log.error({ err, batchId: batch._id }, 'import failed')
      })
      this.running.add(run)
      void run.finally(() => this.running.delete(run))
    }
    return batch
  }

  private async run(batch: ImportBatchRecord, good: Array<{ row: number; value: CsvPrompt }>): Promise<void> {
    const { store } = this.service
    // Slugs this import has taken, so that many rows with one name do not rescan the store.
    const taken = new Set<string>()
    let created = 0
    let failed = batch.failed
    let pending: ImportRowError[] = []
    const flush = async (final?: { status: 'completed' | 'failed' }) => {
      const now = new Date().toISOString()
      await store.updateBatch(batch._id, {
        created,
        failed,
        appendErrors: pending,
        updatedAt: now,
        ...(final ? { status: final.status, finishedAt: now } : {}),
      })
      pending = []
    }
    for (let i = 0; i < good.length; i++) {
      const item = good[i]
      if (!item) continue
      if (this.stopped) {
        // Shutting down: say exactly which rows were not written so they can be sent again.
        for (const rest of good.slice(i)) {
          failed++
          pending.push({ row: rest.row, message: 'not imported: the service stopped during the import' })
        }
        await flush({ status: 'failed' })
        return
      }
      try {
        await this.service.create(
          batch.organizationId,
          batch.createdBy,
          {
            name: item.value.name,
            template: item.value.template,
            description: item.value.description,
            tags: item.value.tags,
          },
          taken,
        )
        created++
      } catch (err) {
        failed++
        pending.push({
          row: item.row,
          message: err instanceof AppError ? err.message : 'could not be saved',
        })
        if (!(err instanceof AppError)) this.log.warn({ err, row: item.row }, 'import row failed')
      }
      if ((i + 1) % this.opts.progressEvery === 0) {
        await flush()
        // Let requests (the status route among them) in between chunks of writes.
        await nextTurn()
      }
    }
    await flush({ status: 'completed' })
  }

  /** The status route's view; a batch whose writer died (crash) shows as failed. */
  view(batch: ImportBatchRecord): ImportBatch {
    const interrupted =
      batch.status === 'processing' && Date.now() - Date.parse(batch.updatedAt) > this.opts.staleMs
    return {
      batchId: batch._id,
      status: interrupted ? 'failed' : batch.status,
      total: batch.total,
      created: batch.created,
      failed: batch.failed,
      errors: [...batch.errors].sort((a, b) => a.row - b.row),
      createdAt: batch.createdAt,
      updatedAt: batch.updatedAt,
      finishedAt: batch.finishedAt,
    }
  }

  /** Stops after the row being written and waits for the batches to record where they stopped. */
  async stop(): Promise<void> {
    this.stopped = true
    await Promise.all(this.running)
  }
}
