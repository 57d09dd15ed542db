import {
  ChatMessage as ChatMessageSchema,
  type ChatMessage,
  CreatePromptRequest,
  type EnvironmentName,
  type FileFormat,
  MESSAGE_ROLES,
  type MessageRole,
  MessageRole as MessageRoleSchema,
  PlaceholderMessage,
  PromptConfig as PromptConfigSchema,
  type PromptConfig,
  PromptType,
  type PromptType as PromptKind,
  TemplateMessage,
  patternProblem,
  textControlAt,
  type Variable,
  type VariableInput,
  VariableInput as VariableInputSchema,
} from '@pm/contracts'
import { createHash } from 'node:crypto'
import { Value } from '@sinclair/typebox/value'
import { parseDocument, stringify } from 'yaml'
import { slugify } from './slug.ts'

/**
 * Prompt files (DESIGN section 16), as pure functions: a prompt (draft or version) written as a
 * Dotprompt, Prompty or JSON file, and such files (or a Langfuse JSON array) read back into what
 * a create or an update takes. YAML is read and written by the `yaml` library; nothing here
 * parses YAML by hand. Template text (with `{{#if}}` blocks and `{{> slug}}` references) is
 * carried verbatim.
 */

/** The largest prompt file read (a 2 MB file is an error of the plan, not a 5xx). */
export const PROMPT_FILE_MAX_BYTES = 1024 * 1024

/** What is exported: a draft (version null) or a published version, with the prompt's metadata. */
export interface ExportSource {
  slug: string
  name: string
  description: string
  tags: string[]
  type: PromptKind
  template: string
  messages?: ChatMessage[]
  variables: Variable[]
  config?: PromptConfig
  version: number | null
  versionId: string | null
}

/** A prompt read from a file: what create (or, matched by slug, update) takes. */
export interface FilePrompt {
  slug: string
  name: string
  description: string
  tags: string[]
  type: PromptKind
  template?: string
  messages?: ChatMessage[]
  variables: VariableInput[]
  config?: PromptConfig
  /** Environments to pin the published version to (Langfuse labels). */
  pin?: EnvironmentName[]
}

export type ParsedFile =
  | { ok: true; file: string; prompt: FilePrompt }
  | { ok: false; file: string; slug: string | null; message: string }

class FileError extends Error {
  override name = 'FileError'
}

// ---------------------------------------------------------------- export

/**
 * The draft's revision, for optimistic concurrency (`pm push` after `pm pull`): a hash of what
 * the draft holds and when it was last saved, so that any save in between (even within the same
 * millisecond) gives another revision.
 */
export function draftRevision(prompt: {
  name: string
  slug: string
  description: string
  tags: string[]
  type: PromptKind
  template: string
  messages?: ChatMessage[]
  variables: Variable[]
  config?: PromptConfig
  updatedAt: string
}): string {
  const { name, slug, description, tags, type, template, messages, variables, config, updatedAt } = prompt
  const text = JSON.stringify([
    name,
    slug,
    description,
    tags,
    type,
    template,
    messages ?? null,
    variables,
    config ?? null,
    updatedAt,
  ])
  return createHash('sha256').update(text).digest('hex').slice(0, 24)
}

const HISTORY = 'history'

function placeholderMarker(name: string): string {
  return name === HISTORY ? '{{history}}' : `{{! placeholder ${name} }}`
}

/** A chat prompt's messages as sections: `marker(role)` lines, each followed by its content. */
function sections(messages: ChatMessage[], marker: (role: MessageRole) => string): string {
  let out = ''
  for (const m of messages) {
    out += 'type' in m ? `${placeholderMarker(m.name)}\n` : `${marker(m.role)}\n${m.content}\n`
  }
  return out
}

function body(src: ExportSource, marker: (role: MessageRole) => string): string {
  return src.type === 'chat' && src.messages ? sections(src.messages, marker) : src.template
}

function placeholderNames(src: { messages?: ChatMessage[] }): Set<string> {
  return new Set((src.messages ?? []).flatMap((m) => ('type' in m ? [m.name] : [])))
}

function splitConfig(config: PromptConfig | undefined): { model?: unknown; rest: PromptConfig } {
  const { model, ...rest } = config ?? {}
  return model === undefined ? { rest } : { model, rest }
}

function yamlText(value: unknown): string {
  // lineWidth 0: long strings are never folded (a template stays byte for byte as it was).
  return stringify(value, { lineWidth: 0, minContentWidth: 0 })
}

function frontMatter(front: Record<string, unknown>, text: string): string {
  return `---\n${yamlText(front)}---\n${text}`
}

function metadata(src: ExportSource, withNames: boolean): Record<string, unknown> {
  return {
    slug: src.slug,
    ...(withNames ? { name: src.name, description: src.description, tags: src.tags } : {}),
    type: src.type,
    ...(src.version === null ? {} : { version: src.version, versionId: src.versionId }),
  }
}

/** Dotprompt: model, config, input (Picoschema, `?` for optional), metadata.prompt, then the template. */
export function toDotprompt(src: ExportSource): string {
  const { model, rest } = splitConfig(src.config)
  const front: Record<string, unknown> = {}
  if (model !== undefined) front.model = model
  if (Object.keys(rest).length > 0) front.config = rest
  const placeholders = placeholderNames(src)
  if (src.variables.length > 0) {
    const schema: Record<string, string> = {}
    const defaults: Record<string, string> = {}
    for (const v of src.variables) {
      const list = placeholders.has(v.name)
      // The description as it is (an empty one too): readSchema takes everything after ", ".
      const described = v.description === undefined ? '' : `, ${v.description}`
      const key = `${v.name}${v.required ? '' : '?'}${list ? `(array${described})` : ''}`
      schema[key] = list ? 'object' : `string${described}`
      if (v.defaultValue !== undefined) defaults[v.name] = v.defaultValue
    }
    front.input = { schema, ...(Object.keys(defaults).length > 0 ? { default: defaults } : {}) }
  }
  front.metadata = { prompt: metadata(src, true) }
  return frontMatter(
    front,
    body(src, (role) => `{{role "${role}"}}`),
  )
}

/** Prompty: name, description, model {api, configuration, parameters}, inputs, then role sections. */
export function toPrompty(src: ExportSource): string {
  const { model, rest } = splitConfig(src.config)
  const placeholders = placeholderNames(src)
  const inputs: Record<string, Record<string, unknown>> = {}
  for (const v of src.variables) {
    const input: Record<string, unknown> = { type: placeholders.has(v.name) ? 'array' : 'string' }
    if (v.description !== undefined) input.description = v.description
    if (v.defaultValue !== undefined) input.default = v.defaultValue
    // Without `required`, an input is optional when it has a default: say so only when not.
    if (v.required !== (v.defaultValue === undefined)) input.required = v.required
    inputs[v.name] = input
  }
  const front: Record<string, unknown> = {
    name: src.name,
    description: src.description,
    tags: src.tags,
    model: {
      api: src.type === 'chat' ? 'chat' : 'completion',
      ...(model === undefined ? {} : { configuration: { name: model } }),
      ...(Object.keys(rest).length > 0 ? { parameters: rest } : {}),
    },
    ...(src.variables.length > 0 ? { inputs } : {}),
    template: 'mustache',
    metadata: metadata(src, false),
  }
  return frontMatter(
    front,
    body(src, (role) => `${role}:`),
  )
}

/** This service's own shape, lossless. */
export function toJsonFile(src: ExportSource): string {
  const out = {
    slug: src.slug,
    name: src.name,
    description: src.description,
    tags: src.tags,
    type: src.type,
    ...(src.type === 'chat' ? { messages: src.messages ?? [] } : { template: src.template }),
    variables: src.variables,
    ...(src.config ? { config: src.config } : {}),
    ...(src.version === null ? {} : { version: src.version, versionId: src.versionId }),
  }
  return `${JSON.stringify(out, null, 2)}\n`
}

export function exportFile(src: ExportSource, format: FileFormat): string {
  if (format === 'prompty') return toPrompty(src)
  if (format === 'json') return toJsonFile(src)
  return toDotprompt(src)
}

// ---------------------------------------------------------------- import

function decode(bytes: Uint8Array): string {
  let text: string
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes)
  } catch {
    throw new FileError('the file is not UTF-8 text')
  }
  if (text.startsWith('\uFEFF')) text = text.slice(1)
  // Tab, line feed and carriage return are text; the other C0 controls and DEL are not (as in routes).
  const at = textControlAt(text)
  if (at >= 0) {
    const line = text.slice(0, at).split('\n').length
    throw new FileError(
      `the file holds a control character (U+${text.charCodeAt(at).toString(16).padStart(4, '0').toUpperCase()}) on line ${line}`,
    )
  }
  // Files written on Windows: the markers and front matter are found the same way.
  return text.replace(/\r\n/g, '\n')
}

const isObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v)

const MAX_DEPTH = 64

/**
 * Numbers as JSON carries them: integers, read as bigint exactly as they were written, become
 * numbers within 2^53 and are refused beyond it (they would be rounded), as is a number too large
 * for a double (1e999). Other numbers are kept: 1e300 is a float, exact as written, and written
 * back the same (Number.isInteger cannot tell it from a long integer, the source can).
 */
function exactNumbers(value: unknown, path: string, depth = 0): unknown {
  // Deeper than any model setting needs, and shallow enough for every recursive step after this.
  if (depth > MAX_DEPTH) throw new FileError(`${path}: nested more than ${MAX_DEPTH} levels deep`)
  if (typeof value === 'number') {
    if (!Number.isFinite(value)) throw new FileError(`${path}: the number is too large`)
  } else if (typeof value === 'bigint') {
    const n = Number(value)
    if (!Number.isSafeInteger(n)) throw new FileError(`${path}: the integer is too large to keep exactly`)
    return n
  } else if (Array.isArray(value)) {
    return value.map((v, i) => exactNumbers(v, `${path}/${i}`, depth + 1))
  } else if (isObject(value)) {
    return Object.fromEntries(
      Object.entries(value).map(([k, v]) => {
        // As the JSON body rule (kit's parseJsonText): MongoDB cannot store such a key.
        if (k.includes('\u0000')) throw new FileError(`${path}: a key contains U+0000`)
        return [k, exactNumbers(v, `${path}/${k}`, depth + 1)]
      }),
    )
  }
  return value
}

/** JSON with its integers as bigint (as written, for exactNumbers); `context.source` is Node 21+. */
function parseJson(text: string): unknown {
  return JSON.parse(text, (_key, value: unknown, context?: { source?: string }) =>
    typeof value === 'number' && context?.source !== undefined && /^-?\d+$/.test(context.source)
      ? BigInt(context.source)
      : value,
  )
}

/**
 * Refuses text whose `[`/`{` nesting goes deeper than MAX_DEPTH before a parser sees it: deep
 * nesting costs the parsers seconds (and their stacks) long before the size limit. Inside JSON
 * strings brackets do not count; YAML is scanned as it is (brackets in a quoted YAML string count,
 * which no real front matter comes near).
 */
function checkNesting(text: string, json: boolean): void {
  let depth = 0
  let inString = false
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i)
    if (inString) {
      if (c === 0x5c) i++
      else if (c === 0x22) inString = false
      continue
    }
    if (json && c === 0x22) inString = true
    else if (c === 0x5b || c === 0x7b) {
      if (++depth > MAX_DEPTH) throw new FileError(`the file is nested more than ${MAX_DEPTH} levels deep`)
    } else if ((c === 0x5d || c === 0x7d) && depth > 0) depth--
  }
}

/** YAML front matter as an object: core schema only, duplicate keys and alias bombs refused. */
function readYaml(text: string): Record<string, unknown> {
  checkNesting(text, false)
  // intAsBigInt: integers as written, for exactNumbers to judge.
  const doc = parseDocument(text, {
    schema: 'core',
    uniqueKeys: true,
    merge: false,
    prettyErrors: false,
    intAsBigInt: true,
  })
  const problem = doc.errors[0]
  if (problem) throw new FileError(`the front matter is not valid YAML: ${problem.message.split('\n')[0]}`)
  let value: unknown
  try {
    value = doc.toJS({ maxAliasCount: 50 })
  } catch (err) {
    throw new FileError(`the front matter is not valid YAML: ${(err as Error).message.split('\n')[0]}`)
  }
  if (value === null || value === undefined) return {}
  if (!isObject(value)) throw new FileError('the front matter is not an object (a YAML mapping)')
  return exactNumbers(value, 'front matter') as Record<string, unknown>
}

/** `---` YAML `---` then the body; a file without front matter is all body. */
function splitFrontMatter(text: string): { front: Record<string, unknown>; body: string } {
  if (!text.startsWith('---\n') && text !== '---') return { front: {}, body: text }
  const rest = text.slice(4)
  const close = /^---[ \t]*$/m.exec(rest)
  if (!close) throw new FileError('the front matter has no closing "---" line')
  const yamlPart = rest.slice(0, close.index)
  let after = rest.slice(close.index + close[0].length)
  if (after.startsWith('\n')) after = after.slice(1)
  return { front: readYaml(yamlPart), body: after }
}

interface Markers {
  role: (line: string) => { role: MessageRole; rest: string } | null
}

const ROLE_ALIASES: Record<string, MessageRole> = { model: 'assistant' }

function roleOf(name: string): MessageRole | null {
  const lower = name.toLowerCase()
  if ((MESSAGE_ROLES as readonly string[]).includes(lower)) return lower as MessageRole
  return ROLE_ALIASES[lower] ?? null
}

const DOTPROMPT_MARKERS: Markers = {
  role: (line) => {
    const m = /^\{\{\s*role\s+"([A-Za-z]+)"\s*\}\}(.*)$/.exec(line)
    if (!m) return null
    const role = roleOf(m[1] ?? '')
    if (!role) throw new FileError(`unknown role "${m[1]}" (one of ${MESSAGE_ROLES.join(', ')}, or model)`)
    return { role, rest: m[2] ?? '' }
  },
}

const PROMPTY_MARKERS: Markers = {
  role: (line) => {
    const m = /^\s*(system|user|assistant|developer|tool)\s*:\s*$/i.exec(line)
    if (!m) return null
    const role = roleOf(m[1] ?? '')
    return role ? { role, rest: '' } : null
  },
}

function placeholderOf(line: string): string | null {
  if (line === '{{history}}') return HISTORY
  const m = /^\{\{!\s*placeholder\s+([A-Za-z_][A-Za-z0-9_.-]*)\s*\}\}$/.exec(line)
  return m?.[1] ?? null
}

function hasMarkers(text: string, markers: Markers): boolean {
  return text.split('\n').some((line) => markers.role(line) !== null || placeholderOf(line) !== null)
}

/**
 * Role sections back into messages: each marker line starts a message, which runs to the next
 * marker; a placeholder line is a placeholder message. The newline before each marker (and at
 * the end) belongs to the layout, not to the content, so the export's layout reads back exactly.
 */
function readSections(text: string, markers: Markers): ChatMessage[] {
  const lines = (text.endsWith('\n') ? text.slice(0, -1) : text).split('\n')
  const messages: ChatMessage[] = []
  let current: { role: MessageRole; lines: string[] } | null = null
  let stray: string[] = []
  const close = () => {
    if (current) messages.push({ role: current.role, content: current.lines.join('\n') })
    else if (stray.some((l) => l.trim() !== '')) {
      // Text before the first role marker (or after a placeholder) is the user's, as in Dotprompt.
      messages.push({ role: 'user', content: stray.join('\n') })
    }
    current = null
    stray = []
  }
  for (const line of lines) {
    const role = markers.role(line)
    const placeholder = role ? null : placeholderOf(line)
    if (role) {
      close()
      current = { role: role.role, lines: role.rest === '' ? [] : [role.rest] }
    } else if (placeholder) {
      close()
      messages.push({ type: 'placeholder', name: placeholder })
    } else if (current) current.lines.push(line)
    else stray.push(line)
  }
  close()
  if (messages.length === 0) throw new FileError('a chat prompt needs at least one message')
  return messages
}

// The description may span lines (`[\s\S]`); the one space after the comma is the separator.
const SCHEMA_KEY = /^([A-Za-z_][A-Za-z0-9_.-]*)(\?)?(?:\(\s*([A-Za-z]+)\s*(?:, ?([\s\S]*))?\))?$/

/** What follows `type,` in a Picoschema value: one separating space dropped, the rest as written. */
function afterComma(text: string): string {
  return text.startsWith(' ') ? text.slice(1) : text
}

/** Variables from `input.schema`: Picoschema (`name?: type, description`) or a JSON Schema object. */
function readSchema(schema: unknown, defaults: Record<string, unknown>): VariableInput[] {
  if (schema === undefined || schema === null) return []
  if (!isObject(schema)) throw new FileError('input.schema must be an object')
  const out: VariableInput[] = []
  const withDefault = (v: VariableInput): VariableInput => {
    const d = defaults[v.name]
    if (d === undefined) return v
    return { ...v, defaultValue: typeof d === 'string' ? d : JSON.stringify(d) }
  }
  // JSON Schema: {type: object, properties, required}.
  if (schema.type === 'object' && isObject(schema.properties)) {
    const required = Array.isArray(schema.required) ? schema.required : []
    for (const [name, prop] of Object.entries(schema.properties)) {
      const description =
        isObject(prop) && typeof prop.description === 'string' ? prop.description : undefined
      out.push(
        withDefault({
          name,
          required: required.includes(name),
          ...(description === undefined ? {} : { description }),
        }),
      )
    }
    return out
  }
  for (const [key, value] of Object.entries(schema)) {
    const m = SCHEMA_KEY.exec(key)
    if (!m?.[1]) throw new FileError(`input.schema: "${key}" is not a variable name (letters, digits, _ . -)`)
    // Kept as written (not trimmed, an empty one kept): a pulled file reads back unchanged.
    let description = m[4]
    if (typeof value === 'string' && description === undefined) {
      const comma = value.indexOf(',')
      if (comma >= 0) description = afterComma(value.slice(comma + 1))
    } else if (isObject(value) && typeof value.description === 'string' && description === undefined) {
      description = value.description
    }
    out.push(
      withDefault({
        name: m[1],
        required: m[2] !== '?',
        ...(description === undefined ? {} : { description }),
      }),
    )
  }
  return out
}

function stringField(value: unknown, path: string): string | undefined {
  if (value === undefined || value === null) return undefined
  if (typeof value !== 'string') throw new FileError(`${path} must be a string`)
  return value
}

function tagsField(value: unknown, path: string): string[] | undefined {
  if (value === undefined || value === null) return undefined
  if (!Array.isArray(value) || value.some((t) => typeof t !== 'string'))
    throw new FileError(`${path} must be a list of strings`)
  return value as string[]
}

function objectField(value: unknown, path: string): Record<string, unknown> | undefined {
  if (value === undefined || value === null) return undefined
  if (!isObject(value)) throw new FileError(`${path} must be an object`)
  return value
}

function typeField(value: unknown, path: string): PromptKind | undefined {
  if (value === undefined || value === null) return undefined
  if (value !== 'text' && value !== 'chat') throw new FileError(`${path} must be "text" or "chat"`)
  return value
}

function baseName(file: string): string {
  const name = file.split('/').pop() ?? file
  return name.replace(/\.(prompt|prompty|json)$/i, '')
}

/** The file's own slug, else one made from its file name. */
function slugFrom(given: string | undefined, file: string): string {
  return given ?? slugify(baseName(file))
}

function fromDotprompt(file: string, text: string): FilePrompt {
  const { front, body: rest } = splitFrontMatter(text)
  const meta = objectField(objectField(front.metadata, 'metadata')?.prompt, 'metadata.prompt') ?? {}
  const config: PromptConfig = { ...(objectField(front.config, 'config') ?? {}) }
  // Genkit's own top-level keys for the model's settings are config keys here.
  for (const key of ['output', 'tools'] as const) if (front[key] !== undefined) config[key] = front[key]
  if (front.model !== undefined) config.model = front.model
  const input = objectField(front.input, 'input') ?? {}
  const variables = readSchema(input.schema, objectField(input.default, 'input.default') ?? {})
  const type =
    typeField(meta.type, 'metadata.prompt.type') ?? (hasMarkers(rest, DOTPROMPT_MARKERS) ? 'chat' : 'text')
  const slug = slugFrom(stringField(meta.slug, 'metadata.prompt.slug'), file)
  return {
    slug,
    name: stringField(meta.name, 'metadata.prompt.name') ?? stringField(front.name, 'name') ?? baseName(file),
    description:
      stringField(meta.description, 'metadata.prompt.description') ??
      stringField(front.description, 'description') ??
      '',
    tags: tagsField(meta.tags, 'metadata.prompt.tags') ?? [],
    type,
    ...(type === 'chat' ? { messages: readSections(rest, DOTPROMPT_MARKERS) } : { template: rest }),
    variables,
    ...(Object.keys(config).length > 0 ? { config } : {}),
  }
}

function promptyInputs(inputs: unknown): VariableInput[] {
  if (inputs === undefined || inputs === null) return []
  const entries: [string, unknown][] = Array.isArray(inputs)
    ? inputs.map((i, n) => {
        if (!isObject(i) || typeof i.name !== 'string') throw new FileError(`inputs/${n} needs a name`)
        return [i.name, i]
      })
    : isObject(inputs)
      ? Object.entries(inputs)
      : (() => {
          throw new FileError('inputs must be an object')
        })()
  return entries.map(([name, raw]) => {
    const input = isObject(raw) ? raw : { default: raw }
    const description = stringField(input.description, `inputs.${name}.description`)
    const dflt = input.default
    const defaultValue =
      dflt === undefined || dflt === null ? undefined : typeof dflt === 'string' ? dflt : JSON.stringify(dflt)
    const required = typeof input.required === 'boolean' ? input.required : defaultValue === undefined
    return {
      name,
      required,
      ...(description === undefined ? {} : { description }),
      ...(defaultValue === undefined ? {} : { defaultValue }),
    }
  })
}

function fromPrompty(file: string, text: string): FilePrompt {
  const { front, body: rest } = splitFrontMatter(text)
  const meta = objectField(front.metadata, 'metadata') ?? {}
  const model = objectField(front.model, 'model') ?? {}
  const configuration = objectField(model.configuration, 'model.configuration') ?? {}
  const config: PromptConfig = { ...(objectField(model.parameters, 'model.parameters') ?? {}) }
  // Connection settings (type, endpoints, keys) stay out: only the model's name is a config key.
  if (configuration.name !== undefined) config.model = configuration.name
  const type =
    typeField(meta.type, 'metadata.type') ??
    (model.api === 'chat' || hasMarkers(rest, PROMPTY_MARKERS) ? 'chat' : 'text')
  return {
    slug: slugFrom(stringField(meta.slug, 'metadata.slug'), file),
    name: stringField(front.name, 'name') ?? baseName(file),
    description: stringField(front.description, 'description') ?? '',
    tags: tagsField(front.tags, 'tags') ?? [],
    type,
    ...(type === 'chat' ? { messages: readSections(rest, PROMPTY_MARKERS) } : { template: rest }),
    variables: promptyInputs(front.inputs),
    ...(Object.keys(config).length > 0 ? { config } : {}),
  }
}

/** Langfuse labels that mean an environment here (docs/decisions.md, "Prompt files"). */
export const LANGFUSE_LABELS: Record<string, EnvironmentName> = {
  production: 'production',
  staging: 'preview',
}

function fromLangfuse(entry: unknown): FilePrompt {
  if (!isObject(entry)) throw new FileError('each entry must be an object {name, type, prompt, ...}')
  const name = stringField(entry.name, 'name')
  if (name === undefined || name.trim() === '') throw new FileError('name is required')
  const type = typeField(entry.type, 'type') ?? 'text'
  const labels = tagsField(entry.labels, 'labels') ?? []
  const config = entry.config === null ? undefined : objectField(entry.config, 'config')
  let content: { template: string } | { messages: ChatMessage[] }
  if (type === 'text') {
    const prompt = stringField(entry.prompt, 'prompt')
    if (prompt === undefined) throw new FileError('prompt (a string) is required for a text prompt')
    content = { template: prompt }
  } else {
    if (!Array.isArray(entry.prompt))
      throw new FileError('prompt (a list of messages) is required for a chat prompt')
    content = {
      messages: entry.prompt.map((m, i): ChatMessage => {
        if (!isObject(m)) throw new FileError(`prompt/${i} must be a message`)
        if (m.type === 'placeholder') return { type: 'placeholder', name: String(m.name) }
        const role = roleOf(String(m.role))
        if (!role) throw new FileError(`prompt/${i}: unknown role "${String(m.role)}"`)
        return { role, content: typeof m.content === 'string' ? m.content : String(m.content ?? '') }
      }),
    }
  }
  const pin = [...new Set(labels.flatMap((l) => (LANGFUSE_LABELS[l] ? [LANGFUSE_LABELS[l]] : [])))]
  return {
    slug: slugify(name),
    name: name.slice(0, 200),
    description: stringField(entry.commitMessage, 'commitMessage')?.slice(0, 2000) ?? '',
    tags: tagsField(entry.tags, 'tags') ?? [],
    type,
    ...content,
    variables: [],
    ...(config && Object.keys(config).length > 0 ? { config } : {}),
    ...(pin.length > 0 ? { pin } : {}),
  }
}

function fromJson(file: string, value: unknown): FilePrompt {
  if (!isObject(value)) throw new FileError('the JSON file must be a prompt object or a Langfuse array')
  if (value.prompt !== undefined && value.template === undefined && value.messages === undefined)
    return fromLangfuse(value)
  const allowed = new Set([
    'slug',
    'name',
    'description',
    'tags',
    'type',
    'template',
    'messages',
    'variables',
    'config',
    'version',
    'versionId',
  ])
  const unknown = Object.keys(value).filter((k) => !allowed.has(k))
  if (unknown.length > 0)
    throw new FileError(`unknown field${unknown.length > 1 ? 's' : ''}: ${unknown.join(', ')}`)
  const type = typeField(value.type, 'type') ?? (value.messages !== undefined ? 'chat' : 'text')
  const variables = value.variables ?? []
  if (!Array.isArray(variables)) throw new FileError('variables must be a list')
  return {
    slug: slugFrom(stringField(value.slug, 'slug'), file),
    name: stringField(value.name, 'name') ?? baseName(file),
    description: stringField(value.description, 'description') ?? '',
    tags: tagsField(value.tags, 'tags') ?? [],
    type,
    ...(value.template !== undefined ? { template: value.template as string } : {}),
    ...(value.messages !== undefined ? { messages: value.messages as ChatMessage[] } : {}),
    variables: variables as VariableInput[],
    ...(value.config !== undefined && value.config !== null ? { config: value.config as PromptConfig } : {}),
  }
}

const REFS = [
  PromptType,
  MessageRoleSchema,
  TemplateMessage,
  PlaceholderMessage,
  ChatMessageSchema,
  VariableInputSchema,
  PromptConfigSchema,
]

/** The same schema the create route applies, so a file holds nothing a create would refuse. */
function validate(prompt: FilePrompt): FilePrompt {
  const { pin: _pin, ...request } = prompt
  if (!Value.Check(CreatePromptRequest, REFS, request)) {
    const first = Value.Errors(CreatePromptRequest, REFS, request).First()
    const where = first?.path ? first.path.slice(1).replace(/\//g, '.') : 'the prompt'
    const pattern = (first?.schema as { pattern?: unknown } | undefined)?.pattern
    const problem = typeof pattern === 'string' ? patternProblem(pattern) : undefined
    throw new FileError(`${where}: ${problem ?? first?.message ?? 'is not valid'}`)
  }
  return prompt
}

/** Which format a file is, by its name (`.tar.gz` archives are opened by the caller). */
export function formatOf(file: string): FileFormat | null {
  const lower = file.toLowerCase()
  if (lower.endsWith('.prompt')) return 'dotprompt'
  if (lower.endsWith('.prompty')) return 'prompty'
  if (lower.endsWith('.json')) return 'json'
  return null
}

function failed(file: string, err: unknown, slug: string | null = null): ParsedFile {
  if (err instanceof FileError) return { ok: false, file, slug, message: err.message }
  // A parser's stack overflow on a pathologically nested file is the file's fault.
  if (err instanceof RangeError) return { ok: false, file, slug, message: 'the file is nested too deeply' }
  throw err
}

/**
 * The prompts of one file, or what is wrong with it: a Langfuse JSON array gives one entry per
 * element (named `file[index]`), every other file one. Never throws for bad content.
 */
export function parsePromptFile(file: string, bytes: Uint8Array): ParsedFile[] {
  const format = formatOf(file)
  if (!format)
    return [failed(file, new FileError('unknown file type (use .prompt, .prompty, .json or .tar.gz)'))]
  if (bytes.length > PROMPT_FILE_MAX_BYTES)
    return [failed(file, new FileError(`the file is larger than ${PROMPT_FILE_MAX_BYTES} bytes`))]
  let text: string
  try {
    text = decode(bytes)
  } catch (err) {
    return [failed(file, err)]
  }
  if (format === 'json') {
    let value: unknown
    try {
      checkNesting(text, true)
      value = exactNumbers(parseJson(text), 'json')
    } catch (err) {
      return [failed(file, err instanceof FileError ? err : new FileError('the file is not valid JSON'))]
    }
    if (Array.isArray(value)) {
      return value.map((entry, i) => {
        const name = `${file}[${i}]`
        try {
          return { ok: true, file: name, prompt: validate(fromLangfuse(entry)) }
        } catch (err) {
          const slug = isObject(entry) && typeof entry.name === 'string' ? slugify(entry.name) : null
          return failed(name, err, slug)
        }
      })
    }
    try {
      return [{ ok: true, file, prompt: validate(fromJson(file, value)) }]
    } catch (err) {
      return [failed(file, err)]
    }
  }
  try {
    const prompt = format === 'prompty' ? fromPrompty(file, text) : fromDotprompt(file, text)
    return [{ ok: true, file, prompt: validate(prompt) }]
  } catch (err) {
    return [failed(file, err)]
  }
}
