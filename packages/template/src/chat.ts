import {
  type ChatMessage,
  MESSAGE_ROLES,
  type MessageRole,
  type RenderedMessage,
  type Variable,
} from '@pm/contracts'
import { type CompiledTemplate, compileTemplate, utf8Length } from './compile.ts'
import {
  compileLogicIfAny,
  DEFAULT_MAX_STEPS,
  type LogicRenderOptions,
  type LogicTemplate,
  renderLogic,
  templateVariableNames,
} from './logic.ts'
import { formatValue, type RenderMode, type RenderOptions, renderTooLarge } from './render.ts'

/**
 * Chat prompts (DESIGN section 9): a list of role messages whose contents are templates, and
 * placeholders that stand for a list of messages supplied at invoke. A message's content takes
 * the logic and references of a text template (DESIGN section 12), each message on its own: a
 * block opens and closes in one message.
 */

export type CompiledChatEntry =
  | {
      readonly kind: 'message'
      readonly role: MessageRole
      readonly compiled: CompiledTemplate
      /** Content with blocks or references, parsed once; absent: the flat path renders it. */
      readonly logic?: LogicTemplate
    }
  | { readonly kind: 'placeholder'; readonly name: string }

export type CompiledChat = readonly CompiledChatEntry[]

const isPlaceholder = (m: ChatMessage): m is Extract<ChatMessage, { type: 'placeholder' }> =>
  'type' in m && m.type === 'placeholder'

/** Parses every message once, so that rendering a cached chat prompt is a walk over prepared parts. */
export function compileChat(messages: readonly ChatMessage[]): CompiledChat {
  return messages.map((m): CompiledChatEntry => {
    if (isPlaceholder(m)) return { kind: 'placeholder', name: m.name }
    const logic = compileLogicIfAny(m.content)
    return {
      kind: 'message',
      role: m.role,
      compiled: compileTemplate(m.content),
      ...(logic ? { logic } : {}),
    }
  })
}

/** The contents of a chat prompt's messages that have blocks or references, in order. */
export function chatLogic(chat: CompiledChat): LogicTemplate[] {
  const out: LogicTemplate[] = []
  for (const entry of chat) if (entry.kind === 'message' && entry.logic) out.push(entry.logic)
  return out
}

/** One message as a block of the derived template: `[role]\ncontent`, a placeholder as `[placeholder name]`. */
export function messageBlock(m: ChatMessage): string {
  return isPlaceholder(m) ? `[placeholder ${m.name}]` : `[${m.role}]\n${m.content}`
}

/** The read-only `template` of a chat prompt: its messages as blocks joined by a blank line. */
export function chatTemplate(messages: readonly ChatMessage[]): string {
  return messages.map(messageBlock).join('\n\n')
}

/**
 * The variables a chat prompt uses, in order of first appearance: the placeholders of every
 * message's content, and the names of placeholder messages (`placeholders`, which are
 * always required).
 */
export function chatVariableNames(messages: readonly ChatMessage[]): {
  names: string[]
  placeholders: string[]
} {
  const seen = new Set<string>()
  const names: string[] = []
  const placeholders: string[] = []
  const add = (name: string) => {
    if (seen.has(name)) return
    seen.add(name)
    names.push(name)
  }
  for (const m of messages) {
    if (isPlaceholder(m)) {
      add(m.name)
      if (!placeholders.includes(m.name)) placeholders.push(m.name)
    } else {
      for (const name of templateVariableNames(m.content) ?? compileTemplate(m.content).names) add(name)
    }
  }
  return { names, placeholders }
}

const ROLES: ReadonlySet<string> = new Set(MESSAGE_ROLES)

/** A supplied placeholder value: a list of `{role, content}` with a known role and text content. */
export function asMessageList(value: unknown): RenderedMessage[] | null {
  if (!Array.isArray(value)) return null
  const out: RenderedMessage[] = []
  for (const item of value) {
    if (typeof item !== 'object' || item === null || Array.isArray(item)) return null
    const { role, content } = item as Record<string, unknown>
    if (typeof role !== 'string' || !ROLES.has(role) || typeof content !== 'string') return null
    out.push({ role: role as MessageRole, content })
  }
  return out
}

export interface ChatRenderOutcome {
  renderedMessages: RenderedMessage[]
  /** The rendered messages as blocks, like the derived template (an unresolved placeholder stays a block). */
  renderedContent: string
  /** Declared required variables whose key is absent from the values, in declaration order. */
  missingRequired: string[]
  /** Names with neither a supplied value nor a default, unique, in order of first appearance. */
  unresolved: string[]
  /** Placeholders whose supplied value is not a list of `{role, content}`. */
  invalidPlaceholders: string[]
  /** The reference keys rendered (messages with `{{> slug}}`), in order of first use. */
  included: string[]
}

export interface ChatRenderOptions extends RenderOptions {
  /** The included template for a reference (resolved beforehand by the caller). */
  include?: LogicRenderOptions['include']
  /** Most nodes evaluated over all messages with logic. */
  maxSteps?: number
}

const own = (values: Record<string, unknown>, name: string): unknown =>
  Object.hasOwn(values, name) ? values[name] : undefined

/**
 * Renders a chat prompt with the rules of `renderCompiled` for each message's content; a
 * placeholder is replaced by the messages supplied under its name. In inject mode a
 * placeholder without a value is left out of `renderedMessages`, kept as its block in
 * `renderedContent` and listed as unresolved.
 */
export function renderChat(
  chat: CompiledChat,
  variables: readonly Variable[],
  values: Record<string, unknown>,
  mode: RenderMode,
  options: ChatRenderOptions = {},
): ChatRenderOutcome {
  // The size of renderedContent, counted before each part is built (issue 14, finding 2).
  const max = options.maxOutputBytes
  let size = 0
  const grow = (bytes: number) => {
    size += bytes
    if (max !== undefined && size > max) throw renderTooLarge(max)
  }
  const textBytes = new Map<string, number>()
  const bytesOf = (name: string, value: string | undefined, raw: number): number => {
    if (value === undefined) return raw
    let bytes = textBytes.get(name)
    if (bytes === undefined) {
      bytes = utf8Length(value)
      textBytes.set(name, bytes)
    }
    return bytes
  }
  const declared = new Map<string, Variable>()
  for (const v of variables) if (!declared.has(v.name)) declared.set(v.name, v)
  const missingRequired: string[] = []
  for (const v of declared.values()) {
    if (v.required && own(values, v.name) === undefined) missingRequired.push(v.name)
  }

  const unresolved: string[] = []
  const unresolvedSet = new Set<string>()
  const noteUnresolved = (name: string) => {
    if (unresolvedSet.has(name)) return
    unresolvedSet.add(name)
    unresolved.push(name)
  }
  // Each name resolved once; undefined: leave the placeholder as written (inject).
  const resolvedText = new Map<string, string | undefined>()
  const text = (name: string): string | undefined => {
    if (resolvedText.has(name)) return resolvedText.get(name)
    const value = own(values, name)
    let out: string | undefined
    if (value !== undefined) out = formatValue(value)
    else {
      const fallback = declared.get(name)?.defaultValue
      if (fallback !== undefined) out = fallback
      else {
        noteUnresolved(name)
        out = mode === 'invoke' ? '' : undefined
      }
    }
    resolvedText.set(name, out)
    return out
  }

  const renderedMessages: RenderedMessage[] = []
  const blocks: string[] = []
  const invalidPlaceholders: string[] = []
  const included: string[] = []
  let stepsLeft = options.maxSteps ?? DEFAULT_MAX_STEPS
  for (const entry of chat) {
    if (entry.kind === 'message' && entry.logic) {
      // Blocks and references: the logic renderer, counted against the same output cap.
      const head = utf8Length(entry.role) + 3 + (blocks.length > 0 ? 2 : 0) // "\n\n[" role "]\n"
      grow(head)
      const outcome = renderLogic(entry.logic, variables, values, mode, {
        maxOutputBytes: max ?? Number.POSITIVE_INFINITY,
        startBytes: size,
        maxSteps: stepsLeft,
        ...(options.include ? { include: options.include } : {}),
      })
      stepsLeft -= outcome.steps
      grow(outcome.bytes)
      for (const name of outcome.unresolved) noteUnresolved(name)
      for (const key of outcome.included) if (!included.includes(key)) included.push(key)
      renderedMessages.push({ role: entry.role, content: outcome.renderedContent })
      blocks.push(`[${entry.role}]\n${outcome.renderedContent}`)
      continue
    }
    if (entry.kind === 'message') {
      let bytes = entry.compiled.bytes.tail + utf8Length(entry.role) + 3 // "[" role "]\n"
      entry.compiled.slots.forEach((slot, i) => {
        const name = entry.compiled.names[slot.id] ?? ''
        bytes +=
          (entry.compiled.bytes.before[i] ?? 0) + bytesOf(name, text(name), entry.compiled.bytes.raw[i] ?? 0)
      })
      grow(bytes + (blocks.length > 0 ? 2 : 0))
      let content = ''
      for (const slot of entry.compiled.slots) {
        const name = entry.compiled.names[slot.id] ?? ''
        content += slot.before + (text(name) ?? slot.raw)
      }
      content += entry.compiled.tail
      renderedMessages.push({ role: entry.role, content })
      blocks.push(`[${entry.role}]\n${content}`)
      continue
    }
    const value = own(values, entry.name)
    if (value === undefined) {
      noteUnresolved(entry.name)
      if (mode === 'inject') {
        const block = `[placeholder ${entry.name}]`
        grow(utf8Length(block) + (blocks.length > 0 ? 2 : 0))
        blocks.push(block)
      }
      continue
    }
    const list = asMessageList(value)
    if (!list) {
      if (!invalidPlaceholders.includes(entry.name)) invalidPlaceholders.push(entry.name)
      continue
    }
    for (const m of list) {
      grow(utf8Length(m.role) + utf8Length(m.content) + 3 + (blocks.length > 0 ? 2 : 0))
      renderedMessages.push(m)
      blocks.push(`[${m.role}]\n${m.content}`)
    }
  }
  return {
    renderedMessages,
    renderedContent: blocks.join('\n\n'),
    missingRequired,
    unresolved,
    invalidPlaceholders,
    included,
  }
}
