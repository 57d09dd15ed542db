import {
  AppError,
  type AuditAction,
  type AuditEntry,
  type CallerContext,
  type CreateDatasetRequest,
  type CreateExperimentRequest,
  DATASET_ITEMS_MAX,
  type Dataset,
  type DatasetItem,
  type DatasetItemInput,
  type Experiment,
  type ExperimentCompletedEvent,
  type ExperimentResult,
  pagination,
  SUBJECTS,
  type UpdateDatasetRequest,
} from '@pm/contracts'
import type { EventBus } from '@pm/bus'
import { type AuditContext, auditEntry, newId, type VerifiedContext } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { summarize } from '../domain/aggregate.ts'
import { compileEvaluators, EvaluatorConfigError, evaluatorNames } from '../domain/evaluators.ts'
import { variableNameProblem } from '../domain/items.ts'
import type {
  DatasetRecord,
  ExperimentRecord,
  ExperimentStore,
  ItemRecord,
  PageArgs,
  UnitRecord,
} from '../store/types.ts'
import { pendingUnit } from '../store/types.ts'
import type { PromptsClient } from './clients.ts'
import type { Runner } from './runner.ts'

export interface ExperimentsServiceOptions {
  store: ExperimentStore
  bus: EventBus
  prompts: PromptsClient
  runner: Runner
  log: FastifyBaseLogger
  defaultConcurrency: number
  /** Told when audit entries were written (the relay publishes them at once). */
  onAudit?: () => void
}

const toDataset = (d: DatasetRecord): Dataset => ({
  _id: d._id,
  organizationId: d.organizationId,
  name: d.name,
  description: d.description,
  itemCount: d.itemCount,
  createdAt: d.createdAt,
  updatedAt: d.updatedAt,
})

const toItem = (i: ItemRecord): DatasetItem => ({
  _id: i._id,
  datasetId: i.datasetId,
  position: i.position,
  variables: i.variables,
  expected: i.expected,
  metadata: i.metadata,
  createdAt: i.createdAt,
})

/** A metadata object is kept whole: at most this many bytes of JSON per item. */
const METADATA_MAX_BYTES = 16 * 1024

/** Datasets and experiments: the logic behind the routes, and the experiment's lifecycle. */
export class ExperimentsService {
  private readonly opts: ExperimentsServiceOptions

  constructor(opts: ExperimentsServiceOptions) {
    this.opts = opts
  }

  /**
   * The change's entry, or none without a context (DESIGN section 15). The resource is the dataset
   * for every change of a dataset or of its items, so that its entries are found together.
   */
  private audit(
    ctx: AuditContext | undefined,
    organizationId: string,
    action: AuditAction & (`dataset.${string}` | `experiment.${string}`),
    resource: { type: 'dataset' | 'experiment'; id: string },
    summary: () => string,
  ): AuditEntry[] {
    return ctx ? [auditEntry(ctx, organizationId, action, resource, summary())] : []
  }

  private audited(entries: readonly AuditEntry[]): void {
    if (entries.length > 0) this.opts.onAudit?.()
  }

  // ---- datasets

  private async dataset(organizationId: string, id: string): Promise<DatasetRecord> {
    const d = await this.opts.store.getDataset(organizationId, id)
    if (!d) throw new AppError('NOT_FOUND', 'dataset not found')
    return d
  }

  async createDataset(
    organizationId: string,
    body: CreateDatasetRequest,
    audit?: AuditContext,
  ): Promise<Dataset> {
    const now = new Date().toISOString()
    const record: DatasetRecord = {
      _id: newId(),
      organizationId,
      name: body.name.trim(),
      description: body.description ?? '',
      itemCount: 0,
      createdAt: now,
      updatedAt: now,
    }
    const items = body.items ?? []
    this.checkItems(items, '/body/items')
    const entries = this.audit(
      audit,
      organizationId,
      'dataset.created',
      { type: 'dataset', id: record._id },
      () => `created the dataset "${record.name}"`,
    )
    await this.opts.store.createDataset(record, entries)
    this.audited(entries)
    // The items are a write of their own (as an upload is): their entry is `dataset.items_added`.
    if (items.length > 0) await this.addItems(organizationId, record._id, items, audit)
    return toDataset(await this.dataset(organizationId, record._id))
  }

  getDataset = async (organizationId: string, id: string): Promise<Dataset> =>
    toDataset(await this.dataset(organizationId, id))

  async listDatasets(organizationId: string, p: PageArgs) {
    const { rows, total } = await this.opts.store.listDatasets(organizationId, p)
    return { datasets: rows.map(toDataset), pagination: pagination(p.page, p.limit, total) }
  }

  async updateDataset(
    organizationId: string,
    id: string,
    body: UpdateDatasetRequest,
    audit?: AuditContext,
  ): Promise<Dataset> {
    const patch = {
      ...(body.name !== undefined ? { name: body.name.trim() } : {}),
      ...(body.description !== undefined ? { description: body.description } : {}),
      updatedAt: new Date().toISOString(),
    }
    const current = audit ? await this.dataset(organizationId, id) : undefined
    const entries = this.audit(audit, organizationId, 'dataset.updated', { type: 'dataset', id }, () => {
      const said: string[] = []
      if (patch.name !== undefined && patch.name !== current?.name)
        said.push(`renamed from "${current?.name}"`)
      if (body.description !== undefined) said.push('description changed')
      return `updated the dataset "${patch.name ?? current?.name}"${said.length > 0 ? `: ${said.join('; ')}` : ''}`
    })
    const d = await this.opts.store.updateDataset(organizationId, id, patch, entries)
    if (!d) throw new AppError('NOT_FOUND', 'dataset not found')
    this.audited(entries)
    return toDataset(d)
  }

  async deleteDataset(
    organizationId: string,
    id: string,
    audit?: AuditContext,
  ): Promise<{ _id: string; deleted: true }> {
    const current = await this.dataset(organizationId, id)
    const entries = this.audit(
      audit,
      organizationId,
      'dataset.deleted',
      { type: 'dataset', id },
      () => `deleted the dataset "${current.name}" with its ${current.itemCount} items`,
    )
    // The store checks for an active experiment in the delete's own transaction.
    const outcome = await this.opts.store.deleteDataset(organizationId, id, entries)
    if (outcome === 'not-found') throw new AppError('NOT_FOUND', 'dataset not found')
    if (outcome === 'in-use')
      throw new AppError('CONFLICT', 'an experiment on this dataset is queued or running: cancel it first')
    this.audited(entries)
    return { _id: id, deleted: true }
  }

  private checkItems(items: readonly DatasetItemInput[], path: string): void {
    items.forEach((it, i) => {
      // The schema's key bounds are not checked on a record's keys: the upload's rule, here too.
      for (const name of Object.keys(it.variables)) {
        const problem = variableNameProblem(name)
        if (problem !== null) {
          throw new AppError('VALIDATION_ERROR', `item ${i}: ${problem}`, {
            errors: [{ path: `${path}/${i}/variables`, message: problem }],
          })
        }
      }
      if (it.metadata && Buffer.byteLength(JSON.stringify(it.metadata)) > METADATA_MAX_BYTES) {
        throw new AppError(
          'VALIDATION_ERROR',
          `item ${i}: metadata is larger than ${METADATA_MAX_BYTES} bytes`,
          {
            errors: [
              { path: `${path}/${i}/metadata`, message: `at most ${METADATA_MAX_BYTES} bytes of JSON` },
            ],
          },
        )
      }
    })
  }

  /**
   * Adds every item or none (10,000 per dataset at most). One audit entry for the whole batch (a
   * JSON body or an uploaded file), with the count: the items' content is the user's data, not
   * a change to describe one by one.
   */
  async addItems(
    organizationId: string,
    datasetId: string,
    items: readonly DatasetItemInput[],
    audit?: AuditContext,
    from?: string,
  ) {
    this.checkItems(items, '/body/items')
    const now = new Date().toISOString()
    const current = audit ? await this.dataset(organizationId, datasetId) : undefined
    const entries = this.audit(
      audit,
      organizationId,
      'dataset.items_added',
      { type: 'dataset', id: datasetId },
      () =>
        `added ${items.length} ${items.length === 1 ? 'item' : 'items'} to the dataset "${current?.name}"${from ? ` from ${from}` : ''}`,
    )
    const outcome = await this.opts.store.addItems(
      organizationId,
      datasetId,
      items.map((it) => ({
        _id: newId(),
        organizationId,
        datasetId,
        variables: it.variables,
        expected: it.expected ?? null,
        metadata: it.metadata ?? null,
        createdAt: now,
      })),
      DATASET_ITEMS_MAX,
      entries,
    )
    if (outcome === 'not-found') throw new AppError('NOT_FOUND', 'dataset not found')
    if (outcome === 'too-many') {
      const d = await this.dataset(organizationId, datasetId)
      throw new AppError(
        'CONFLICT',
        `a dataset holds at most ${DATASET_ITEMS_MAX} items: it has ${d.itemCount}, and ${items.length} more would pass the bound; nothing was added`,
        { itemCount: d.itemCount, adding: items.length, max: DATASET_ITEMS_MAX },
      )
    }
    this.audited(entries)
    return { added: items.length, itemCount: outcome.itemCount }
  }

  /** Room left in a dataset (an upload is parsed against it before anything is written). */
  async room(organizationId: string, datasetId: string): Promise<number> {
    return DATASET_ITEMS_MAX - (await this.dataset(organizationId, datasetId)).itemCount
  }

  async listItems(organizationId: string, datasetId: string, p: PageArgs) {
    await this.dataset(organizationId, datasetId)
    const { rows, total } = await this.opts.store.listItems(organizationId, datasetId, p)
    return { items: rows.map(toItem), pagination: pagination(p.page, p.limit, total) }
  }

  async deleteItem(organizationId: string, datasetId: string, itemId: string, audit?: AuditContext) {
    const d = await this.dataset(organizationId, datasetId)
    const item = audit ? await this.opts.store.getItem(datasetId, itemId) : null
    const entries = item
      ? this.audit(
          audit,
          organizationId,
          'dataset.item_deleted',
          { type: 'dataset', id: datasetId },
          () => `deleted item ${item.position} (${itemId}) of the dataset "${d.name}"`,
        )
      : []
    if (!(await this.opts.store.deleteItem(organizationId, datasetId, itemId, entries)))
      throw new AppError('NOT_FOUND', 'item not found')
    this.audited(entries)
    return { _id: itemId, deleted: true as const }
  }

  // ---- experiments

  async createExperiment(
    caller: CallerContext,
    organizationId: string,
    body: CreateExperimentRequest,
    audit?: AuditContext,
  ) {
    const { store } = this.opts
    try {
      compileEvaluators(body.evaluators)
    } catch (err) {
      if (err instanceof EvaluatorConfigError) {
        throw new AppError('VALIDATION_ERROR', `evaluators[${err.index}]: ${err.message}`, {
          errors: [{ path: `/body/evaluators/${err.index}`, message: err.message }],
        })
      }
      throw err
    }
    const dataset = await store.getDataset(organizationId, body.datasetId)
    if (!dataset) throw new AppError('NOT_FOUND', 'dataset not found')
    body.variants.forEach((v, i) => {
      const chosen = [v.version !== undefined, v.env !== undefined, v.draft === true].filter(Boolean).length
      if (chosen > 1) {
        throw new AppError('VALIDATION_ERROR', `variants[${i}]: give at most one of version, env and draft`, {
          errors: [{ path: `/body/variants/${i}`, message: 'at most one of version, env, draft' }],
        })
      }
    })
    const { requestId, ...context } = caller
    const signed: VerifiedContext = { ...context, organizationId }
    for (const [i, v] of body.variants.entries())
      await this.opts.prompts.checkVariant(signed, requestId, v, i)
    const items = await store.allItems(dataset._id)
    if (items.length === 0) {
      // Deleted while the variants were checked: not found, rather than empty.
      await this.dataset(organizationId, dataset._id)
      throw new AppError('VALIDATION_ERROR', 'the dataset has no items', {
        errors: [{ path: '/body/datasetId', message: 'empty dataset' }],
      })
    }
    const now = new Date().toISOString()
    const experiment: ExperimentRecord = {
      _id: newId(),
      organizationId,
      name: body.name.trim(),
      datasetId: dataset._id,
      variants: body.variants,
      connectionId: body.connectionId,
      model: body.model ?? null,
      params: body.params ?? null,
      evaluators: body.evaluators,
      concurrency: body.concurrency ?? this.opts.defaultConcurrency,
      status: 'queued',
      total: items.length * body.variants.length,
      caller: signed,
      error: null,
      summary: null,
      announced: false,
      createdAt: now,
      startedAt: null,
      finishedAt: null,
    }
    const units: UnitRecord[] = []
    for (const item of items) {
      for (let variant = 0; variant < body.variants.length; variant++) {
        units.push(pendingUnit(experiment._id, organizationId, item, variant))
      }
    }
    const entries = this.audit(
      audit,
      organizationId,
      'experiment.created',
      { type: 'experiment', id: experiment._id },
      () =>
        `started the experiment "${experiment.name}" on the dataset "${dataset.name}": ${body.variants.length} ${
          body.variants.length === 1 ? 'variant' : 'variants'
        } × ${items.length} items`,
    )
    // Deleted since its items were read: no experiment on nothing (every unit would fail).
    if (!(await store.createExperiment(experiment, units, entries)))
      throw new AppError('NOT_FOUND', 'dataset not found')
    this.audited(entries)
    // The job: a durable message any replica's consumer takes (the store's scan is the net).
    await this.opts.bus
      .publishDurable(SUBJECTS.experimentQueued, { experimentId: experiment._id }, experiment._id)
      .catch((err: unknown) =>
        this.opts.log.warn(
          { err, experimentId: experiment._id },
          'queued message not sent; the scan starts it',
        ),
      )
    return { experimentId: experiment._id, status: 'queued' as const }
  }

  /** A queued experiment is taken (queued → running) and driven here; a running one is resumed. */
  async take(experimentId: string): Promise<void> {
    const { store, runner } = this.opts
    const exp = await store.getExperiment(null, experimentId)
    if (!exp) return
    if (exp.status === 'queued')
      await store.transition(exp._id, ['queued'], 'running', { startedAt: new Date().toISOString() })
    else if (exp.status !== 'running') return
    runner.drive(exp._id, exp.organizationId)
  }

  /** Resumes what is active and announces what ended unannounced (start-up and every scan). */
  async scan(): Promise<void> {
    for (const exp of await this.opts.store.activeExperiments()) {
      if (!this.opts.runner.isDriving(exp._id)) await this.take(exp._id)
    }
    for (const exp of await this.opts.store.unannounced()) {
      // A cancel that a crash interrupted before its summary was frozen.
      await this.announce(
        exp.status === 'cancelled' && exp.summary === null ? await this.freezeCancelled(exp) : exp,
      )
    }
  }

  /**
   * A cancelled experiment's last pending units are cancelled (none is recorded after), then its
   * summary is frozen from the units done: `progress.done` and the summary count the same units,
   * whichever replica recorded a unit during the cancel.
   */
  private async freezeCancelled(exp: ExperimentRecord): Promise<ExperimentRecord> {
    const { store } = this.opts
    await store.cancelUnits(exp._id)
    const summary = summarize(exp.variants, evaluatorNames(exp.evaluators), await store.doneUnits(exp._id))
    await store.transition(exp._id, ['cancelled'], 'cancelled', { summary })
    return { ...exp, summary }
  }

  private async summaryOf(exp: ExperimentRecord) {
    if (exp.summary !== null && exp.status !== 'running' && exp.status !== 'queued') return exp.summary
    return summarize(exp.variants, evaluatorNames(exp.evaluators), await this.opts.store.doneUnits(exp._id))
  }

  /**
   * Every unit is done: completed, or failed when not one unit got an answer. Or the experiment
   * cannot run at all (`cannotRun` says why): failed.
   */
  ended = async (exp: ExperimentRecord, cannotRun?: string): Promise<void> => {
    const summary = await this.summaryOf(exp)
    const answered = summary.some((s) => s.done > s.errors)
    const finishedAt = new Date().toISOString()
    const moved =
      answered && cannotRun === undefined
        ? await this.opts.store.transition(exp._id, ['running'], 'completed', { summary, finishedAt })
        : await this.opts.store.transition(exp._id, ['running'], 'failed', {
            summary,
            finishedAt,
            error: cannotRun ?? 'every unit failed',
          })
    if (moved) {
      const fresh = await this.opts.store.getExperiment(null, exp._id)
      if (fresh) await this.announce(fresh)
    }
  }

  private async announce(exp: ExperimentRecord): Promise<void> {
    const { done } = await this.opts.store.countUnits(exp._id)
    const event: ExperimentCompletedEvent = {
      id: exp._id,
      type: 'experiment.completed',
      createdAt: exp.finishedAt ?? new Date().toISOString(),
      organizationId: exp.organizationId,
      data: {
        experimentId: exp._id,
        name: exp.name,
        datasetId: exp.datasetId,
        status: exp.status,
        progress: { done, total: exp.total },
        summary: exp.summary ?? [],
      },
    }
    try {
      // The message id is the experiment's: a repeat after a crash is stored once.
      await this.opts.bus.publishDurable(SUBJECTS.experimentCompleted, event, exp._id)
      await this.opts.store.markAnnounced(exp._id)
    } catch (err) {
      this.opts.log.warn(
        { err, experimentId: exp._id },
        'experiment.completed not sent yet; the next scan sends it',
      )
    }
  }

  private async view(exp: ExperimentRecord): Promise<Experiment> {
    const { done } = await this.opts.store.countUnits(exp._id)
    return {
      _id: exp._id,
      organizationId: exp.organizationId,
      name: exp.name,
      datasetId: exp.datasetId,
      variants: exp.variants,
      connectionId: exp.connectionId,
      model: exp.model,
      params: exp.params,
      evaluators: exp.evaluators,
      concurrency: exp.concurrency,
      status: exp.status,
      progress: { done, total: exp.total },
      summary: await this.summaryOf(exp),
      error: exp.error,
      createdAt: exp.createdAt,
      startedAt: exp.startedAt,
      finishedAt: exp.finishedAt,
    }
  }

  private async experiment(organizationId: string, id: string): Promise<ExperimentRecord> {
    const exp = await this.opts.store.getExperiment(organizationId, id)
    if (!exp) throw new AppError('NOT_FOUND', 'experiment not found')
    return exp
  }

  getExperiment = async (organizationId: string, id: string): Promise<Experiment> =>
    this.view(await this.experiment(organizationId, id))

  async listExperiments(organizationId: string, p: PageArgs, promptId?: string) {
    const { rows, total } = await this.opts.store.listExperiments(organizationId, p, promptId)
    const experiments: Experiment[] = []
    for (const r of rows) experiments.push(await this.view(r))
    return { experiments, pagination: pagination(p.page, p.limit, total) }
  }

  async cancel(organizationId: string, id: string, audit?: AuditContext): Promise<Experiment> {
    const exp = await this.experiment(organizationId, id)
    const entries = this.audit(
      audit,
      organizationId,
      'experiment.cancelled',
      { type: 'experiment', id },
      () => `cancelled the experiment "${exp.name}" (it was ${exp.status})`,
    )
    // No summary yet: it is frozen once no unit can be recorded any more (freezeCancelled).
    const moved = await this.opts.store.transition(
      id,
      ['queued', 'running'],
      'cancelled',
      { finishedAt: new Date().toISOString() },
      entries,
    )
    if (!moved) throw new AppError('CONFLICT', `the experiment has already ended (${exp.status})`)
    this.audited(entries)
    this.opts.runner.stop(id)
    const fresh = await this.freezeCancelled(await this.experiment(organizationId, id))
    await this.announce(fresh)
    return this.view(fresh)
  }

  async results(
    organizationId: string,
    id: string,
    p: PageArgs,
    filter: { variant?: number; failed?: boolean },
  ) {
    const exp = await this.experiment(organizationId, id)
    const { rows, total } = await this.opts.store.listResults(id, p, filter)
    const items = new Map<string, ItemRecord | null>()
    const results: ExperimentResult[] = []
    for (const u of rows) {
      if (!items.has(u.itemId)) items.set(u.itemId, await this.opts.store.getItem(exp.datasetId, u.itemId))
      const item = items.get(u.itemId) ?? null
      results.push({
        itemId: u.itemId,
        position: u.position,
        variant: u.variant,
        variables: item?.variables ?? {},
        expected: item?.expected ?? null,
        output: u.output,
        scores: u.scores,
        evaluatorErrors: u.evaluatorErrors,
        passed: u.passed,
        latencyMs: u.latencyMs,
        tokens: { input: u.inputTokens, output: u.outputTokens },
        error: u.error,
        finishedAt: u.finishedAt ?? exp.createdAt,
      })
    }
    return { results, pagination: pagination(p.page, p.limit, total) }
  }
}
