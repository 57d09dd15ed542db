import type {
  AuditEntry,
  Evaluator,
  ExperimentStatus,
  ExperimentVariant,
  VariantSummary,
} from '@pm/contracts'
import type { AuditOutbox, VerifiedContext } from '@pm/kit'

export interface DatasetRecord {
  _id: string
  organizationId: string
  name: string
  description: string
  itemCount: number
  createdAt: string
  updatedAt: string
}

export interface ItemRecord {
  _id: string
  organizationId: string
  datasetId: string
  /** 1-based, in the order items were added; never reused. */
  position: number
  variables: Record<string, unknown>
  expected: string | null
  metadata: Record<string, unknown> | null
  createdAt: string
}

/** An item to add: the store gives it its position. */
export type NewItem = Omit<ItemRecord, 'position'>

export interface ExperimentRecord {
  _id: string
  organizationId: string
  name: string
  datasetId: string
  variants: ExperimentVariant[]
  connectionId: string
  model: string | null
  params: Record<string, unknown> | null
  evaluators: Evaluator[]
  concurrency: number
  status: ExperimentStatus
  total: number
  /** Who started it: each unit's run acts as this caller (its workspace, its scopes). */
  caller: VerifiedContext
  error: string | null
  /** Frozen when it ends; computed from the units while it runs. */
  summary: VariantSummary[] | null
  /** Whether `experiment.completed` has been handed to the bus. */
  announced: boolean
  createdAt: string
  startedAt: string | null
  finishedAt: string | null
}

/** One (item, variant) of an experiment: `_id` is `<experimentId>:<itemId>:<variant>`, its idempotency key. */
export interface UnitRecord {
  _id: string
  experimentId: string
  organizationId: string
  itemId: string
  position: number
  variant: number
  /** `cancelled`: still pending when its experiment was cancelled; never run or recorded after. */
  status: 'pending' | 'done' | 'cancelled'
  leaseToken: string | null
  leaseUntil: string | null
  /** Not to be claimed before (a provider's Retry-After). */
  notBefore: string | null
  /** How many times the provider answered 429 for it (bounded: EXPERIMENT_MAX_RATE_LIMITED_ATTEMPTS). */
  rateLimited: number
  output: string | null
  scores: Record<string, number | null>
  evaluatorErrors: Record<string, string>
  passed: boolean
  latencyMs: number | null
  inputTokens: number
  outputTokens: number
  error: string | null
  finishedAt: string | null
}

export type UnitResult = Pick<
  UnitRecord,
  'output' | 'scores' | 'evaluatorErrors' | 'passed' | 'latencyMs' | 'inputTokens' | 'outputTokens' | 'error'
> & { finishedAt: string }

export interface Page<T> {
  rows: T[]
  total: number
}
export interface PageArgs {
  page: number
  limit: number
}

export function unitId(experimentId: string, itemId: string, variant: number): string {
  return `${experimentId}:${itemId}:${variant}`
}

/** A unit not yet run: one item under one variant. */
export function pendingUnit(
  experimentId: string,
  organizationId: string,
  item: { _id: string; position: number },
  variant: number,
): UnitRecord {
  return {
    _id: unitId(experimentId, item._id, variant),
    experimentId,
    organizationId,
    itemId: item._id,
    position: item.position,
    variant,
    status: 'pending',
    leaseToken: null,
    leaseUntil: null,
    notBefore: null,
    rateLimited: 0,
    output: null,
    scores: {},
    evaluatorErrors: {},
    passed: false,
    latencyMs: null,
    inputTokens: 0,
    outputTokens: 0,
    error: null,
    finishedAt: null,
  }
}

export type AddItemsOutcome = { itemCount: number } | 'not-found' | 'too-many'

/** `in-use`: an experiment on it is queued or running, so nothing was deleted. */
export type DeleteDatasetOutcome = 'deleted' | 'not-found' | 'in-use'

/**
 * Datasets, items, experiments and their units: SQLite in the embedded default, MongoDB otherwise;
 * and the audit outbox of their changes.
 *
 * `audit` (on the changes a user makes): the change's audit entries (DESIGN section 15), written
 * into the audit outbox in the same transaction, and only when the change is made (not for a
 * dataset or item that is not there, a bound passed, a transition from another status).
 */
export interface ExperimentStore extends AuditOutbox {
  createDataset(dataset: DatasetRecord, audit?: AuditEntry[]): Promise<void>
  getDataset(organizationId: string, id: string): Promise<DatasetRecord | null>
  listDatasets(organizationId: string, page: PageArgs): Promise<Page<DatasetRecord>>
  updateDataset(
    organizationId: string,
    id: string,
    patch: Partial<Pick<DatasetRecord, 'name' | 'description'>> & { updatedAt: string },
    audit?: AuditEntry[],
  ): Promise<DatasetRecord | null>
  /**
   * Deletes the dataset and its items, unless an experiment on it is queued or running: the check
   * and the delete are one transaction, so an experiment created meanwhile is seen (or refused).
   */
  deleteDataset(organizationId: string, id: string, audit?: AuditEntry[]): Promise<DeleteDatasetOutcome>
  /** Adds every item or none: none when the dataset would pass `max` items. */
  addItems(
    organizationId: string,
    datasetId: string,
    items: NewItem[],
    max: number,
    audit?: AuditEntry[],
  ): Promise<AddItemsOutcome>
  listItems(organizationId: string, datasetId: string, page: PageArgs): Promise<Page<ItemRecord>>
  /** Every item of a dataset, by position. */
  allItems(datasetId: string): Promise<ItemRecord[]>
  getItem(datasetId: string, itemId: string): Promise<ItemRecord | null>
  deleteItem(
    organizationId: string,
    datasetId: string,
    itemId: string,
    audit?: AuditEntry[],
  ): Promise<boolean>

  /**
   * The experiment and its pending units, written together; nothing, and false, when its dataset
   * (of its organization) is no longer there (deleted since its items were read).
   */
  createExperiment(experiment: ExperimentRecord, units: UnitRecord[], audit?: AuditEntry[]): Promise<boolean>
  getExperiment(organizationId: string | null, id: string): Promise<ExperimentRecord | null>
  listExperiments(organizationId: string, page: PageArgs, promptId?: string): Promise<Page<ExperimentRecord>>
  /** Moves the status from one of `from` to `to` (with the other fields); false when it was not in `from`. */
  transition(
    id: string,
    from: readonly ExperimentStatus[],
    to: ExperimentStatus,
    fields?: Partial<Pick<ExperimentRecord, 'startedAt' | 'finishedAt' | 'error' | 'summary'>>,
    audit?: AuditEntry[],
  ): Promise<boolean>
  /** Experiments queued or running (resumed at start, polled by the runner). */
  activeExperiments(): Promise<ExperimentRecord[]>
  /** Ended experiments whose event was not handed to the bus yet. */
  unannounced(): Promise<ExperimentRecord[]>
  markAnnounced(id: string): Promise<void>

  /** Claims up to `n` pending units that are due and not leased (or whose lease ran out). */
  claimUnits(
    experimentId: string,
    n: number,
    now: string,
    leaseUntil: string,
    token: string,
  ): Promise<UnitRecord[]>
  /** Extends the leases this token holds on these pending units (the units still in flight). */
  renewLeases(ids: readonly string[], token: string, leaseUntil: string): Promise<void>
  /**
   * Gives a unit back (a 429, a cancel): due again at `notBefore`, or at once. `rateLimited`: the
   * provider answered 429, counted on the unit.
   */
  releaseUnit(id: string, token: string, notBefore: string | null, rateLimited?: boolean): Promise<void>
  /**
   * A cancelled experiment's pending units become `cancelled`, so that none is recorded after
   * (`completeUnit` takes only a pending one) and the frozen summary holds every unit done.
   */
  cancelUnits(experimentId: string): Promise<void>
  /** Records a unit's result once: false when it was already done (a repeat after a crash). */
  completeUnit(id: string, result: UnitResult): Promise<boolean>
  countUnits(experimentId: string): Promise<{ done: number; pending: number }>
  /** The finished units of an experiment (what the aggregates need). */
  doneUnits(experimentId: string): Promise<UnitRecord[]>
  listResults(
    experimentId: string,
    page: PageArgs,
    filter: { variant?: number; failed?: boolean },
  ): Promise<Page<UnitRecord>>

  check(): Promise<void>
  close(): Promise<void>
}
