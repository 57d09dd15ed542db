import { readFileSync } from 'node:fs'
import { type ChatMessage, MESSAGE_ROLES, type Prompt, type UpdatePromptRequest } from '@pm/contracts'
import { type Context, clientFor, parse, required, UsageError } from '../context.ts'

/** Flags shared by `prompts create` and `prompts update`. */
export const EDIT_OPTIONS = {
  name: { type: 'string' },
  slug: { type: 'string' },
  description: { type: 'string' },
  tags: { type: 'string' },
  type: { type: 'string' },
  template: { type: 'string' },
  'template-file': { type: 'string' },
  message: { type: 'string', multiple: true },
  'messages-file': { type: 'string' },
  'config-json': { type: 'string' },
  public: { type: 'string' },
} as const

export interface EditValues {
  name?: string
  slug?: string
  description?: string
  tags?: string
  type?: string
  template?: string
  'template-file'?: string
  message?: string[]
  'messages-file'?: string
  'config-json'?: string
  public?: string
}

function readText(path: string, flag: string): string {
  try {
    return readFileSync(path, 'utf8')
  } catch (err) {
    throw new UsageError(`${flag} ${path}: ${(err as NodeJS.ErrnoException).code ?? (err as Error).message}`)
  }
}

function jsonOf(text: string, flag: string): unknown {
  try {
    return JSON.parse(text)
  } catch (err) {
    throw new UsageError(`${flag} is not JSON: ${(err as Error).message}`)
  }
}

/**
 * `--message role:content` (repeated, in order; `--message placeholder:history` splices a message
 * list supplied at invoke), or `--messages-file` with the JSON array. The service validates the
 * shapes; this only turns the flags into the array.
 */
export function messagesOf(values: EditValues): ChatMessage[] | undefined {
  if (values.message && values['messages-file']) {
    throw new UsageError('give --message (repeated) or --messages-file, not both')
  }
  if (values['messages-file']) {
    const parsed = jsonOf(readText(values['messages-file'], '--messages-file'), '--messages-file')
    if (!Array.isArray(parsed)) throw new UsageError('--messages-file must hold a JSON array of messages')
    return parsed as ChatMessage[]
  }
  if (!values.message) return undefined
  return values.message.map((text) => {
    const at = text.indexOf(':')
    const role = at < 0 ? '' : text.slice(0, at).trim()
    const content = text.slice(at + 1)
    if (role === 'placeholder') return { type: 'placeholder', name: content.trim() }
    if (!(MESSAGE_ROLES as readonly string[]).includes(role)) {
      throw new UsageError(
        `--message "${text}" does not start with a role: write --message <role>:<content> with a role of ${MESSAGE_ROLES.join(', ')}, or --message placeholder:<name>`,
      )
    }
    return { role: role as (typeof MESSAGE_ROLES)[number], content }
  })
}

function configOf(values: EditValues): Record<string, unknown> | null | undefined {
  const text = values['config-json']
  if (text === undefined) return undefined
  const parsed = jsonOf(text, '--config-json')
  if (parsed === null) return null
  if (typeof parsed !== 'object' || Array.isArray(parsed)) {
    throw new UsageError('--config-json must be a JSON object (or null to remove it)')
  }
  return parsed as Record<string, unknown>
}

function tagList(text: string | undefined): string[] | undefined {
  return text
    ?.split(/[;,]/)
    .map((t) => t.trim())
    .filter(Boolean)
}

/** The body fields common to create and update, from the flags. */
export function editBody(values: EditValues): UpdatePromptRequest {
  if (values.template !== undefined && values['template-file'] !== undefined) {
    throw new UsageError('give --template or --template-file, not both')
  }
  const template =
    values.template ??
    (values['template-file'] !== undefined ? readText(values['template-file'], '--template-file') : undefined)
  const messages = messagesOf(values)
  if (template !== undefined && messages !== undefined) {
    throw new UsageError(
      'a text prompt takes --template, a chat prompt --message or --messages-file: not both',
    )
  }
  const type = values.type
  if (type !== undefined && type !== 'text' && type !== 'chat') throw new UsageError('--type is text or chat')
  const config = configOf(values)
  let isPublic: boolean | undefined
  if (values.public !== undefined) {
    if (values.public !== 'true' && values.public !== 'false')
      throw new UsageError('--public is true or false')
    isPublic = values.public === 'true'
  }
  return {
    ...(values.name !== undefined ? { name: values.name } : {}),
    ...(values.slug !== undefined ? { slug: values.slug } : {}),
    ...(values.description !== undefined ? { description: values.description } : {}),
    ...(values.tags !== undefined ? { tags: tagList(values.tags) } : {}),
    ...(type !== undefined ? { type } : messages !== undefined ? { type: 'chat' as const } : {}),
    ...(template !== undefined ? { template } : {}),
    ...(messages !== undefined ? { messages } : {}),
    ...(config !== undefined ? { config } : {}),
    ...(isPublic !== undefined ? { isPublic } : {}),
  }
}

function summary(verb: string, prompt: Prompt): string {
  const kind = prompt.type === 'chat' ? `chat prompt (${prompt.messages?.length ?? 0} messages)` : 'prompt'
  return `${verb} ${kind} "${prompt.name}" (${prompt._id}), slug ${prompt.slug}.`
}

/** `pm prompts create`: a text prompt (--template) or a chat prompt (--message ... or --messages-file). */
export async function createPrompt(ctx: Context, args: string[]): Promise<number> {
  const { values } = parse(args, EDIT_OPTIONS)
  const { isPublic, config, ...body } = editBody(values)
  if (config === null) throw new UsageError('--config-json null removes a config: use it with prompts update')
  if (isPublic !== undefined)
    throw new UsageError('--public needs a published version: use prompts update after publish')
  if (body.template === undefined && body.messages === undefined) {
    throw new UsageError(
      body.type === 'chat'
        ? 'a chat prompt needs its messages: --message <role>:<content> (repeated) or --messages-file <path>'
        : '--template or --template-file is required (or --message ... for a chat prompt)',
    )
  }
  const client = await clientFor(ctx, 'any')
  const prompt = await client.api.createPrompt({
    body: { ...body, ...(config ? { config } : {}), name: required(body.name, '--name') },
  })
  ctx.print(summary('Created draft of', prompt), prompt)
  return 0
}

/** `pm prompts update <promptId>`: changes only what the flags name. */
export async function updatePrompt(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { ...EDIT_OPTIONS, force: { type: 'boolean', default: false } })
  const id = positionals[0]
  if (!id)
    throw new UsageError('pm prompts update <promptId> [--name ...] [--template ... | --message ...] ...')
  const { force, ...edits } = values
  const body = editBody(edits)
  if (Object.keys(body).length === 0) {
    throw new UsageError(
      'nothing to change: give at least one of --name, --slug, --description, --tags, --template, --template-file, --message, --messages-file, --config-json, --public',
    )
  }
  const client = await clientFor(ctx, 'any')
  const updated = await client.api.updatePrompt({
    params: { id },
    body,
    ...(force ? { query: { force: 'true' as const } } : {}),
  })
  const stale = updated.staleVariables?.length
    ? `\nvariables the draft no longer uses (kept until removed): ${updated.staleVariables.join(', ')}`
    : ''
  ctx.print(`${summary('Updated', updated)}${stale}`, updated)
  return 0
}

/** `pm prompts delete <promptId> --yes`: the prompt, its versions and pins; there is no undo. */
export async function deletePrompt(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, {
    yes: { type: 'boolean', default: false },
    force: { type: 'boolean', default: false },
  })
  const id = positionals[0]
  if (!id) throw new UsageError('pm prompts delete <promptId> --yes [--force]')
  if (!values.yes) {
    throw new UsageError(`deleting ${id} removes its versions and pins for good: add --yes to confirm`)
  }
  const client = await clientFor(ctx, 'any')
  const deleted = await client.api.deletePrompt({
    params: { id },
    ...(values.force ? { query: { force: 'true' as const } } : {}),
  })
  ctx.print(`Deleted ${id}.`, deleted)
  return 0
}
