import {
  AppError,
  type AuditEntry,
  type Author,
  type CallerContext,
  type CreatePromptRequest,
  type EnvironmentHistory,
  type EnvironmentName,
  type Environments,
  type ListPromptsQuery,
  pagination,
  type Pin,
  type PromptChangedEvent,
  type PromptDependent,
  type PromptChangeReason,
  type PromptList,
  type PublicPrompt,
  type ResolvedPrompt,
  type Split,
  SUBJECTS,
  type UpdatePromptRequest,
  type UpdateVariableRequest,
  type Variable,
  type VersionPublishedEvent,
} from '@pm/contracts'
import { newId } from '@pm/kit'
import type { EventBus } from '@pm/bus'
import { buildContent, checkConfig, checkTypeUnchanged, contentFields } from '../domain/content.ts'
import { diffVersions, type DiffSide, type VersionDiff } from '../domain/diff.ts'
import { environmentPromoted, promptDeleted, visibilityChanged } from '../domain/events.ts'
import { type AuditContext, auditRow } from '../domain/audit.ts'
import { checkMayPromote, type PromoteTarget } from '../domain/release.ts'
import { KnownSlugs, lowestFreeSlug, slugify, slugStem } from '../domain/slug.ts'
import { type OrgSettings, StaticOrgSettings } from './orgSettings.ts'
import {
  DuplicateSlugError,
  type AuditCursor,
  type AuditFilter,
  type SplitCount,
  type OutboxRecord,
  type Page,
  type PromptPatch,
  type PromptRecord,
  type PromptStore,
  type VersionRecord,
} from '../store/types.ts'
import { catalogEntry, publicPrompt } from '../domain/views.ts'
import { Composition } from './composition.ts'

export interface Selector {
  version?: number
  env?: EnvironmentName
}

/** The longest changeLog (280) leaves room for this note on a fork's first version. */
/**
 * A promote's date: the later of now and one millisecond after the pin it replaces
 * (`stored`, as read in the promote's transaction). An environment's history is listed by
 * promotedAt, then by id, and the pin is its newest entry: a promote made after another, on any
 * replica and whatever the clocks, is listed after it (decisions: "Promotes dated strictly in
 * order").
 */
export function promoteDate(stored: Pin | null | undefined, now: number): string {
  const last = stored ? Date.parse(stored.promotedAt) : Number.NaN
  return new Date(Number.isNaN(last) ? now : Math.max(now, last + 1)).toISOString()
}

/** An event built before the promote's transaction, dated as the promote is (the relay sends by date). */
function datedOutbox(o: OutboxRecord, at: string): OutboxRecord {
  const payload = o.payload as { createdAt?: string }
  return { ...o, createdAt: at, payload: { ...payload, createdAt: at } }
}

function forkNote(source: PromptRecord, version: VersionRecord): string {
  return `Forked from ${source.slug} v${version.version}`.slice(0, 280)
}

/** A version record and the `version.published` event announcing it, for the outbox. */
export function buildPublished(
  prompt: PromptRecord,
  number: number,
  author: Author,
  changeLog: string,
  snapshot: Pick<PromptRecord, 'type' | 'template' | 'variables' | 'messages' | 'config'> = prompt,
): { version: VersionRecord; outbox: OutboxRecord } {
  const publishedAt = new Date().toISOString()
  const version: VersionRecord = {
    _id: newId(),
    promptId: prompt._id,
    organizationId: prompt.organizationId,
    version: number,
    status: 'PUBLISHED',
    publishedAt,
    type: snapshot.type,
    template: snapshot.template,
    variables: snapshot.variables,
    ...contentFields(snapshot),
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
 * Now, or a millisecond after `previous` when the clock has not passed it: every write of a
 * draft changes its updatedAt, which the next read-modify-write compares against.
 */
function laterThan(previous: string): string {
  const before = Date.parse(previous)
  const now = Date.now()
  return new Date(Number.isFinite(before) && now <= before ? before + 1 : now).toISOString()
}

/**
 * Prompt operations shared by the routes: slug allocation, publish and fork with their
 * outbox events, and the change broadcasts that keep render's caches true. Every move
 * that changes what render would resolve (publish, promote, unpublish, visibility,
 * delete) calls `changed`.
 */
export class PromptsService {
  private readonly store: PromptStore
  private readonly bus: EventBus
  private readonly onOutboxWritten: () => void
  /** References between prompts (DESIGN section 12). */
  readonly composition: Composition

  private readonly orgSettings: OrgSettings

  constructor(
    store: PromptStore,
    bus: EventBus,
    onOutboxWritten: () => void,
    orgSettings: OrgSettings = new StaticOrgSettings(),
  ) {
    this.store = store
    this.bus = bus
    this.onOutboxWritten = onOutboxWritten
    this.composition = new Composition(store)
    this.orgSettings = orgSettings
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
   * try the next. `knownTaken` is what is known of the workspace's slugs: a caller that creates
   * many prompts (CSV import) keeps one for them all, so that the store is not asked again.
   */
  async insertWithUniqueSlug(
    record: PromptRecord,
    write: (r: PromptRecord) => Promise<void>,
    knownTaken: KnownSlugs = new KnownSlugs(),
    givenSlug?: string,
  ): Promise<PromptRecord> {
    if (givenSlug !== undefined) {
      // A slug the client chose is that slug or nothing: code will refer to the prompt by it.
      const candidate = { ...record, slug: givenSlug }
      try {
        await write(candidate)
      } catch (err) {
        if (err instanceof DuplicateSlugError) throw slugTaken(givenSlug)
        throw err
      }
      knownTaken.taken.add(givenSlug)
      return candidate
    }
    for (let attempt = 0; attempt < 20; attempt++) {
      const slug = await this.freeSlug(record.organizationId, record.name, knownTaken)
      const candidate = { ...record, slug }
      try {
        await write(candidate)
        knownTaken.taken.add(slug)
        return candidate
      } catch (err) {
        if (!(err instanceof DuplicateSlugError)) throw err
        knownTaken.taken.add(slug)
      }
    }
    throw new AppError('CONFLICT', 'could not allocate a unique slug')
  }

  /**
   * The first free slug for a name: what a prompt created without a slug gets (unless a
   * concurrent create takes it first). One store query for the slugs under the name's stem, the
   * first time `known` meets that stem; the lowest free number is then found in memory.
   */
  private async freeSlug(organizationId: string, name: string, known: KnownSlugs): Promise<string> {
    const base = slugify(name)
    const stem = slugStem(base)
    if (!known.stems.has(stem)) {
      for (const slug of await this.store.slugsStartingWith(organizationId, stem)) known.taken.add(slug)
      known.stems.add(stem)
    }
    const { slug, n } = lowestFreeSlug(base, known.taken, known.from.get(base))
    known.from.set(base, n)
    return slug
  }

  async create(
    organizationId: string,
    userId: string,
    input: CreatePromptRequest,
    knownTaken: KnownSlugs = new KnownSlugs(),
    /** How the record is stored (the CSV import writes it with its batch's progress). */
    write?: (r: PromptRecord) => Promise<void>,
    audit?: AuditContext,
  ): Promise<PromptRecord> {
    const store =
      write ??
      ((r: PromptRecord) =>
        this.store.createPrompt(
          r,
          auditRow(
            audit,
            organizationId,
            'prompt.created',
            { type: 'prompt', id: r._id },
            `${r.name} (${r.slug})`,
          ),
        ))
    const type = input.type ?? 'text'
    const content = buildContent(type, input, input.variables ?? [])
    // Checked against the slug the prompt will get: without one given, the name's slug may be
    // taken already (then `child` is another prompt, not this one, and `{{> child}}` no cycle).
    await this.composition.checkContent(
      organizationId,
      { slug: input.slug ?? (() => this.freeSlug(organizationId, input.name.trim(), knownTaken)) },
      content,
    )
    const now = new Date().toISOString()
    const record: PromptRecord = {
      _id: newId(),
      organizationId,
      name: input.name.trim(),
      slug: '',
      description: input.description ?? '',
      tags: input.tags ?? [],
      type,
      template: content.template,
      ...(content.messages ? { messages: content.messages } : {}),
      variables: content.variables,
      ...(input.config ? { config: checkConfig(input.config) } : {}),
      isPublic: false,
      versionCount: 0,
      currentVersionId: null,
      environments: { preview: null, production: null },
      createdBy: userId,
      createdAt: now,
      updatedAt: now,
    }
    const created = await this.insertWithUniqueSlug(record, store, knownTaken, input.slug)
    if (audit) this.onOutboxWritten()
    return created
  }

  /** One page of a workspace's prompts, with the workspace's counts. */
  async list(organizationId: string, q: ListPromptsQuery): Promise<PromptList> {
    const tags = q.tags
      ?.split(/[;,]/)
      .map((t) => t.trim())
      .filter(Boolean)
    const [{ prompts, total }, counts] = await Promise.all([
      this.store.listPrompts(
        { organizationId, search: q.search?.trim() || undefined, tags, visibility: q.visibility },
        { page: q.page, limit: q.limit },
      ),
      this.store.summary(organizationId),
    ])
    return {
      prompts: prompts.map(publicPrompt),
      pagination: pagination(q.page, q.limit, total),
      summary: {
        total: counts.total,
        public: counts.public,
        private: counts.total - counts.public,
        published: counts.published,
        unpublished: counts.total - counts.published,
      },
    }
  }

  /** A prompt's versions: all by number, or only the published ones by publication time. */
  async listVersions(organizationId: string, id: string, onlyPublished: boolean): Promise<VersionRecord[]> {
    const prompt = await this.get(organizationId, id)
    const versions = await this.store.listVersions(prompt._id, onlyPublished ? 'publishedAt' : 'version')
    return onlyPublished ? versions.filter((v) => v.status === 'PUBLISHED') : versions
  }

  async get(organizationId: string, id: string): Promise<PromptRecord> {
    const prompt = await this.store.getPrompt(organizationId, id)
    if (!prompt) throw new AppError('NOT_FOUND', 'prompt not found')
    return prompt
  }

  /** Prompts whose draft or current version includes this one. */
  async dependents(organizationId: string, id: string): Promise<PromptDependent[]> {
    return this.composition.dependents(await this.get(organizationId, id))
  }

  async getBySlug(organizationId: string, slug: string): Promise<PromptRecord> {
    const prompt = await this.store.getPromptBySlug(organizationId, slug)
    if (!prompt) throw new AppError('NOT_FOUND', `no prompt has the slug "${slug}" in this workspace`)
    return prompt
  }

  /**
   * Saves draft fields (and metadata); never creates a version. A rename keeps the slug (code
   * refers to prompts by it); `slug` changes it, refused while other prompts include this one
   * unless `force`. A change of visibility is announced with
   * `prompt.visibility.changed`, written with the change.
   */
  async update(
    organizationId: string,
    id: string,
    body: UpdatePromptRequest,
    audit?: AuditContext,
    /** Change the slug even when other prompts include this one (they then answer INVALID_REFERENCE). */
    force = false,
    /**
     * The draft's updatedAt when the caller checked it (`pm push`'s revision): written only onto
     * that draft, else 409 CONFLICT, with no retry on a newer one.
     */
    checkedAt?: string,
  ): Promise<{ prompt: PromptRecord; staleVariables?: string[] }> {
    return this.unchangedSinceRead(
      organizationId,
      id,
      (current) => this.updateFrom(current, body, audit, force),
      checkedAt,
    )
  }

  /**
   * Runs a read-modify-write of one prompt's draft until it lands on the draft it read: `write`
   * gets the prompt as read and answers null when the store found it changed since (another
   * save, say, between the read and the write; its fields would otherwise be written back as
   * they were read). A few tries, then 409 CONFLICT; 404 when the prompt is gone. With
   * `checkedAt` (the updatedAt of the draft the caller's own check was made on) there is no
   * retry onto another draft: 409 CONFLICT as soon as the draft is not that one.
   */
  private async unchangedSinceRead<T>(
    organizationId: string,
    id: string,
    write: (current: PromptRecord) => Promise<T | null>,
    checkedAt?: string,
  ): Promise<T> {
    for (let attempt = 0; attempt < 5; attempt++) {
      const current = await this.get(organizationId, id)
      if (checkedAt !== undefined && current.updatedAt !== checkedAt) {
        throw new AppError('CONFLICT', 'the prompt changed since it was read: read it again')
      }
      const done = await write(current)
      if (done !== null) return done
    }
    throw new AppError('CONFLICT', 'the prompt kept changing while this change was made: try again')
  }

  private async updateFrom(
    current: PromptRecord,
    body: UpdatePromptRequest,
    audit: AuditContext | undefined,
    force: boolean,
  ): Promise<{ prompt: PromptRecord; staleVariables?: string[] } | null> {
    const { organizationId, _id: id } = current
    checkTypeUnchanged(current.type, body.type)
    const patch: PromptPatch = { updatedAt: laterThan(current.updatedAt) }
    if (body.name !== undefined) patch.name = body.name.trim()
    if (body.slug !== undefined && body.slug !== current.slug) {
      // Prompts that include this one name it by its slug: 409 listing them, unless forced.
      if (!force) await this.composition.refuseIfIncluded(current, 'slug')
      patch.slug = body.slug
    }
    if (body.description !== undefined) patch.description = body.description
    if (body.tags !== undefined) patch.tags = body.tags
    let staleVariables: string[] | undefined
    let checked = false
    if (body.template !== undefined || body.messages !== undefined || body.variables !== undefined) {
      const given =
        current.type === 'chat'
          ? { template: body.template, messages: body.messages ?? current.messages }
          : { template: body.template ?? current.template, messages: body.messages }
      const content = buildContent(current.type, given, body.variables ?? current.variables)
      if (body.template !== undefined || body.messages !== undefined) {
        await this.composition.checkContent(
          organizationId,
          { id: current._id, slug: patch.slug ?? current.slug },
          content,
        )
        checked = true
      }
      patch.template = content.template
      if (content.messages) patch.messages = content.messages
      patch.variables = content.variables
      staleVariables = content.staleVariables
    }
    if (patch.slug !== undefined && !checked) {
      // A new slug may be one the draft's includes name (left dangling by a forced delete or
      // rename): taking it would close a cycle.
      await this.composition.checkContent(
        organizationId,
        { id: current._id, slug: patch.slug },
        { template: current.template, ...contentFields(current) },
        true,
      )
    }
    if (body.config !== undefined) patch.config = body.config === null ? null : checkConfig(body.config)
    if (body.isPublic !== undefined) {
      if (body.isPublic && !current.currentVersionId) {
        throw new AppError('NO_PUBLISHED_VERSION', 'publish a version before making the prompt public')
      }
      patch.isPublic = body.isPublic
    }
    let updated: PromptRecord | null
    try {
      const events =
        patch.isPublic !== undefined || audit
          ? (before: PromptRecord, after: PromptRecord) => {
              const visibility = visibilityChanged(before, after)
              const action = visibility.length > 0 ? 'prompt.visibility.changed' : 'prompt.updated'
              const summary =
                visibility.length > 0
                  ? `made ${after.slug} ${after.isPublic ? 'public' : 'private'}`
                  : `updated ${Object.keys(body)
                      .filter((k) => k !== 'organizationId')
                      .join(', ')} of ${after.slug}`
              return [
                ...visibility,
                ...auditRow(audit, organizationId, action, { type: 'prompt', id }, summary),
              ]
            }
          : undefined
      updated = await this.store.updatePrompt(organizationId, current._id, patch, events, current.updatedAt)
    } catch (err) {
      if (err instanceof DuplicateSlugError && patch.slug !== undefined) throw slugTaken(patch.slug)
      throw err
    }
    // Changed since it was read (or gone: the next read says 404).
    if (!updated) return null
    if (audit) this.onOutboxWritten()
    if (patch.isPublic !== undefined && patch.isPublic !== current.isPublic) {
      this.onOutboxWritten()
      this.changed(updated, 'visibility')
    }
    // The slug names the prompt for render's lookups by slug: drop them.
    else if (patch.slug !== undefined) this.changed(updated, 'updated')
    return { prompt: updated, ...(staleVariables ? { staleVariables } : {}) }
  }

  async delete(organizationId: string, id: string, force = false, audit?: AuditContext): Promise<void> {
    // A prompt others include answers 409 listing them, unless forced (their renders then fail
    // with INVALID_REFERENCE until they are edited).
    if (!force) await this.composition.refuseIfIncluded(await this.get(organizationId, id), 'delete')
    const at = new Date().toISOString()
    const deleted = await this.store.deletePrompt(organizationId, id, (prompt) => [
      promptDeleted(prompt, at),
      ...auditRow(audit, organizationId, 'prompt.deleted', { type: 'prompt', id }, `deleted ${prompt.slug}`),
    ])
    if (!deleted) throw new AppError('NOT_FOUND', 'prompt not found')
    this.onOutboxWritten()
    this.changed({ _id: id, organizationId }, 'deleted')
  }

  async updateVariable(
    organizationId: string,
    id: string,
    name: string,
    body: UpdateVariableRequest,
    audit?: AuditContext,
  ): Promise<PromptRecord> {
    return this.unchangedSinceRead(organizationId, id, (current) =>
      this.updateVariableFrom(current, name, body, audit),
    )
  }

  private async updateVariableFrom(
    current: PromptRecord,
    name: string,
    body: UpdateVariableRequest,
    audit: AuditContext | undefined,
  ): Promise<PromptRecord | null> {
    const { organizationId, _id: id } = current
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
    const updated = await this.store.updatePrompt(
      organizationId,
      id,
      { variables, updatedAt: laterThan(current.updatedAt) },
      audit
        ? (_before, after) =>
            auditRow(
              audit,
              organizationId,
              'prompt.updated',
              { type: 'prompt', id },
              `updated variable ${name} of ${after.slug}`,
            )
        : undefined,
      current.updatedAt,
    )
    // Another write came first (or the prompt is gone): read again.
    if (!updated) return null
    if (audit) this.onOutboxWritten()
    return updated
  }

  /** Snapshots the current draft as the next version, with its event, atomically. */
  async publish(
    organizationId: string,
    promptId: string,
    author: Author,
    changeLog: string,
    audit?: AuditContext,
  ): Promise<VersionRecord> {
    const before = await this.store.getPrompt(organizationId, promptId)
    const dependents = before
      ? await this.composition.dependencyEvents(before, 'published', new Date().toISOString())
      : []
    const version = await this.store.publish(organizationId, promptId, (prompt, next) => {
      const built = buildPublished(prompt, next, author, changeLog)
      const extra = [
        ...dependents,
        ...auditRow(
          audit,
          organizationId,
          'prompt.published',
          { type: 'prompt', id: promptId },
          `published ${prompt.slug} v${next}${changeLog ? `: ${changeLog}` : ''}`,
        ),
      ]
      return { ...built, extra }
    })
    if (!version) throw new AppError('NOT_FOUND', 'prompt not found')
    this.onOutboxWritten()
    this.changed({ _id: promptId, organizationId }, 'published')
    return version
  }

  /** DELETE publish: the prompt leaves the public catalog; versions and pins are kept. */
  async unpublish(organizationId: string, id: string, audit?: AuditContext): Promise<PromptRecord> {
    return this.unchangedSinceRead(organizationId, id, (current) => this.unpublishFrom(current, audit))
  }

  private async unpublishFrom(
    current: PromptRecord,
    audit: AuditContext | undefined,
  ): Promise<PromptRecord | null> {
    const { organizationId, _id: id } = current
    if (!current.isPublic) return current
    // Onto the draft read, with a later updatedAt: a clock reading behind it would take the
    // draft's updatedAt back, and a save that read it before another save would undo that one.
    const updated = await this.store.updatePrompt(
      organizationId,
      id,
      { isPublic: false, updatedAt: laterThan(current.updatedAt) },
      (before, after) => {
        const visibility = visibilityChanged(before, after)
        // A concurrent unpublish already made it private: nothing changed, nothing to record.
        if (visibility.length === 0) return []
        const summary = `removed ${after.slug} from the public catalog`
        return [
          ...visibility,
          ...auditRow(audit, organizationId, 'prompt.visibility.changed', { type: 'prompt', id }, summary),
        ]
      },
      current.updatedAt,
    )
    // Another write came first (or the prompt is gone): read again.
    if (!updated) return null
    this.onOutboxWritten()
    this.changed(updated, 'unpublished')
    return updated
  }

  async version(prompt: PromptRecord, versionId: string): Promise<VersionRecord> {
    const version = await this.store.getVersion(prompt._id, versionId)
    if (!version) throw new AppError('VERSION_NOT_FOUND', 'version not found')
    return version
  }

  /**
   * Copies a version's content (template, or a chat prompt's messages), variables and config
   * onto the draft; history and currentVersionId stay. A version without config clears it.
   */
  async restore(
    organizationId: string,
    id: string,
    versionId: string,
    audit?: AuditContext,
  ): Promise<PromptRecord> {
    return this.unchangedSinceRead(organizationId, id, (current) =>
      this.restoreFrom(current, versionId, audit),
    )
  }

  private async restoreFrom(
    prompt: PromptRecord,
    versionId: string,
    audit: AuditContext | undefined,
  ): Promise<PromptRecord | null> {
    const { organizationId, _id: id } = prompt
    const version = await this.version(prompt, versionId)
    // The checks of a save (PATCH): what the version includes may have changed since, and
    // restoring it can close a cycle.
    await this.composition.checkContent(
      organizationId,
      { id: prompt._id, slug: prompt.slug },
      { template: version.template, ...contentFields(version) },
    )
    const updated = await this.store.updatePrompt(
      organizationId,
      id,
      {
        template: version.template,
        ...(version.type === 'chat' && version.messages ? { messages: version.messages } : {}),
        variables: version.variables,
        config: version.config ?? null,
        // Later than the draft read: a save that read it before finds it changed, and reads again.
        updatedAt: laterThan(prompt.updatedAt),
      },
      audit
        ? (_before, after) =>
            auditRow(
              audit,
              organizationId,
              'prompt.restored',
              { type: 'prompt', id },
              `restored the draft of ${after.slug} from v${version.version}`,
            )
        : undefined,
      prompt.updatedAt,
    )
    // Another write came first (or the prompt is gone): read again.
    if (!updated) return null
    if (audit) this.onOutboxWritten()
    return updated
  }

  async diff(organizationId: string, id: string, from: string, to: string): Promise<VersionDiff> {
    const prompt = await this.get(organizationId, id)
    const side = async (ref: string): Promise<DiffSide> =>
      ref === 'draft' ? prompt : await this.version(prompt, ref)
    const [a, b] = await Promise.all([side(from), side(to)])
    return diffVersions(a, b, { from, to })
  }

  /** The pins, a split's variants with the invocations render has counted so far. */
  async environments(organizationId: string, id: string): Promise<Environments> {
    const prompt = await this.get(organizationId, id)
    const { preview, production } = prompt.environments
    const splitIds = [preview?.split?.id, production?.split?.id].filter((x): x is string => !!x)
    const counts = await this.store.splitCounts(splitIds)
    const withCounts = (pin: Pin | null): Pin | null => {
      if (!pin?.split) return pin
      const c = counts.get(pin.split.id) ?? []
      return {
        ...pin,
        split: {
          ...pin.split,
          variants: pin.split.variants.map((v, i) => ({ ...v, invocations: c[i] ?? 0 })),
        },
      }
    }
    return { preview: withCounts(preview), production: withCounts(production) }
  }

  /** A workspace's audit entries, newest first (DESIGN section 15). */
  listAudit(filter: AuditFilter, page: Page): Promise<{ entries: AuditEntry[]; total: number }> {
    return this.store.listAudit(filter, page)
  }

  /**
   * The export's walk over the log, newest first, in pages of `pageSize`, at most `max` entries.
   * Each page starts after the last entry of the one before (by `at`, then id), not at an
   * offset: entries written during an export would shift offset pages, and the export would
   * list some twice and skip others.
   */
  async *exportAudit(
    filter: AuditFilter,
    { pageSize = 500, max = 100_000 }: { pageSize?: number; max?: number } = {},
  ): AsyncGenerator<AuditEntry[]> {
    let after: AuditCursor | null = null
    for (let read = 0; read < max; ) {
      const entries = await this.store.auditPage(filter, after, Math.min(pageSize, max - read))
      if (entries.length === 0) return
      yield entries
      read += entries.length
      const last = entries[entries.length - 1] as AuditEntry
      after = { at: last.at, id: last.id }
      if (entries.length < pageSize) return
    }
  }

  /** Render's invocations per split variant, added to the counts. */
  async addSplitCounts(counts: SplitCount[]): Promise<void> {
    await this.store.addSplitCounts(counts)
  }

  /** An environment's promotes, newest first (DESIGN section 15). */
  async environmentHistory(
    organizationId: string,
    id: string,
    env: EnvironmentName,
    page: Page,
  ): Promise<EnvironmentHistory> {
    const prompt = await this.get(organizationId, id)
    const { entries, total } = await this.store.listEnvHistory(prompt._id, env, page)
    return {
      entries: entries.map((e) => ({
        versionId: e.versionId,
        version: e.version,
        ...(e.split ? { split: e.split } : {}),
        promotedBy: e.promotedBy,
        promotedByType: e.promotedByType,
        promotedAt: e.promotedAt,
      })),
      pagination: pagination(page.page, page.limit, total),
    }
  }

  /**
   * Pins a published version (by id or number), or a split of 2 to 5 of them, to `env`; a plain
   * promote ends a split. The pin, its history entry and `environment.promoted` are written in one
   * transaction. The caller's right to move a protected environment is checked first.
   */
  async promote(
    caller: CallerContext,
    organizationId: string,
    id: string,
    env: EnvironmentName,
    target: PromoteTarget,
    audit?: AuditContext,
  ): Promise<Pin> {
    const actor = caller.kind === 'apiKey' ? caller.apiKeyId : caller.userId
    if (!actor) throw new AppError('AUTH_REQUIRED', 'credentials are required')
    const prompt = await this.get(organizationId, id)
    checkMayPromote(
      caller,
      env,
      await this.orgSettings.protectedEnvironments(organizationId, caller.requestId),
    )
    const published = async (pick: { versionId: string } | { version: number }): Promise<VersionRecord> => {
      const version =
        'versionId' in pick
          ? await this.store.getVersion(prompt._id, pick.versionId)
          : await this.store.getVersionByNumber(prompt._id, pick.version)
      if (!version) {
        const named = 'versionId' in pick ? pick.versionId : `v${pick.version}`
        throw new AppError('VERSION_NOT_FOUND', `version ${named} is not a version of this prompt`)
      }
      if (version.status !== 'PUBLISHED') {
        throw new AppError('VERSION_NOT_PUBLISHED', 'only a published version can be promoted')
      }
      return version
    }
    let unpinned: Omit<Pin, 'promotedAt'>
    if ('split' in target) {
      const versions = await Promise.all(target.split.map((v) => published({ versionId: v.versionId })))
      const variants = versions.map((v, i) => ({
        versionId: v._id,
        version: v.version,
        weight: target.split[i]?.weight ?? 0,
      }))
      const first = variants[0] as (typeof variants)[number]
      unpinned = {
        versionId: first.versionId,
        version: first.version,
        promotedBy: actor,
        split: { id: newId(), variants },
      }
    } else {
      const version = await published(target)
      unpinned = { versionId: version._id, version: version.version, promotedBy: actor }
    }
    const historyId = newId()
    const dependents = await this.composition.dependencyEvents(prompt, env, new Date().toISOString())
    const updated = await this.store.setPin(organizationId, id, env, (stored) => {
      // Dated from the pin as stored in the promote's own transaction, not from `prompt` (read
      // before it, perhaps before another replica's promote): see promoteDate.
      const promotedAt = promoteDate(stored.environments[env], Date.now())
      const next: Pin = { ...unpinned, promotedAt }
      return {
        pin: next,
        events: (after) => [
          environmentPromoted(after, env, next),
          ...dependents.map((o) => datedOutbox(o, promotedAt)),
          ...auditRow(
            audit,
            organizationId,
            'environment.promoted',
            { type: 'prompt', id },
            next.split
              ? `split ${env} of ${after.slug}: ${next.split.variants.map((v) => `v${v.version} ${v.weight}%`).join(', ')}`
              : `promoted ${after.slug} v${next.version} to ${env}`,
          ),
        ],
        history: {
          _id: historyId,
          promptId: prompt._id,
          organizationId,
          environment: env,
          versionId: next.versionId,
          version: next.version,
          ...(next.split ? { split: next.split } : {}),
          promotedBy: actor,
          promotedByType: caller.kind === 'apiKey' ? 'apiKey' : 'user',
          promotedAt,
        },
      }
    })
    const pin = updated?.environments[env]
    if (!updated || !pin) throw new AppError('NOT_FOUND', 'prompt not found')
    this.onOutboxWritten()
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
    audit?: AuditContext,
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
      type: version.type,
      template: version.template,
      variables: version.variables,
      ...contentFields(version),
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
        [
          built.outbox,
          ...auditRow(
            audit,
            targetOrganizationId,
            'prompt.forked',
            { type: 'prompt', id: candidate._id },
            `forked ${source.slug} v${version.version} as ${candidate.slug}`,
          ),
        ],
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
   * `publicOnly` resolves for the public catalog (any workspace, public prompts only). The
   * prompt is named by its id, or by its slug in the caller's workspace.
   */
  async resolve(
    caller: CallerContext,
    /** `organizationId` with a slug: the public catalog's lookup of a public prompt's reference. */
    ref: { id: string } | { slug: string; organizationId?: string },
    selector: Selector,
    publicOnly: boolean,
  ): Promise<ResolvedPrompt> {
    let prompt: PromptRecord | null = null
    if ('slug' in ref) {
      if (publicOnly) {
        if (ref.organizationId) prompt = await this.store.getPromptBySlug(ref.organizationId, ref.slug)
      } else if (caller.organizationId)
        prompt = await this.store.getPromptBySlug(caller.organizationId, ref.slug)
    } else if (publicOnly) prompt = await this.store.getPromptById(ref.id)
    else if (caller.organizationId) prompt = await this.store.getPrompt(caller.organizationId, ref.id)
    if (!prompt || (publicOnly && !prompt.isPublic)) {
      throw new AppError(
        'NOT_FOUND',
        'slug' in ref ? `no prompt has the slug "${ref.slug}" in this workspace` : 'prompt not found',
      )
    }
    if (selector.version !== undefined && selector.env !== undefined) {
      throw new AppError('VALIDATION_ERROR', 'give version or env, not both', [
        { path: '/query/env', message: 'cannot be combined with version' },
      ])
    }
    // First, whatever the selector: the spec's invoke rule has no exception for one, and a
    // prompt never published has no version to select or pin.
    if (!prompt.currentVersionId)
      throw new AppError('NO_PUBLISHED_VERSION', 'the prompt has no published version')
    let version: VersionRecord | null
    let split: Split | undefined
    if (selector.version !== undefined) {
      version = await this.store.getVersionByNumber(prompt._id, selector.version)
      if (!version) throw new AppError('VERSION_NOT_FOUND', `version ${selector.version} does not exist`)
    } else if (selector.env !== undefined) {
      const pin = prompt.environments[selector.env]
      if (!pin) throw new AppError('ENVIRONMENT_NOT_SET', `no version is promoted to ${selector.env}`)
      version = await this.store.getVersion(prompt._id, pin.versionId)
      if (!version) throw new AppError('VERSION_NOT_FOUND', 'the pinned version no longer exists')
      // Under a split, render picks the variant per subject and asks for it by number.
      if (pin.split) split = pin.split
    } else {
      version = await this.store.getVersion(prompt._id, prompt.currentVersionId)
      if (!version) throw new AppError('NO_PUBLISHED_VERSION', 'the prompt has no published version')
    }
    return {
      promptId: prompt._id,
      organizationId: prompt.organizationId,
      versionId: version._id,
      version: version.version,
      slug: prompt.slug,
      type: version.type,
      template: version.template,
      variables: version.variables,
      ...contentFields(version),
      ...(split ? { split } : {}),
    }
  }
}

function slugTaken(slug: string): AppError {
  return new AppError('CONFLICT', `the slug ${slug} is taken in this workspace`, [
    { path: '/body/slug', message: 'is taken' },
  ])
}
