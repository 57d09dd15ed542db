import {
  AppError,
  type ChatMessage,
  ChatMessage as ChatMessageSchema,
  ChatMessages,
  CONFIG_MAX_BYTES,
  CONFIG_MAX_DEPTH,
  MESSAGE_ROLES,
  MESSAGES_MAX,
  MessageRole,
  PlaceholderMessage,
  type PromptConfig,
  type PromptType,
  TEMPLATE_MAX,
  TemplateMessage,
  type Variable,
  type VariableInput,
} from '@pm/contracts'
import { nestsDeeperThan, parseJsonText } from '@pm/kit'
import { chatTemplate, chatVariableNames, syncVariableNames, syncVariables } from '@pm/template'
import { Value } from '@sinclair/typebox/value'

/**
 * The rules of a prompt's content (DESIGN section 9), as pure functions: which fields a text
 * and a chat prompt take, the derived template of a chat prompt, the variables detected across
 * its messages, and the size of `config`. The service calls them; they do no I/O.
 */

export interface Content {
  template: string
  /** Chat prompts only. */
  messages?: ChatMessage[]
  variables: Variable[]
  staleVariables: string[]
}

function invalid(path: string, message: string): AppError {
  return new AppError('VALIDATION_ERROR', `${path.split('/').pop()}: ${message}`, [{ path, message }])
}

/**
 * The content of a prompt of `type` from what a create (or an update, merged over the
 * current draft by the caller) gives: a text prompt takes `template` and no `messages`; a chat
 * prompt takes `messages` and derives `template`, which it refuses from the client.
 */
export function buildContent(
  type: PromptType,
  given: { template?: string; messages?: ChatMessage[] },
  declared: readonly VariableInput[],
): Content {
  if (type === 'text') {
    if (given.messages !== undefined) {
      throw invalid('/body/messages', 'a text prompt has no messages (create it with type "chat")')
    }
    if (given.template === undefined) throw invalid('/body/template', 'is required for a text prompt')
    const { variables, staleVariables } = syncVariables(given.template, declared)
    return { template: given.template, variables, staleVariables }
  }
  if (given.template !== undefined) {
    throw invalid('/body/template', 'is derived from the messages of a chat prompt and cannot be set')
  }
  if (given.messages === undefined || given.messages.length === 0) {
    throw invalid('/body/messages', 'a chat prompt needs at least one message')
  }
  const template = chatTemplate(given.messages)
  if (template.length > TEMPLATE_MAX) {
    throw invalid('/body/messages', `together must not be longer than ${TEMPLATE_MAX} characters`)
  }
  const { names, placeholders } = chatVariableNames(given.messages)
  const { variables, staleVariables } = syncVariableNames(names, declared, placeholders)
  return { template, messages: given.messages, variables, staleVariables }
}

/** `type` is set at creation and fixed afterwards; naming the current one is accepted. */
export function checkTypeUnchanged(current: PromptType, asked: PromptType | undefined): void {
  if (asked !== undefined && asked !== current) {
    throw invalid('/body/type', `is fixed at creation (this prompt is a ${current} prompt)`)
  }
}

/**
 * A prompt's config: a JSON object of at most CONFIG_MAX_BYTES serialized, nested at most
 * CONFIG_MAX_DEPTH deep (the schema checks it is an object). The depth first: serializing a deep
 * one overflows the stack long before its size is known.
 */
export function checkConfig(config: PromptConfig): PromptConfig {
  if (nestsDeeperThan(config, CONFIG_MAX_DEPTH)) {
    throw invalid('/body/config', `must not nest more than ${CONFIG_MAX_DEPTH} levels deep`)
  }
  const bytes = Buffer.byteLength(JSON.stringify(config), 'utf8')
  if (bytes > CONFIG_MAX_BYTES) {
    throw invalid('/body/config', `must be at most ${CONFIG_MAX_BYTES} bytes serialized (it is ${bytes})`)
  }
  return config
}

/** The content fields of a version snapshot or a draft: a chat prompt's messages, a config when set. */
export function contentFields(source: {
  type: PromptType
  messages?: ChatMessage[]
  config?: PromptConfig
}): { messages?: ChatMessage[]; config?: PromptConfig } {
  return {
    ...(source.type === 'chat' && source.messages ? { messages: source.messages } : {}),
    ...(source.config ? { config: source.config } : {}),
  }
}

const MESSAGE_REFS = [MessageRole, TemplateMessage, PlaceholderMessage, ChatMessageSchema]

/**
 * A chat prompt's messages from JSON text (a CSV cell): the list, or what is wrong with it,
 * by the same schema the create route applies.
 */
export function parseMessages(text: string): ChatMessage[] | string {
  if (text.trim() === '') return 'messages are required for a chat prompt'
  let value: unknown
  try {
    // The JSON body rule, as for the config cell.
    value = parseJsonText(text)
  } catch {
    return 'messages is not valid JSON'
  }
  if (!Array.isArray(value) || value.length === 0)
    return 'messages must be a JSON list of at least one message'
  if (value.length > MESSAGES_MAX) return `more than ${MESSAGES_MAX} messages`
  if (!Value.Check(ChatMessages, MESSAGE_REFS, value)) {
    return `messages must be {role, content} (role one of ${MESSAGE_ROLES.join(', ')}) or {type: "placeholder", name}`
  }
  return value as ChatMessage[]
}
