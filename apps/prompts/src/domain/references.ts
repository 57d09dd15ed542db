import {
  AppError,
  type ChatMessage,
  EVENT_SUBJECTS,
  type PromptDependencyChangedEvent,
  type PromptReference,
} from '@pm/contracts'
import { newId } from '@pm/kit'
import { compileLogic, type IncludeRef, TemplateSyntaxError } from '@pm/template'
import type { OutboxRecord, PromptRecord } from '../store/types.ts'

/** Bounds of composition (DESIGN section 12). */
export const MAX_INCLUDE_DEPTH = 5
export const MAX_INCLUDES = 50

/**
 * Every reference occurrence of a template, in order (a template that does not parse, an old
 * version, has none: it renders flat).
 */
export function referencesOf(template: string): IncludeRef[] {
  try {
    return [...(compileLogic(template)?.occurrences ?? [])]
  } catch (err) {
    if (err instanceof TemplateSyntaxError) return []
    throw err
  }
}

/**
 * Every reference occurrence of a prompt's content: its template's, or for a chat prompt each
 * message's content in order (its derived template is not parsed as a whole: a block opens and
 * closes within one message).
 */
export function contentReferences(content: {
  template: string
  messages?: readonly ChatMessage[]
}): IncludeRef[] {
  if (!content.messages) return referencesOf(content.template)
  return content.messages.flatMap((m) => ('content' in m ? referencesOf(m.content) : []))
}

/** A refusal at save, naming the field and, for references, the chain. */
export function invalidTemplate(path: string, message: string, chain?: string[]): AppError {
  const text = chain ? `${message}: ${chain.join(' -> ')}` : message
  return new AppError('VALIDATION_ERROR', `${path.split('/').pop()}: ${text}`, [
    { path, message: text, ...(chain ? { chain: chain.join(' -> ') } : {}) },
  ])
}

/** The syntax of a template, checked at save. */
export function checkSyntax(template: string, path: string): void {
  try {
    compileLogic(template)
  } catch (err) {
    if (err instanceof TemplateSyntaxError) {
      throw invalidTemplate(path, `${err.message} (at character ${err.offset})`)
    }
    throw err
  }
}

/** Which changes of an included prompt change a reference's target: a publish moves `latest`, a promote its env. */
export function affectedBy(ref: IncludeRef, change: 'published' | 'preview' | 'production'): boolean {
  return change === 'published' ? ref.via === 'latest' : ref.via === change
}

export function dependencyChanged(
  parent: PromptRecord,
  includedSlug: string,
  via: PromptReference['via'],
  at: string,
): OutboxRecord {
  const event: PromptDependencyChangedEvent = {
    id: newId(),
    type: 'prompt.dependency.changed',
    createdAt: at,
    organizationId: parent.organizationId,
    data: { promptId: parent._id, slug: parent.slug, includedSlug, via },
  }
  return {
    _id: event.id,
    subject: EVENT_SUBJECTS[event.type],
    msgId: event.id,
    payload: event,
    createdAt: at,
    sentAt: null,
  }
}
