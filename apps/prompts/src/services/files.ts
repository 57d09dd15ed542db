import type { Readable } from 'node:stream'
import {
  AppError,
  type Author,
  type EnvironmentName,
  type ExportManifest,
  FILE_EXTENSIONS,
  type FileFormat,
  type ImportPlan,
  type ImportPlanItem,
  type PromptConfig,
  type UpdatePromptRequest,
  type Variable,
} from '@pm/contracts'
import type { CallerContext } from '@pm/contracts'
import type { AuditContext } from '../domain/audit.ts'
import { isDeepStrictEqual } from 'node:util'
import { ArchiveError, isArchiveName, readArchive, writeArchive } from '../domain/archive.ts'
import { buildContent } from '../domain/content.ts'
import { checkMayPromote } from '../domain/release.ts'
import {
  type ExportSource,
  exportFile,
  draftRevision,
  type FilePrompt,
  type ParsedFile,
  parsePromptFile,
} from '../domain/files.ts'
import type { PromptRecord, PromptStore, VersionRecord } from '../store/types.ts'
import type { OrgSettings } from './orgSettings.ts'
import type { PromptsService } from './prompts.ts'

export interface Upload {
  name: string
  bytes: Buffer
}

export interface ImportOptions {
  dryRun: boolean
  publish: boolean
  /** Optimistic concurrency: the drafts' revisions (draftRevision) as the caller last read them, by slug. */
  expect: Record<string, string>
  /** Who imports: a promote of a Langfuse label is checked as theirs (protected environments). */
  caller: CallerContext
  audit?: AuditContext
}

/** Prompts in one import (files, archive entries and Langfuse entries together): one request's work stays bounded. */
export const MAX_PROMPTS = 2000

const CONTENT_TYPES: Record<FileFormat, string> = {
  dotprompt: 'text/plain; charset=utf-8',
  prompty: 'text/plain; charset=utf-8',
  json: 'application/vnd.pm.prompt+json; charset=utf-8',
}

/**
 * The manifest of a workspace export. A prompt slugged `manifest` exported as JSON would have this
 * name too: its file is then MANIFEST_PROMPT_FILE (a slug has no dot, so no other prompt's can be).
 */
const MANIFEST_FILE = 'manifest.json'
const MANIFEST_PROMPT_FILE = 'manifest.prompt.json'

/** Whether an archive's `manifest.json` is the manifest, not a prompt (an older export may hold both). */
function isManifest(bytes: Buffer): boolean {
  try {
    const value: unknown = JSON.parse(bytes.toString('utf8'))
    return (
      typeof value === 'object' &&
      value !== null &&
      'exportedAt' in value &&
      'prompts' in value &&
      Array.isArray(value.prompts)
    )
  } catch {
    return false
  }
}

/**
 * A plan item and, for create or update, what to write; for a pin of an unchanged prompt, the
 * version to pin (null: the draft is published first).
 */
interface Step {
  item: ImportPlanItem
  prompt?: FilePrompt
  existing?: PromptRecord
  pinVersion?: VersionRecord | null
}

/** Same content: a published version and the draft it was made from. */
function sameContent(a: PromptRecord, b: VersionRecord): boolean {
  return (
    a.type === b.type &&
    a.template === b.template &&
    isDeepStrictEqual(a.messages ?? null, b.messages ?? null) &&
    isDeepStrictEqual(normalVariables(a.variables), normalVariables(b.variables)) &&
    sameConfig(a.config, b.config)
  )
}

/** Key order does not make two configs different. */
function sameConfig(a: PromptConfig | undefined, b: PromptConfig | undefined): boolean {
  return isDeepStrictEqual(a ?? null, b ?? null)
}

function normalVariables(vars: Variable[]): Variable[] {
  return vars.map((v) => ({
    name: v.name,
    required: v.required,
    ...(v.description === undefined ? {} : { description: v.description }),
    ...(v.defaultValue === undefined ? {} : { defaultValue: v.defaultValue }),
  }))
}

/**
 * Prompts as code (DESIGN section 16): one prompt or a whole workspace exported as files, and
 * files imported with a plan. Writes go through PromptsService (create, update, publish,
 * promote), so their events, broadcasts and rules are the usual ones.
 */
export class PromptFiles {
  private readonly service: PromptsService
  private readonly store: PromptStore
  /** The protected environments, for the plan's check of a Langfuse label's promote. */
  private readonly orgSettings: OrgSettings

  constructor(service: PromptsService, store: PromptStore, orgSettings: OrgSettings) {
    this.service = service
    this.store = store
    this.orgSettings = orgSettings
  }

  // ------------------------------------------------------------ export

  /** The draft, version N, or an environment's pin, with the prompt's metadata. */
  private async source(
    prompt: PromptRecord,
    selector: { version?: number | undefined; env?: EnvironmentName | undefined },
  ): Promise<ExportSource> {
    if (selector.version !== undefined && selector.env !== undefined) {
      throw new AppError('VALIDATION_ERROR', 'give version or env, not both', [
        { path: '/query/env', message: 'cannot be combined with version' },
      ])
    }
    let version: VersionRecord | null = null
    if (selector.version !== undefined) {
      version = await this.store.getVersionByNumber(prompt._id, selector.version)
      if (!version) throw new AppError('VERSION_NOT_FOUND', `version ${selector.version} does not exist`)
    } else if (selector.env !== undefined) {
      const pin = prompt.environments[selector.env]
      if (!pin) throw new AppError('ENVIRONMENT_NOT_SET', `no version is promoted to ${selector.env}`)
      version = await this.store.getVersion(prompt._id, pin.versionId)
      if (!version) throw new AppError('VERSION_NOT_FOUND', 'the pinned version no longer exists')
    }
    const content = version ?? prompt
    return {
      slug: prompt.slug,
      name: prompt.name,
      description: prompt.description,
      tags: prompt.tags,
      type: content.type,
      template: content.template,
      ...(content.type === 'chat' && content.messages ? { messages: content.messages } : {}),
      variables: content.variables,
      ...(content.config ? { config: content.config } : {}),
      version: version?.version ?? null,
      versionId: version?._id ?? null,
    }
  }

  async exportOne(
    organizationId: string,
    id: string,
    query: {
      format?: FileFormat | undefined
      version?: number | undefined
      env?: EnvironmentName | undefined
    },
  ): Promise<{ filename: string; contentType: string; text: string; revision: string }> {
    const format = query.format ?? 'dotprompt'
    const prompt = await this.service.get(organizationId, id)
    const src = await this.source(prompt, query)
    return {
      filename: `${prompt.slug}${FILE_EXTENSIONS[format]}`,
      contentType: CONTENT_TYPES[format],
      text: exportFile(src, format),
      revision: draftRevision(prompt),
    }
  }

  /** Every prompt of the workspace, a page at a time. */
  private async *allPrompts(organizationId: string): AsyncGenerator<PromptRecord> {
    const limit = 100
    for (let page = 1; ; page++) {
      const { prompts, total } = await this.store.listPrompts({ organizationId }, { page, limit })
      yield* prompts
      if (prompts.length < limit || page * limit >= total) return
    }
  }

  /** A tar.gz stream: one file per prompt and manifest.json, written as the prompts are read. */
  exportWorkspace(organizationId: string, format: FileFormat, env: EnvironmentName | undefined): Readable {
    const self = this
    async function* files(): AsyncGenerator<{ name: string; text: string }> {
      const manifest: ExportManifest = {
        format,
        exportedAt: new Date().toISOString(),
        organizationId,
        env: env ?? null,
        prompts: [],
      }
      for await (const prompt of self.allPrompts(organizationId)) {
        if (env && !prompt.environments[env]) continue
        const src = await self.source(prompt, env ? { env } : {})
        let name = `${prompt.slug}${FILE_EXTENSIONS[format]}`
        if (name === MANIFEST_FILE) name = MANIFEST_PROMPT_FILE
        manifest.prompts.push({
          slug: prompt.slug,
          file: name,
          promptId: prompt._id,
          version: src.version,
          revision: draftRevision(prompt),
        })
        yield { name, text: exportFile(src, format) }
      }
      yield { name: MANIFEST_FILE, text: `${JSON.stringify(manifest, null, 2)}\n` }
    }
    return writeArchive(files())
  }

  // ------------------------------------------------------------ import

  /** Every upload read into prompts (archives opened, Langfuse arrays split), bad ones as errors. */
  private async read(uploads: Upload[]): Promise<ParsedFile[]> {
    const parsed: ParsedFile[] = []
    for (const upload of uploads) {
      if (!isArchiveName(upload.name)) {
        parsed.push(...parsePromptFile(upload.name, upload.bytes))
        continue
      }
      try {
        const entries = await readArchive(upload.bytes)
        const inside: ParsedFile[] = []
        for (const entry of entries) {
          if (entry.name === MANIFEST_FILE && isManifest(entry.bytes)) continue
          inside.push(...parsePromptFile(`${upload.name}/${entry.name}`, entry.bytes))
        }
        parsed.push(...inside)
      } catch (err) {
        if (!(err instanceof ArchiveError)) throw err
        parsed.push({ ok: false, file: upload.name, slug: null, message: err.message })
      }
    }
    return parsed
  }

  /**
   * Why the caller may not pin to one of `envs` (a protected environment, DESIGN section 15), or
   * null: checked in the plan so that the dry run says it and nothing of such a file is written.
   */
  private async pinRefused(
    envs: readonly EnvironmentName[],
    caller: CallerContext,
    protectedEnvs: () => Promise<string[]>,
  ): Promise<string | null> {
    if (envs.length === 0) return null
    const list = await protectedEnvs()
    for (const env of envs) {
      try {
        checkMayPromote(caller, env, list)
      } catch (err) {
        if (!(err instanceof AppError)) throw err
        return err.message
      }
    }
    return null
  }

  /** What a file would do to the workspace: create, update (with the fields that change), unchanged or error. */
  private async plan(
    organizationId: string,
    file: FilePrompt,
    name: string,
    opts: Pick<ImportOptions, 'expect' | 'caller'>,
    protectedEnvs: () => Promise<string[]>,
  ): Promise<Step> {
    const item: ImportPlanItem = { file: name, slug: file.slug, action: 'error' }
    const existing = (await this.store.getPromptBySlug(organizationId, file.slug)) ?? undefined
    const expected = opts.expect[file.slug]
    if (expected !== undefined && (existing ? draftRevision(existing) : undefined) !== expected) {
      return {
        item: {
          ...item,
          ...(existing ? { promptId: existing._id } : {}),
          message: existing
            ? `the prompt changed on the server since it was pulled (revision ${draftRevision(existing)}, expected ${expected}): pull again`
            : 'the prompt was deleted on the server since it was pulled',
        },
      }
    }
    let content: ReturnType<typeof buildContent>
    try {
      content = buildContent(
        file.type,
        file.type === 'chat' ? { messages: file.messages } : { template: file.template },
        file.variables,
      )
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      return { item: { ...item, message: err.message } }
    }
    const refused = async (envs: readonly EnvironmentName[], step: Step): Promise<Step> => {
      const why = await this.pinRefused(envs, opts.caller, protectedEnvs)
      if (why === null) return step
      return { item: { ...item, ...(existing ? { promptId: existing._id } : {}), message: why } }
    }
    if (!existing) {
      return refused(file.pin ?? [], {
        item: { ...item, action: 'create', ...(file.pin ? { pinned: file.pin } : {}) },
        prompt: file,
      })
    }
    if (existing.type !== file.type) {
      return {
        item: {
          ...item,
          promptId: existing._id,
          message: `the prompt is a ${existing.type} prompt; its type cannot change to ${file.type}`,
        },
      }
    }
    const changes: string[] = []
    if (existing.name !== file.name.trim()) changes.push('name')
    if (existing.description !== file.description) changes.push('description')
    if (!isDeepStrictEqual(existing.tags, file.tags)) changes.push('tags')
    if (existing.type === 'chat') {
      if (!isDeepStrictEqual(existing.messages ?? [], content.messages ?? [])) changes.push('messages')
    } else if (existing.template !== content.template) changes.push('template')
    if (!isDeepStrictEqual(normalVariables(existing.variables), normalVariables(content.variables)))
      changes.push('variables')
    if (!sameConfig(existing.config, file.config)) changes.push('config')
    const base = { ...item, promptId: existing._id, revision: draftRevision(existing) }
    if (changes.length === 0) {
      // Only the pins it would make are checked: one already in place needs no right.
      const step = await this.planPins(base, file, existing)
      return refused(step.item.pinned ?? [], step)
    }
    return refused(file.pin ?? [], {
      item: { ...base, action: 'update', changes, ...(file.pin ? { pinned: file.pin } : {}) },
      prompt: file,
      existing,
    })
  }

  /**
   * An unchanged prompt's Langfuse labels: each environment not already pinned to the version
   * that holds the draft is pinned to it (the draft published first when no version holds it).
   * A re-import thus completes pins that an earlier import could not make.
   */
  private async planPins(
    base: ImportPlanItem & { promptId: string },
    file: FilePrompt,
    existing: PromptRecord,
  ): Promise<Step> {
    const unchanged: ImportPlanItem = { ...base, action: 'unchanged' }
    if (!file.pin) return { item: unchanged }
    const current = existing.currentVersionId
      ? await this.store.getVersion(existing._id, existing.currentVersionId)
      : null
    const live = current?.status === 'PUBLISHED' && sameContent(existing, current) ? current : null
    const envs = file.pin.filter((env) => {
      const pin = existing.environments[env]
      return !live || !pin || pin.versionId !== live._id || pin.split !== undefined
    })
    if (envs.length === 0) return { item: unchanged }
    return { item: { ...unchanged, pinned: envs }, prompt: file, existing, pinVersion: live }
  }

  /**
   * Imports files into the workspace: each file is matched by slug and planned; with `dryRun`
   * the plan is the answer and nothing is written. Otherwise each create or update is written
   * (then published with `publish`, or when it carries Langfuse labels, and pinned; an unchanged
   * one only gets the pins it lacks); a file whose labels the caller may not pin (a protected
   * environment) is an error item of the plan, and one whose write fails becomes an error item:
   * the others go on.
   */
  async importFiles(
    organizationId: string,
    author: Author,
    uploads: Upload[],
    opts: ImportOptions,
  ): Promise<ImportPlan> {
    const parsed = await this.read(uploads)
    if (parsed.length > MAX_PROMPTS) {
      throw new AppError(
        'VALIDATION_ERROR',
        `an import holds at most ${MAX_PROMPTS} prompts (this one ${parsed.length})`,
        [{ path: '/body/file', message: `more than ${MAX_PROMPTS} prompts` }],
      )
    }
    // Asked once per import, and only when a file has labels.
    let protectedEnvs: Promise<string[]> | undefined
    const protectedOnce = () =>
      (protectedEnvs ??= this.orgSettings.protectedEnvironments(organizationId, opts.caller.requestId))
    const count = new Map<string, number>()
    for (const p of parsed) if (p.ok) count.set(p.prompt.slug, (count.get(p.prompt.slug) ?? 0) + 1)
    const items: ImportPlanItem[] = []
    for (const p of parsed) {
      if (!p.ok) {
        items.push({ file: p.file, slug: p.slug, action: 'error', message: p.message })
        continue
      }
      if ((count.get(p.prompt.slug) ?? 0) > 1) {
        items.push({
          file: p.file,
          slug: p.prompt.slug,
          action: 'error',
          message: `the slug ${p.prompt.slug} appears in more than one file of this upload; none of them is imported`,
        })
        continue
      }
      const step = await this.plan(organizationId, p.prompt, p.file, opts, protectedOnce)
      items.push(opts.dryRun ? step.item : await this.apply(organizationId, author, step, opts))
    }
    const summary = { create: 0, update: 0, unchanged: 0, error: 0 }
    for (const item of items) summary[item.action]++
    return { dryRun: opts.dryRun, publish: opts.publish, summary, items }
  }

  private async apply(
    organizationId: string,
    author: Author,
    step: Step,
    { publish, caller, audit, expect }: ImportOptions,
  ): Promise<ImportPlanItem> {
    const { item, prompt: file, existing } = step
    if (!file || item.action === 'error') return item
    // An unchanged prompt has only its pins to make (planPins), on the draft as it is.
    if (item.action === 'unchanged' && (!existing || !item.pinned)) return item
    let record: PromptRecord
    try {
      if (item.action === 'unchanged' && existing) {
        record = existing
      } else if (!existing) {
        record = await this.service.create(
          organizationId,
          author._id,
          {
            name: file.name,
            slug: file.slug,
            description: file.description,
            tags: file.tags,
            type: file.type,
            ...(file.type === 'chat' ? { messages: file.messages } : { template: file.template }),
            variables: file.variables,
            ...(file.config ? { config: file.config } : {}),
          },
          undefined,
          undefined,
          audit,
        )
      } else {
        const patch: UpdatePromptRequest = {
          name: file.name,
          description: file.description,
          tags: file.tags,
          ...(file.type === 'chat' ? { messages: file.messages } : { template: file.template }),
          variables: file.variables,
          config: file.config ?? null,
        }
        // The plan checked the expected revision on `existing`: the write lands on that draft
        // only (a save made since would otherwise be overwritten past the check).
        const checked = expect[file.slug] !== undefined
        try {
          record = (
            await this.service.update(
              organizationId,
              existing._id,
              patch,
              audit,
              false,
              checked ? existing.updatedAt : undefined,
            )
          ).prompt
        } catch (err) {
          if (!(checked && err instanceof AppError && err.code === 'CONFLICT')) throw err
          return {
            ...item,
            action: 'error',
            message: 'the prompt changed on the server since it was pulled: pull again',
          }
        }
      }
    } catch (err) {
      if (!(err instanceof AppError)) throw err
      return { ...item, action: 'error', message: err.message }
    }
    const done: ImportPlanItem = { ...item, promptId: record._id, revision: draftRevision(record) }
    const pins = item.pinned ?? []
    // An unchanged prompt is not republished: its pins go to the version holding the draft
    // (the draft is published when none does).
    const mustPublish = item.action !== 'unchanged' && (publish || pins.length > 0)
    if (!mustPublish && pins.length === 0) return done
    let version = step.pinVersion ?? null
    let published: number | undefined
    let doing = 'not published'
    try {
      if (mustPublish || !version) {
        const changeLog = `Imported from ${item.file}`.slice(0, 280)
        version = await this.service.publish(organizationId, record._id, author, changeLog, audit)
        published = version.version
      }
      for (const env of pins) {
        doing = `not pinned to ${env}`
        await this.service.promote(caller, organizationId, record._id, env, { versionId: version._id }, audit)
      }
    } catch (err) {
      // Refused after the plan (a protection switched on meanwhile, say): the item says what was
      // not done; the other files go on.
      if (!(err instanceof AppError)) throw err
      const after = await this.service.get(organizationId, record._id)
      return {
        ...done,
        action: 'error',
        ...(published === undefined ? {} : { publishedVersion: published }),
        revision: draftRevision(after),
        message: `${item.action === 'unchanged' ? '' : 'saved, but '}${doing}: ${err.message}`,
      }
    }
    const after = await this.service.get(organizationId, record._id)
    return {
      ...done,
      ...(published === undefined ? {} : { publishedVersion: published }),
      revision: draftRevision(after),
    }
  }
}
