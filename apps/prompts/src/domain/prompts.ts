import {
  AppError,
  type Author,
  type CallerContext,
  type CreatePromptRequest,
  type Prompt,
  type PromptChangedEvent,
  type PromptChangeReason,
  type ResolvedPrompt,
  SUBJECTS,
  type VersionPublishedEvent,
} from '@pm/contracts'
import { newId } from '@pm/kit'
import { syncVariables } from '@pm/template'
import type { EventBus } from '@pm/bus'
import { slugify, uniqueSlug } from './slug.ts'
import {
  DuplicateSlugError,
  type PromptRecord,
  type PromptStore,
  type VersionRecord,
} from '../store/types.ts'

/** The API shape of a prompt (environments are served by their own route). */
export function publicPrompt(p: PromptRecord): Prompt {
  const { environments: _environments, ...rest } = p
  return rest
}

export interface Selector {
  version?: number
  env?: 'preview' | 'production'
}

/**
 * Prompt operations shared by the routes: slug allocation, publish with its outbox event,
 * and the change broadcasts that keep render's caches true.
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

  /** Inserts with a slug unique in the workspace; a concurrent taker of the same slug makes it try the next. */
  async insertWithUniqueSlug(
    record: PromptRecord,
    write: (r: PromptRecord) => Promise<void>,
  ): Promise<PromptRecord> {
    for (let attempt = 0; attempt < 20; attempt++) {
      const slug = await uniqueSlug(slugify(record.name), (s) =>
        this.store.isSlugTaken(record.organizationId, s),
      )
      const candidate = { ...record, slug }
      try {
        await write(candidate)
        return candidate
      } catch (err) {
        if (!(err instanceof DuplicateSlugError)) throw err
      }
    }
    throw new AppError('CONFLICT', 'could not allocate a unique slug')
  }

  async create(organizationId: string, userId: string, input: CreatePromptRequest): Promise<PromptRecord> {
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
    return this.insertWithUniqueSlug(record, (r) => this.store.createPrompt(r))
  }

  async get(organizationId: string, id: string): Promise<PromptRecord> {
    const prompt = await this.store.getPrompt(organizationId, id)
    if (!prompt) throw new AppError('NOT_FOUND', 'prompt not found')
    return prompt
  }

  /** Snapshots the current draft as the next version, with its event, atomically. */
  async publish(
    organizationId: string,
    promptId: string,
    author: Author,
    changeLog: string,
  ): Promise<VersionRecord> {
    const version = await this.store.publish(organizationId, promptId, (prompt, next) => {
      const publishedAt = new Date().toISOString()
      const v: VersionRecord = {
        _id: newId(),
        promptId,
        organizationId,
        version: next,
        status: 'PUBLISHED',
        publishedAt,
        template: prompt.template,
        variables: prompt.variables,
        createdBy: author,
        changeLog,
      }
      const event: VersionPublishedEvent = {
        id: newId(),
        type: 'version.published',
        createdAt: publishedAt,
        organizationId,
        data: {
          promptId,
          name: prompt.name,
          slug: prompt.slug,
          versionId: v._id,
          version: next,
          publishedAt,
          publishedBy: author._id,
          changeLog,
        },
      }
      return {
        version: v,
        outbox: {
          _id: event.id,
          subject: SUBJECTS.versionPublished,
          msgId: v._id,
          payload: event,
          createdAt: publishedAt,
          sentAt: null,
        },
      }
    })
    if (!version) throw new AppError('NOT_FOUND', 'prompt not found')
    this.onOutboxWritten()
    this.changed({ _id: promptId, organizationId }, 'published')
    return version
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
