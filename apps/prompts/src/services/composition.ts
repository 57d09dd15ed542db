import { AppError, type ChatMessage, type PromptDependent } from '@pm/contracts'
import type { IncludeRef } from '@pm/template'
import {
  affectedBy,
  checkSyntax,
  contentReferences,
  dependencyChanged,
  invalidTemplate,
  MAX_INCLUDE_DEPTH,
  MAX_INCLUDES,
  referencesOf,
} from '../domain/references.ts'
import type { OutboxRecord, PromptRecord, PromptStore, VersionRecord } from '../store/types.ts'

/**
 * Composition rules that need the store (DESIGN section 12): the checks of a draft's
 * references when it is saved, the dependents of a prompt, and the `prompt.dependency.changed`
 * events of a publish or promote. Render resolves references itself at render time.
 */
export class Composition {
  private readonly store: PromptStore

  constructor(store: PromptStore) {
    this.store = store
  }

  /**
   * Refuses a text template, or a chat prompt's messages, with a syntax error, a reference to a
   * missing slug or a chat prompt, a cycle, a depth over 5 or more than 50 includes (400
   * VALIDATION_ERROR naming the path, `/body/template` or `/body/messages/<i>/content`, and the
   * chain). The graph follows each included prompt's draft and current version; the bound on
   * includes counts the whole prompt (a chat prompt renders as one).
   *
   * `self.slug` may be a lookup, asked only when the content has references: a new prompt
   * without a given slug gets the first free one, which is not known before it is asked for.
   * `cyclesOnly` (a change of slug alone): only a cycle is refused; the content itself was
   * checked when it was saved, and what changed since (a deleted child) is render's to refuse.
   */
  async checkContent(
    organizationId: string,
    self: { id?: string; slug: string | (() => Promise<string>) },
    content: { template: string; messages?: readonly ChatMessage[] },
    cyclesOnly = false,
  ): Promise<void> {
    const sources = content.messages
      ? content.messages.flatMap((m, i) =>
          'content' in m ? [{ template: m.content, path: `/body/messages/${i}/content` }] : [],
        )
      : [{ template: content.template, path: '/body/template' }]
    if (!cyclesOnly) for (const source of sources) checkSyntax(source.template, source.path)
    const tops = sources.map((source) => ({ ...source, refs: referencesOf(source.template) }))
    if (tops.every((top) => top.refs.length === 0)) return
    const selfSlug = typeof self.slug === 'string' ? self.slug : await self.slug()
    const bySlug = new Map<string, PromptRecord | null>()
    const refsOf = new Map<string, IncludeRef[]>()
    const find = async (slug: string): Promise<PromptRecord | null> => {
      if (!bySlug.has(slug)) bySlug.set(slug, await this.store.getPromptBySlug(organizationId, slug))
      return bySlug.get(slug) ?? null
    }
    const childRefs = async (prompt: PromptRecord): Promise<IncludeRef[]> => {
      let refs = refsOf.get(prompt._id)
      if (!refs) {
        const current = prompt.currentVersionId
          ? await this.store.getVersion(prompt._id, prompt.currentVersionId)
          : null
        const seen = new Set<string>()
        refs = [...contentReferences(prompt), ...(current ? contentReferences(current) : [])].filter((r) => {
          if (seen.has(r.key)) return false
          seen.add(r.key)
          return true
        })
        refsOf.set(prompt._id, refs)
      }
      return refs
    }
    let count = 0
    const walk = async (refs: IncludeRef[], chain: string[], path: string): Promise<void> => {
      for (const ref of refs) {
        const next = [...chain, ref.slug]
        if (ref.slug === selfSlug || chain.slice(1).includes(ref.slug)) {
          throw invalidTemplate(path, 'the references form a cycle', next)
        }
        // Past the bounds a cycle is render's to refuse too (it refuses the depth).
        if (next.length - 1 > MAX_INCLUDE_DEPTH) {
          if (cyclesOnly) continue
          throw invalidTemplate(path, `references nest deeper than ${MAX_INCLUDE_DEPTH}`, next)
        }
        if (++count > MAX_INCLUDES) {
          if (cyclesOnly) return
          throw invalidTemplate(path, `more than ${MAX_INCLUDES} includes`)
        }
        const prompt = await find(ref.slug)
        if (!prompt) {
          if (cyclesOnly) continue
          throw invalidTemplate(path, `no prompt with slug ${ref.slug} in this workspace`, next)
        }
        if (prompt._id === self.id) throw invalidTemplate(path, 'the references form a cycle', next)
        if (prompt.type !== 'text') {
          if (cyclesOnly) continue
          throw invalidTemplate(path, `${ref.slug} is a chat prompt; only text prompts can be included`, next)
        }
        await walk(await childRefs(prompt), next, path)
      }
    }
    for (const top of tops) await walk(top.refs, [selfSlug], top.path)
  }

  /** Prompts whose draft or current version includes `prompt`, and where. */
  async dependents(prompt: PromptRecord): Promise<PromptDependent[]> {
    return (await this.including(prompt)).map(({ parent, inDraft, inCurrent }) => ({
      promptId: parent._id,
      slug: parent.slug,
      name: parent.name,
      in: [
        ...(inDraft.length > 0 ? ['draft' as const] : []),
        ...(inCurrent.length > 0 ? ['current' as const] : []),
      ],
    }))
  }

  private async including(
    prompt: PromptRecord,
  ): Promise<Array<{ parent: PromptRecord; inDraft: IncludeRef[]; inCurrent: IncludeRef[] }>> {
    const candidates = await this.store.listContaining(prompt.organizationId, prompt.slug, prompt._id)
    const found: Array<{ parent: PromptRecord; inDraft: IncludeRef[]; inCurrent: IncludeRef[] }> = []
    for (const { prompt: parent, current } of candidates) {
      const of = (content: Pick<VersionRecord, 'template' | 'messages'> | null) =>
        (content ? contentReferences(content) : []).filter((r) => r.slug === prompt.slug)
      const inDraft = of(parent)
      const inCurrent = of(current as VersionRecord | null)
      if (inDraft.length > 0 || inCurrent.length > 0) found.push({ parent, inDraft, inCurrent })
    }
    return found
  }

  /**
   * 409 CONFLICT listing the prompts that include this one, when there are any: before a delete,
   * or a change of slug (their `{{> slug}}` would name nothing, or another prompt later).
   */
  async refuseIfIncluded(prompt: PromptRecord, action: 'delete' | 'slug'): Promise<void> {
    const dependents = await this.dependents(prompt)
    if (dependents.length === 0) return
    const what = action === 'delete' ? 'delete it anyway' : 'change its slug anyway'
    throw new AppError(
      'CONFLICT',
      `other prompts include ${prompt.slug}: ${dependents.map((d) => d.slug).join(', ')} (force=true to ${what})`,
      { dependents },
    )
  }

  /**
   * `prompt.dependency.changed` for every prompt whose render moves with this change: its draft
   * or current version names the changed prompt with the selector the change moves (a publish
   * moves `{{> slug}}`, a promote `{{> slug@env}}`). One level: see docs/decisions.md.
   */
  async dependencyEvents(
    prompt: PromptRecord,
    change: 'published' | 'preview' | 'production',
    at: string,
  ): Promise<OutboxRecord[]> {
    const events: OutboxRecord[] = []
    for (const { parent, inDraft, inCurrent } of await this.including(prompt)) {
      const hit = [...inCurrent, ...inDraft].find((r) => affectedBy(r, change))
      if (hit) events.push(dependencyChanged(parent, prompt.slug, hit.via, at))
    }
    return events
  }
}
