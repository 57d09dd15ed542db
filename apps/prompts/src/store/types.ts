import type {
  Author,
  EnvironmentName,
  ImportRowError,
  ImportStatus,
  Pin,
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
  template: string
  variables: Variable[]
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
  template: string
  variables: Variable[]
  createdBy: Author
  changeLog: string
}

export interface OutboxRecord {
  _id: string
  subject: string
  msgId: string
  payload: unknown
  createdAt: string
  sentAt: string | null
}

/** A CSV import: its progress is kept here so any replica can answer the status route. */
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
}

export interface ImportBatchUpdate {
  status?: ImportStatus
  created?: number
  failed?: number
  /** Appended to the batch's errors (rows that failed while being written). */
  appendErrors?: ImportRowError[]
  updatedAt: string
  finishedAt?: string
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
    'name' | 'slug' | 'description' | 'tags' | 'template' | 'variables' | 'isPublic' | 'environments'
  >
> & { updatedAt: string }

/** A new version and the event announcing it, built from the prompt as it is inside the transaction. */
export type VersionBuilder = (
  prompt: PromptRecord,
  nextVersion: number,
) => { version: VersionRecord; outbox: OutboxRecord }

export class DuplicateSlugError extends Error {
  constructor() {
    super('slug taken')
    this.name = 'DuplicateSlugError'
  }
}

/**
 * The prompts service's data. `publish` is the one step that must be atomic across
 * records: the version, the prompt's counters and the outbox event are written together
 * or not at all, and two concurrent publishes get consecutive numbers.
 */
export interface PromptStore {
  createPrompt(prompt: PromptRecord): Promise<void>
  getPrompt(organizationId: string, id: string): Promise<PromptRecord | null>
  /** Without a workspace check: for internal lookups that check visibility themselves. */
  getPromptById(id: string): Promise<PromptRecord | null>
  isSlugTaken(organizationId: string, slug: string): Promise<boolean>
  listPrompts(filter: PromptFilter, page: Page): Promise<{ prompts: PromptRecord[]; total: number }>
  summary(organizationId: string): Promise<{ total: number; public: number; published: number }>
  listPublic(search: string | undefined, page: Page): Promise<{ prompts: PromptRecord[]; total: number }>
  /** Null when the prompt is not in the workspace. */
  updatePrompt(organizationId: string, id: string, patch: PromptPatch): Promise<PromptRecord | null>
  /** Removes the prompt and its versions; false when it was not there. */
  deletePrompt(organizationId: string, id: string): Promise<boolean>
  /** Sets one environment's pin without touching the other (two promotes at once both land). */
  setPin(
    organizationId: string,
    id: string,
    env: EnvironmentName,
    pin: Pin,
    updatedAt: string,
  ): Promise<PromptRecord | null>

  publish(organizationId: string, promptId: string, build: VersionBuilder): Promise<VersionRecord | null>
  /** Writes a forked prompt with its first version and event, atomically. */
  createWithVersion(prompt: PromptRecord, version: VersionRecord, outbox: OutboxRecord): Promise<void>
  listVersions(promptId: string, order: 'version' | 'publishedAt'): Promise<VersionRecord[]>
  getVersion(promptId: string, versionId: string): Promise<VersionRecord | null>
  getVersionByNumber(promptId: string, version: number): Promise<VersionRecord | null>
  /** The versions with these ids (any prompt), in no particular order. */
  getVersionsByIds(ids: string[]): Promise<VersionRecord[]>

  pendingOutbox(limit: number): Promise<OutboxRecord[]>
  markOutboxSent(id: string, at: string): Promise<void>
  /** Forgets events sent before `before` (long past JetStream's duplicate window). */
  pruneOutbox(before: string): Promise<number>

  createBatch(batch: ImportBatchRecord): Promise<void>
  getBatch(organizationId: string, id: string): Promise<ImportBatchRecord | null>
  updateBatch(id: string, update: ImportBatchUpdate): Promise<void>

  check(): Promise<void>
  close(): Promise<void>
}
