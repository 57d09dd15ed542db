import { AppError, type PromptReference, type Variable } from '@pm/contracts'
import {
  type ChatRenderOutcome,
  type CompiledChat,
  chatLogic,
  flatNodes,
  type IncludeRef,
  type LogicTemplate,
  type RenderMode,
  renderChat,
  renderLogic,
} from '@pm/template'
import type { Snapshot } from './resolver.ts'

/**
 * Rendering with references (DESIGN section 12). The references of a template are resolved
 * before anything renders (so nothing renders half): each distinct target once per request,
 * through the resolver's caches, which the prompts service's change events keep true on every
 * replica (a promote of an included prompt shows in its parents at once). Then the template
 * renders in one pass with the parts in hand.
 */

export const MAX_INCLUDE_DEPTH = 5
export const MAX_INCLUDES = 50

/** How a reference is fetched: by slug in the parent's workspace, with its selector. */
export type FetchReference = (ref: IncludeRef) => Promise<Snapshot>

/** The lookup failures that make a reference unresolvable (rather than the service failing). */
const UNRESOLVABLE = new Set([
  'NOT_FOUND',
  'ENVIRONMENT_NOT_SET',
  'VERSION_NOT_FOUND',
  'NO_PUBLISHED_VERSION',
])

function invalidReference(message: string, chain: string[], reason?: string): AppError {
  return new AppError('INVALID_REFERENCE', `${message}: ${chain.join(' -> ')}`, {
    chain: chain.join(' -> '),
    ...(reason ? { reason } : {}),
  })
}

interface Part {
  ref: IncludeRef
  snapshot: Snapshot
  logic: LogicTemplate
}

export interface ComposedOutcome {
  renderedContent: string
  missingRequired: string[]
  unresolved: string[]
  references: PromptReference[]
}

function logicOf(snapshot: Snapshot): LogicTemplate {
  return snapshot.logic ?? flatNodes(snapshot.compiled)
}

/** Variables of every part: the parent's first; a variable is required if any part requires it. */
export function mergeVariables(lists: readonly (readonly Variable[])[]): Variable[] {
  const byName = new Map<string, Variable>()
  for (const list of lists) {
    for (const v of list) {
      const seen = byName.get(v.name)
      if (!seen) byName.set(v.name, { ...v })
      else {
        if (v.required) seen.required = true
        if (seen.defaultValue === undefined && v.defaultValue !== undefined)
          seen.defaultValue = v.defaultValue
      }
    }
  }
  return [...byName.values()]
}

/**
 * Resolves every reference reachable from `root` (a text template, or each message of a chat
 * prompt: one render, so one count of includes), within the bounds; throws INVALID_REFERENCE.
 */
export async function resolveParts(
  root: { slug: string; logics: readonly LogicTemplate[]; promptId?: string },
  fetch: FetchReference,
): Promise<Map<string, Part>> {
  const parts = new Map<string, Part>()
  let count = 0
  const walk = async (template: LogicTemplate, chain: string[], ids: string[]): Promise<void> => {
    for (const ref of template.occurrences) {
      const next = [...chain, ref.slug]
      if (chain.includes(ref.slug)) throw invalidReference('the references form a cycle', next)
      if (next.length - 1 > MAX_INCLUDE_DEPTH) {
        throw invalidReference(`references nest deeper than ${MAX_INCLUDE_DEPTH}`, next)
      }
      if (++count > MAX_INCLUDES) throw invalidReference(`more than ${MAX_INCLUDES} includes`, next)
      let part = parts.get(ref.key)
      if (!part) {
        let snapshot: Snapshot
        try {
          snapshot = await fetch(ref)
        } catch (err) {
          if (err instanceof AppError && UNRESOLVABLE.has(err.code)) {
            throw invalidReference(`${ref.key} cannot be resolved (${err.message})`, next, err.code)
          }
          throw err
        }
        if (snapshot.chat) throw invalidReference(`${ref.slug} is a chat prompt`, next)
        part = { ref, snapshot, logic: logicOf(snapshot) }
        parts.set(ref.key, part)
      }
      if (ids.includes(part.snapshot.promptId)) throw invalidReference('the references form a cycle', next)
      await walk(part.logic, next, [...ids, part.snapshot.promptId])
    }
  }
  for (const logic of root.logics) await walk(logic, [root.slug], root.promptId ? [root.promptId] : [])
  return parts
}

/** The parts rendered, by their keys in order of first use, as a result's `references`. */
function referencesOf(parts: Map<string, Part>, included: readonly string[]): PromptReference[] {
  const references: PromptReference[] = []
  for (const key of included) {
    const part = parts.get(key)
    if (!part) continue
    references.push({
      slug: part.ref.slug,
      promptId: part.snapshot.promptId,
      versionId: part.snapshot.versionId,
      version: part.snapshot.version,
      via: part.ref.via,
    })
  }
  return references
}

function partVariables(root: readonly Variable[], parts: Map<string, Part>): Variable[] {
  return mergeVariables([root, ...[...parts.values()].map((p) => p.snapshot.variables)])
}

/** Renders a template with references and logic; `references` lists the parts rendered, in order of first use. */
export async function renderComposed(
  root: { slug: string; logic: LogicTemplate; promptId?: string; variables: readonly Variable[] },
  values: Record<string, unknown>,
  mode: RenderMode,
  fetch: FetchReference,
  maxOutputBytes: number,
): Promise<ComposedOutcome> {
  const parts = await resolveParts({ ...root, logics: [root.logic] }, fetch)
  const outcome = renderLogic(root.logic, partVariables(root.variables, parts), values, mode, {
    maxOutputBytes,
    include: (ref) => parts.get(ref.key)?.logic,
  })
  return {
    renderedContent: outcome.renderedContent,
    missingRequired: outcome.missingRequired,
    unresolved: outcome.unresolved,
    references: referencesOf(parts, outcome.included),
  }
}

/**
 * Renders a chat prompt whose messages have references: resolved first for all messages
 * (nothing renders half), then each message rendered with the parts in hand.
 */
export async function renderComposedChat(
  root: { slug: string; chat: CompiledChat; promptId?: string; variables: readonly Variable[] },
  values: Record<string, unknown>,
  mode: RenderMode,
  fetch: FetchReference,
  maxOutputBytes: number,
): Promise<ChatRenderOutcome & { references: PromptReference[] }> {
  const parts = await resolveParts({ ...root, logics: chatLogic(root.chat) }, fetch)
  const outcome = renderChat(root.chat, partVariables(root.variables, parts), values, mode, {
    maxOutputBytes,
    include: (ref) => parts.get(ref.key)?.logic,
  })
  return { ...outcome, references: referencesOf(parts, outcome.included) }
}

/** Whether a chat prompt's messages name any other prompt. */
export function chatHasReferences(chat: CompiledChat): boolean {
  return chatLogic(chat).some((logic) => logic.occurrences.length > 0)
}
