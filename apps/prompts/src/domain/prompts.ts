import {
  AppError,
  type Author,
  type CallerContext,
  type CreatePromptRequest,
  type EnvironmentName,
  type Environments,
  type Pin,
  type Prompt,
  type PromptChangedEvent,
  type PromptChangeReason,
  type PublicPrompt,
  type ResolvedPrompt,
  SUBJECTS,
  type UpdatePromptRequest,
  type UpdateVariableRequest,
  type Variable,
  type VersionPublishedEvent,
} from '@pm/contracts'
import { newId } from '@pm/kit'
import { syncVariables } from '@pm/template'
import type { EventBus } from '@pm/bus'
import { diffVersions, type DiffSide, type VersionDiff } from './diff.ts'
import { slugify, uniqueSlug } from './slug.ts'
import {
  DuplicateSlugError,
  type OutboxRecord,
  type Page,
  type PromptPatch,
  type PromptRecord,
  type PromptStore,
  type VersionRecord,
} from '../store/types.ts'

/** The API shape of a prompt (environments are served by their own route). */
export function publicPrompt(p: PromptRecord): Prompt {
  const { environments: _environments, ...rest } = p
  return rest
}

/** The public catalog's view: metadata of the prompt, content of its current version. */
export function catalogEntry(p: PromptRecord, v: VersionRecord): PublicPrompt {
  return {
    _id: p._id,
    name: p.name,
    slug: p.slug,
    description: p.description,
    tags: p.tags,
    template: v.template,
    variables: v.variables,
    versionId: v._id,
    version: v.version,
    publishedAt: v.publishedAt,
    createdAt: p.createdAt,
  }
}

export interface Selector {
  version?: number
  env?: EnvironmentName
}

/** The longest changeLog (280) leaves room for this note on a fork's first version. */
function forkNote(source: PromptRecord, version: VersionRecord): string {
  return `Forked from ${source.slug} v${version.version}`.slice(0, 280)
}

/** A version record and the `version.published` event announcing it, for the outbox. */
export function buildPublished(
  prompt: PromptRecord,
  number: number,
  author: Author,
  changeLog: string,
  snapshot: { template: string; variables: Variable[] } = prompt,
): { version: VersionRecord; outbox: OutboxRecord } {
  const publishedAt = new Date().toISOString()
  const version: VersionRecord = {
    _id: newId(),
    promptId: prompt._id,
    organizationId: prompt.organizationId,
    version: number,
    status: 'PUBLISHED',
    publishedAt,
    template: snapshot.template,
    variables: snapshot.variables,
    createdBy: author,
    changeLog,
  }
  const event: VersionPublishedEvent = {
    id: newId(),
    type: 'version.published',
    createdAt: publishedAt,
    organizationId: prompt.organizationId,
    data: {
      promptId: prompt._id,
      name: prompt.name,
      slug: prompt.slug,
      versionId: version._id,
      version: number,
      publishedAt,
      publishedBy: author._id,
      changeLog,
    },
  }
  return {
    version,
    outbox: {
      _id: event.id,
      subject: SUBJECTS.versionPublished,
      // The version id: a relay that sends twice is recognised by JetStream as a duplicate.
      msgId: version._id,
      payload: event,
      createdAt: publishedAt,
      sentAt: null,
    },
  }
}

/**
 * Prompt operations shared by the routes: slug allocation, publish and fork with their
 * outbox events, and the change broadcasts that keep render's caches true. Every move
 * that changes what render would resolve (publish, promote, unpublish, visibility,
 * delete) calls `changed`.
 */
export class PromptsService {
  readonly store: PromptStore
  private readonly bus: EventBus
  private readonly onOutboxWritten: () => void

  constructor(store: PromptStore, bus: EventBus, onOutboxWritten: () => void) {
    this.store = store
    this.bus = bus
    this.onOutboxWritten = onOutboxWritten
  }

  changed(prompt: { _id: string; organizationId: string }, reason: PromptChangeReason): void {
    const event: PromptChangedEvent = {
      promptId: prompt._id,
      organizationId: prompt.organizationId,
      reason,
      at: new Date().toISOString(),
    }
    this.bus.broadcast(SUBJECTS.promptChanged, event)
  }

  /**
   * Inserts with a slug unique in the workspace; a concurrent taker of the same slug makes it
   * try the next. `knownTaken` lets a caller that creates many prompts (CSV import) skip slugs
   * it has just taken without asking the store again.
   */
  async insertWithUniqueSlug(
    record: PromptRecord,
    write: (r: PromptRecord) => Promise<void>,
    knownTaken?: Set<string>,
  ): Promise<PromptRecord> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const slug = await uniqueSlug(
        slugify(record.name),
        (s) => knownTaken?.has(s) === true || this.store.isSlugTaken(record.organizationId, s),
      )
      const candidate = { ...record, slug }
      try {
        await write(candidate)
        knownTaken?.add(slug)
        return candidate
      } catch (err) {
        if (!(err instanceof DuplicateSlugError)) throw err
        knownTaken?.add(slug)
      }
    }
    throw new AppError('CONFLICT', 'could not allocate a unique slug')
  }

  async create(
    organizationId: string,
    userId: string,
    input: CreatePromptRequest,
    knownTaken?: Set<string>,
  ): Promise<PromptRecord> {
    const { variables } = syncVariables(input.template, input.variables ?? [])
    const now = new Date().toISOString()
    const record: PromptRecord = {
      _id: newId(),
      organizationId,
      name: input.name.trim(),
      slug: '',
      description: input.description ?? '',
      tags: input.tags ?? [],
      template: input.template,
      variables,
      isPublic: false,
      versionCount: 0,
      currentVersionId: null,
      environments: { preview: null, production: null },
      createdBy: userId,
      createdAt: now,
      updatedAt: now,
    }
    return this.insertWithUniqueSlug(record, (r) => this.store.createPrompt(r), knownTaken)
  }

  async get(organizationId: string, id: string): Promise<PromptRecord> {
    const prompt = await this.store.getPrompt(organizationId, id)
    if (!prompt) throw new AppError('NOT_FOUND', 'prompt not found')
    return prompt
  }

  /** Saves draft fields (and metadata); never creates a version. */
  async update(
    organizationId: string,
    id: string,
    body: UpdatePromptRequest,
  ): Promise<{ prompt: PromptRecord; staleVariables?: string[] }> {
    for (let attempt = 0; ; attempt++) {
      const current = await this.get(organizationId, id)
      const patch: PromptPatch = { updatedAt: new Date().toISOString() }
      if (body.name !== undefined && body.name.trim() !== current.name) {
        patch.name = body.name.trim()
        patch.slug = await uniqueSlug(
          slugify(patch.name),
          async (s) => s !== current.slug && (await this.store.isSlugTaken(organizationId, s)),
        )
      }
      if (body.description !== undefined) patch.description = body.description
      if (body.tags !== undefined) patch.tags = body.tags
      let staleVariables: string[] | undefined
      if (body.template !== undefined || body.variables !== undefined) {
        const template = body.template ?? current.template
        const synced = syncVariables(template, body.variables ?? current.variables)
        patch.template = template
        patch.variables = synced.variables
        staleVariables = synced.staleVariables
      }
      if (body.isPublic !== undefined) {
        if (body.isPublic && !current.currentVersionId) {
          throw new AppError('NO_PUBLISHED_VERSION', 'publish a version before making the prompt public')
        }
        patch.isPublic = body.isPublic
      }
      let updated: PromptRecord | null
      try {
        updated = await this.store.updatePrompt(organizationId, current._id, patch)
      } catch (err) {
        // Someone took the new slug between the check and the write: pick again.
        if (err instanceof DuplicateSlugError && attempt < 20) continue
        if (err instanceof DuplicateSlugError)
          throw new AppError('CONFLICT', 'could not allocate a unique slug')
        throw err
      }
      if (!updated) throw new AppError('NOT_FOUND', 'prompt not found')
      if (patch.isPublic !== undefined && patch.isPublic !== current.isPublic)
        this.changed(updated, 'visibility')
      return { prompt: updated, ...(staleVariables ? { staleVariables } : {}) }
    }
  }

  async delete(organizationId: string, id: string): Promise<void> {
    const deleted = await this.store.deletePrompt(organizationId, id)
    if (!deleted) throw new AppError('NOT_FOUND', 'prompt not found')
    this.changed({ _id: id, organizationId }, 'deleted')
  }

  async updateVariable(
    organizationId: string,
    id: string,
    name: string,
    body: UpdateVariableRequest,
  ): Promise<PromptRecord> {
    const current = await this.get(organizationId, id)
    const index = current.variables.findIndex((v) => v.name === name)
    const existing = current.variables[index]
    if (!existing) throw new AppError('NOT_FOUND', `variable ${name} not found`)
    const next: Variable = { ...existing }
    if (body.required !== undefined) next.required = body.required
    if (body.description === null) delete next.description
    else if (body.description !== undefined) next.description = body.description
    if (body.defaultValue === null) delete next.defaultValue
    else if (body.defaultValue !== undefined) next.defaultValue = body.defaultValue
    const variables = current.variables.map((v, i) => (i === index ? next : v))
    const updated = await this.store.updatePrompt(organizationId, id, {
      variables,
      updatedAt: new Date().toISOString(),
    })
    if (!updated) throw new AppError('NOT_FOUND', 'prompt not found')
    return updated
  }

  /** Snapshots the current draft as the next version, with its event, atomically. */
  async publish(
    organizationId: string,
    promptId: string,
    author: Author,
    changeLog: string,
  ): Promise<VersionRecord> {
    const version = await this.store.publish(organizationId, promptId, (prompt, next) =>
      buildPublished(prompt, next, author, changeLog),
    )
    if (!version) throw new AppError('NOT_FOUND', 'prompt not found')
    this.onOutboxWritten()
    this.changed({ _id: promptId, organizationId }, 'published')
    return version
  }

  /** DELETE publish: the prompt leaves the public catalog; versions and pins are kept. */
  async unpublish(organizationId: string, id: string): Promise<PromptRecord> {
    const current = await this.get(organizationId, id)
    if (!current.isPublic) return current
    const updated = await this.store.updatePrompt(organizationId, id, {
      isPublic: false,
      updatedAt: new Date().toISOString(),
    })
    if (!updated) throw new AppError('NOT_FOUND', 'prompt not found')
    this.changed(updated, 'unpublished')
    return updated
  }

  async version(prompt: PromptRecord, versionId: string): Promise<VersionRecord> {
    const version = await this.store.getVersion(prompt._id, versionId)
    if (!version) throw new AppError('VERSION_NOT_FOUND', 'version not found')
    return version
  }

  /** Copies a version's template and variables onto the draft; history and currentVersionId stay. */
  async restore(organizationId: string, id: string, versionId: string): Promise<PromptRecord> {
    const prompt = await this.get(organizationId, id)
    const version = await this.version(prompt, versionId)
    const updated = await this.store.updatePrompt(organizationId, id, {
      template: version.template,
      variables: version.variables,
      updatedAt: new Date().toISOString(),
    })
    if (!updated) throw new AppError('NOT_FOUND', 'prompt not found')
    return updated
  }

  async diff(organizationId: string, id: string, from: string, to: string): Promise<VersionDiff> {
    const prompt = await this.get(organizationId, id)
    const side = async (ref: string): Promise<DiffSide> =>
      ref === 'draft' ? prompt : await this.version(prompt, ref)
    const [a, b] = await Promise.all([side(from), side(to)])
    return diffVersions(a, b, { from, to })
  }

  async environments(organizationId: string, id: string): Promise<Environments> {
    const prompt = await this.get(organizationId, id)
    return { preview: prompt.environments.preview, production: prompt.environments.production }
  }

  async promote(
    organizationId: string,
    id: string,
    env: EnvironmentName,
    versionId: string,
    promotedBy: string,
  ): Promise<Pin> {
    const prompt = await this.get(organizationId, id)
    const version = await this.version(prompt, versionId)
    if (version.status !== 'PUBLISHED') {
      throw new AppError('VERSION_NOT_PUBLISHED', 'only a published version can be promoted')
    }
    const pin: Pin = {
      versionId: version._id,
      version: version.version,
      promotedAt: new Date().toISOString(),
      promotedBy,
    }
    const updated = await this.store.setPin(organizationId, id, env, pin, pin.promotedAt)
    if (!updated) throw new AppError('NOT_FOUND', 'prompt not found')
    this.changed(updated, 'promoted')
    return pin
  }

  /**
   * A new private prompt in `targetOrganizationId` whose version 1 is published from the
   * source version's snapshot (fork rules 4 and 5). The fork's version 1 is announced with
   * `version.published` like any other publish: a version was published in that workspace.
   */
  async fork(
    source: PromptRecord,
    version: VersionRecord,
    targetOrganizationId: string,
    name: string,
    author: Author,
  ): Promise<{ prompt: PromptRecord; version: VersionRecord }> {
    if (version.status !== 'PUBLISHED') {
      throw new AppError('VERSION_NOT_PUBLISHED', 'only a published version can be forked')
    }
    const trimmed = name.trim()
    if (trimmed === '') {
      throw new AppError('VALIDATION_ERROR', 'name must not be empty', [
        { path: '/body/name', message: 'must not be empty after trimming' },
      ])
    }
    const now = new Date().toISOString()
    const record: PromptRecord = {
      _id: newId(),
      organizationId: targetOrganizationId,
      name: trimmed,
      slug: '',
      description: source.description,
      tags: [],
      template: version.template,
      variables: version.variables,
      isPublic: false,
      versionCount: 1,
      currentVersionId: null,
      forkedFromVersionId: version._id,
      environments: { preview: null, production: null },
      createdBy: author._id,
      createdAt: now,
      updatedAt: now,
    }
    let first: VersionRecord | undefined
    const prompt = await this.insertWithUniqueSlug(record, async (candidate) => {
      const built = buildPublished(candidate, 1, author, forkNote(source, version), version)
      first = built.version
      await this.store.createWithVersion(
        { ...candidate, currentVersionId: built.version._id },
        built.version,
        built.outbox,
      )
    })
    if (!first) throw new Error('fork: no version written')
    this.onOutboxWritten()
    return { prompt: { ...prompt, currentVersionId: first._id }, version: first }
  }

  /** A public prompt with its current version, or 404 (private, unpublished, or absent). */
  async publicEntry(id: string): Promise<{ prompt: PromptRecord; version: VersionRecord }> {
    const prompt = await this.store.getPromptById(id)
    if (!prompt?.isPublic || !prompt.currentVersionId) {
      throw new AppError('NOT_FOUND', 'prompt not found')
    }
    const version = await this.store.getVersion(prompt._id, prompt.currentVersionId)
    if (!version) throw new AppError('NOT_FOUND', 'prompt not found')
    return { prompt, version }
  }

  async listPublic(
    search: string | undefined,
    page: Page,
  ): Promise<{ prompts: PublicPrompt[]; total: number }> {
    const { prompts, total } = await this.store.listPublic(search, page)
    const ids = prompts.flatMap((p) => (p.currentVersionId ? [p.currentVersionId] : []))
    const versions = new Map((await this.store.getVersionsByIds(ids)).map((v) => [v._id, v]))
    const entries: PublicPrompt[] = []
    for (const p of prompts) {
      const v = p.currentVersionId ? versions.get(p.currentVersionId) : undefined
      if (v) entries.push(catalogEntry(p, v))
    }
    return { prompts: entries, total }
  }

  /**
   * What to render: the current version by default, version N, or an environment's pin.
   * `publicOnly` resolves for the public catalog (any workspace, public prompts only).
   */
  async resolve(
    caller: CallerContext,
    promptId: string,
    selector: Selector,
    publicOnly: boolean,
  ): Promise<ResolvedPrompt> {
    const prompt = publicOnly
      ? await this.store.getPromptById(promptId)
      : caller.organizationId
        ? await this.store.getPrompt(caller.organizationId, promptId)
        : null
    if (!prompt || (publicOnly && !prompt.isPublic)) throw new AppError('NOT_FOUND', 'prompt not found')
    if (selector.version !== undefined && selector.env !== undefined) {
      throw new AppError('VALIDATION_ERROR', 'give version or env, not both', [
        { path: '/query/env', message: 'cannot be combined with version' },
      ])
    }
    let version: VersionRecord | null
    if (selector.version !== undefined) {
      version = await this.store.getVersionByNumber(prompt._id, selector.version)
      if (!version) throw new AppError('VERSION_NOT_FOUND', `version ${selector.version} does not exist`)
    } else if (selector.env !== undefined) {
      const pin = prompt.environments[selector.env]
      if (!pin) throw new AppError('ENVIRONMENT_NOT_SET', `no version is promoted to ${selector.env}`)
      version = await this.store.getVersion(prompt._id, pin.versionId)
      if (!version) throw new AppError('VERSION_NOT_FOUND', 'the pinned version no longer exists')
    } else {
      if (!prompt.currentVersionId)
        throw new AppError('NO_PUBLISHED_VERSION', 'the prompt has no published version')
      version = await this.store.getVersion(prompt._id, prompt.currentVersionId)
      if (!version) throw new AppError('NO_PUBLISHED_VERSION', 'the prompt has no published version')
    }
    return {
      promptId: prompt._id,
      organizationId: prompt.organizationId,
      versionId: version._id,
      version: version.version,
      template: version.template,
      variables: version.variables,
    }
  }
}
