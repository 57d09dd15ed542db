import { AppError, type ChatMessage, type RenderedMessage, type Variable } from '@pm/contracts'
import {
  type CompiledChat,
  chatLogic,
  type CompiledTemplate,
  compileChat,
  compileLogicOrFlat,
  compileTemplate,
  type LogicTemplate,
  renderChat,
  renderCompiled,
  renderLogic,
} from '@pm/template'
import { PromptServiceError } from './errors.ts'

/**
 * The render service's output cap by default (`RENDER_MAX_OUTPUT_BYTES`, 1 MiB): a local
 * rendering larger than it is refused with the service's 422 RENDER_TOO_LARGE, so that code
 * tried against renderLocally behaves the same against invoke. Set the client's
 * `maxOutputBytes` to the service's value when it was changed.
 */
export const DEFAULT_MAX_OUTPUT_BYTES = 1024 * 1024

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

export interface LocalRenderOptions {
  /** Largest rendered text, in UTF-8 bytes (default DEFAULT_MAX_OUTPUT_BYTES, as the service). */
  maxOutputBytes?: number
}

/** A parsed version, with its `{{> slug}}` reference keys (its template's, or each chat message's). */
type Compiled = (
  | { kind: 'text'; compiled: CompiledTemplate }
  | { kind: 'logic'; logic: LogicTemplate }
  | { kind: 'chat'; chat: CompiledChat }
) & { references: string[] }

const keysOf = (logics: LogicTemplate[]): string[] =>
  logics.flatMap((logic) => logic.includes.map((ref) => ref.key))

/** Parsed once per fetched version (the object the cache holds), then reused by every render. */
const compiledOf = new WeakMap<RenderSource, Compiled>()

function compile(source: RenderSource): Compiled {
  let found = compiledOf.get(source)
  if (!found) {
    if (source.messages) {
      const chat = compileChat(source.messages)
      found = { kind: 'chat', chat, references: keysOf(chatLogic(chat)) }
    } else {
      // As the render service's snapshot: a template with blocks or references renders through
      // the logic engine; one without (or an old version whose blocks do not parse), flat.
      const compiled = compileTemplate(source.template)
      const logic = compileLogicOrFlat(source.template, compiled)
      found =
        logic.occurrences.length > 0 || logic.nodes.some((n) => n.kind !== 'text' && n.kind !== 'var')
          ? { kind: 'logic', logic, references: keysOf([logic]) }
          : { kind: 'text', compiled, references: [] }
    }
    compiledOf.set(source, found)
  }
  return found
}

/**
 * Whether the version includes other prompts (`{{> slug}}`). Those are resolved by the render
 * service at render time (docs/decisions.md), so such a prompt cannot render here: the client's
 * renderLocally asks the service's invoke for it instead.
 */
export function hasReferences(source: RenderSource): boolean {
  return compile(source).references.length > 0
}

/**
 * Renders a published version the way the service's invoke does (the same engine, the same
 * rules and the same refusals: 400 MISSING_REQUIRED_VARIABLES naming the absent required
 * variables, 400 VALIDATION_ERROR for a chat placeholder whose value is not a list of
 * `{role, content}` or an `{{#each}}` over something that is not a list, 422 RENDER_TOO_LARGE
 * past the output cap), without a network call. A version that includes other prompts is
 * refused with 400 REFERENCES_NOT_LOCAL (see hasReferences).
 */
export function renderLocally(
  source: RenderSource,
  values: Record<string, unknown>,
  options: LocalRenderOptions = {},
): LocalRendering {
  const compiled = compile(source)
  const maxOutputBytes = options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES
  try {
    if (compiled.kind === 'text') {
      const outcome = renderCompiled(compiled.compiled, source.variables, values, 'invoke', {
        maxOutputBytes,
      })
      if (outcome.missingRequired.length > 0) throw missingRequired(outcome.missingRequired)
      return { renderedContent: outcome.renderedContent }
    }
    const { references } = compiled
    if (references.length > 0) {
      throw new PromptServiceError({
        status: 400,
        code: 'REFERENCES_NOT_LOCAL',
        message:
          'this version includes other prompts ({{> slug}}), which the service resolves: ' +
          'render it with invoke (the client’s renderLocally does so by itself)',
        details: references,
      })
    }
    if (compiled.kind === 'logic') {
      const outcome = renderLogic(compiled.logic, source.variables, values, 'invoke', { maxOutputBytes })
      if (outcome.missingRequired.length > 0) throw missingRequired(outcome.missingRequired)
      return { renderedContent: outcome.renderedContent }
    }
    const outcome = renderChat(compiled.chat, source.variables, values, 'invoke', { maxOutputBytes })
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
  } catch (err) {
    // The engine's own refusals (RENDER_TOO_LARGE, an #each over a non-list), as the service answers them.
    if (err instanceof AppError) {
      throw new PromptServiceError({
        status: err.statusCode,
        code: err.code,
        message: err.message,
        details: err.details,
      })
    }
    throw err
  }
}

function missingRequired(names: string[]): PromptServiceError {
  return new PromptServiceError({
    status: 400,
    code: 'MISSING_REQUIRED_VARIABLES',
    message: `missing required variables: ${names.join(', ')}`,
    details: names,
  })
}
