import type { ChatMessage, RenderedMessage, Variable } from '@pm/contracts'
import {
  type CompiledChat,
  type CompiledTemplate,
  compileChat,
  compileTemplate,
  renderChat,
  renderCompiled,
} from '@pm/template'
import { PromptServiceError } from './errors.ts'

/** What a local rendering needs of a fetched version: its content and declared variables. */
export interface RenderSource {
  template: string
  variables: readonly Variable[]
  /** Chat prompts: the messages (the template is then derived from them). */
  messages?: readonly ChatMessage[]
}

export interface LocalRendering {
  renderedContent: string
  /** Chat prompts: the messages, placeholders spliced in. */
  renderedMessages?: RenderedMessage[]
}

type Compiled = { kind: 'text'; compiled: CompiledTemplate } | { kind: 'chat'; chat: CompiledChat }

/** Parsed once per fetched version (the object the cache holds), then reused by every render. */
const compiledOf = new WeakMap<RenderSource, Compiled>()

function compile(source: RenderSource): Compiled {
  let found = compiledOf.get(source)
  if (!found) {
    found = source.messages
      ? { kind: 'chat', chat: compileChat(source.messages) }
      : { kind: 'text', compiled: compileTemplate(source.template) }
    compiledOf.set(source, found)
  }
  return found
}

/**
 * Renders a published version the way the service's invoke does (the same engine, the same
 * rules and the same refusals: 400 MISSING_REQUIRED_VARIABLES naming the absent required
 * variables, 400 VALIDATION_ERROR for a chat placeholder whose value is not a list of
 * `{role, content}`), without a network call. The service's size limit
 * (RENDER_MAX_OUTPUT_BYTES) is not applied: the text stays in this process.
 */
export function renderLocally(source: RenderSource, values: Record<string, unknown>): LocalRendering {
  const compiled = compile(source)
  if (compiled.kind === 'text') {
    const outcome = renderCompiled(compiled.compiled, source.variables, values, 'invoke')
    if (outcome.missingRequired.length > 0) throw missingRequired(outcome.missingRequired)
    return { renderedContent: outcome.renderedContent }
  }
  const outcome = renderChat(compiled.chat, source.variables, values, 'invoke')
  if (outcome.missingRequired.length > 0) throw missingRequired(outcome.missingRequired)
  if (outcome.invalidPlaceholders.length > 0) {
    const names = outcome.invalidPlaceholders
    throw new PromptServiceError({
      status: 400,
      code: 'VALIDATION_ERROR',
      message: `not a list of {role, content} messages: ${names.join(', ')}`,
      details: names.map((name) => ({
        path: `/body/variables/${name}`,
        message: 'must be an array of {role, content} with a known role and text content',
      })),
    })
  }
  return { renderedContent: outcome.renderedContent, renderedMessages: outcome.renderedMessages }
}

function missingRequired(names: string[]): PromptServiceError {
  return new PromptServiceError({
    status: 400,
    code: 'MISSING_REQUIRED_VARIABLES',
    message: `missing required variables: ${names.join(', ')}`,
    details: names,
  })
}
