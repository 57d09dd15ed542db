import type { PromptConfig, RunParams, RunResult } from '@pm/contracts'
import { createParser } from 'eventsource-parser'

/** Pure helpers of the Playground (tested without a browser). */

/** The Playground's parameter fields as typed (text), before they are checked. */
export interface ParamFields {
  temperature: string
  max_tokens: string
  top_p: string
  /** One stop sequence per line (at most 4). */
  stop: string
  /** A JSON list of tools, OpenAI's function shape. */
  tools: string
  responseFormat: 'default' | 'text' | 'json_object' | 'json_schema'
  /** The json_schema object, when responseFormat is json_schema. */
  jsonSchema: string
}

export const EMPTY_FIELDS: ParamFields = {
  temperature: '',
  max_tokens: '',
  top_p: '',
  stop: '',
  tools: '',
  responseFormat: 'default',
  jsonSchema: '',
}

/** The parameter keys the Playground edits (and writes back into a draft's config). */
export const PARAM_KEYS = ['temperature', 'max_tokens', 'top_p', 'stop', 'tools', 'response_format'] as const

const json = (value: unknown): string => (value === undefined ? '' : JSON.stringify(value, null, 2))

/** The fields as a prompt's config fills them (what it does not set stays empty). */
export function fieldsFromConfig(config: PromptConfig | undefined | null): ParamFields {
  const c = config ?? {}
  const num = (v: unknown) => (typeof v === 'number' ? String(v) : '')
  const stop = typeof c.stop === 'string' ? c.stop : Array.isArray(c.stop) ? c.stop.join('\n') : ''
  const rf = c.response_format as { type?: unknown; json_schema?: unknown } | undefined
  const type = rf?.type
  return {
    temperature: num(c.temperature),
    max_tokens: num(c.max_tokens),
    top_p: num(c.top_p),
    stop,
    tools: Array.isArray(c.tools) ? json(c.tools) : '',
    responseFormat: type === 'text' || type === 'json_object' || type === 'json_schema' ? type : 'default',
    jsonSchema: type === 'json_schema' ? json(rf?.json_schema) : '',
  }
}

export type Parsed<T> = { ok: true; value: T } | { ok: false; error: string }

function number(
  name: string,
  text: string,
  min: number,
  max: number,
  integer = false,
): Parsed<number | undefined> {
  const t = text.trim()
  if (t === '') return { ok: true, value: undefined }
  const n = Number(t)
  if (!Number.isFinite(n) || (integer && !Number.isInteger(n)) || n < min || n > max)
    return {
      ok: false,
      error: `${name} must be ${integer ? 'a whole number' : 'a number'} from ${min} to ${max}`,
    }
  return { ok: true, value: n }
}

function jsonOf(name: string, text: string): Parsed<unknown> {
  try {
    return { ok: true, value: JSON.parse(text) }
  } catch (err) {
    return { ok: false, error: `${name} is not JSON: ${(err as Error).message}` }
  }
}

/**
 * The fields as the run's `params`: empty ones left out (the prompt's config applies). The
 * service checks them again; this names the field before anything is sent.
 */
export function parseParams(f: ParamFields): Parsed<RunParams> {
  const params: Record<string, unknown> = {}
  const checks = [
    ['temperature', number('Temperature', f.temperature, 0, 2)],
    ['max_tokens', number('Max tokens', f.max_tokens, 1, 1_000_000, true)],
    ['top_p', number('Top p', f.top_p, 0, 1)],
  ] as const
  for (const [key, parsed] of checks) {
    if (!parsed.ok) return parsed
    if (parsed.value !== undefined) params[key] = parsed.value
  }
  const stops = f.stop
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean)
  if (stops.length > 4) return { ok: false, error: 'Stop takes at most 4 sequences' }
  if (stops.some((s) => s.length > 200))
    return { ok: false, error: 'A stop sequence has at most 200 characters' }
  if (stops.length === 1) params.stop = stops[0]
  else if (stops.length > 1) params.stop = stops
  if (f.tools.trim() !== '') {
    const tools = jsonOf('Tools', f.tools)
    if (!tools.ok) return tools
    if (!Array.isArray(tools.value))
      return {
        ok: false,
        error: 'Tools must be a JSON list such as [{"type": "function", "function": {"name": "…"}}]',
      }
    params.tools = tools.value
  }
  if (f.responseFormat === 'json_schema') {
    const schema = jsonOf('JSON schema', f.jsonSchema)
    if (!schema.ok) return schema
    if (schema.value === null || typeof schema.value !== 'object' || Array.isArray(schema.value))
      return {
        ok: false,
        error: 'JSON schema must be a JSON object such as {"name": "answer", "schema": {…}}',
      }
    params.response_format = { type: 'json_schema', json_schema: schema.value }
  } else if (f.responseFormat !== 'default') params.response_format = { type: f.responseFormat }
  return { ok: true, value: params as RunParams }
}

/**
 * The draft's config with the Playground's model and parameters written into it: every other
 * key kept as it was; a parameter left empty removes that key (the Playground shows what the
 * config will hold).
 */
export function mergeIntoConfig(
  config: PromptConfig | undefined | null,
  model: string,
  params: RunParams,
): PromptConfig {
  const next: Record<string, unknown> = { ...(config ?? {}) }
  for (const key of PARAM_KEYS) delete next[key]
  if (model.trim() !== '') next.model = model.trim()
  for (const key of PARAM_KEYS) {
    const value = (params as Record<string, unknown>)[key]
    if (value !== undefined) next[key] = value
  }
  return next
}

/** A streamed run's events, as `streamRun` reports them. */
export interface StreamHandlers {
  onDelta: (content: string) => void
}

/** An `error` event or a refused request: the service's code and message (and details). */
export class RunError extends Error {
  readonly code: string
  readonly details?: unknown
  readonly status?: number
  constructor(code: string, message: string, details?: unknown, status?: number) {
    super(message)
    this.name = 'RunError'
    this.code = code
    this.details = details
    this.status = status
  }
}

/**
 * Reads a run's Server-Sent Events from `body` (a fetch Response's stream): each `delta` goes to
 * `onDelta` as it arrives; resolves with `done`'s result, rejects with a RunError on `error`
 * (or when the stream ends without either).
 */
export async function readRunStream(
  body: ReadableStream<Uint8Array>,
  handlers: StreamHandlers,
): Promise<RunResult> {
  let result: RunResult | undefined
  let failure: RunError | undefined
  const parser = createParser({
    onEvent(ev) {
      const data = JSON.parse(ev.data) as Record<string, unknown>
      if (ev.event === 'delta') handlers.onDelta(String(data.content ?? ''))
      else if (ev.event === 'done') result = data as unknown as RunResult
      else if (ev.event === 'error')
        failure = new RunError(
          String(data.code ?? 'INTERNAL_ERROR'),
          String(data.message ?? 'the run failed'),
          data.details,
        )
    },
  })
  const reader = body.getReader()
  const decoder = new TextDecoder()
  for (;;) {
    const { done, value } = await reader.read()
    if (done) break
    parser.feed(decoder.decode(value, { stream: true }))
  }
  parser.feed(decoder.decode())
  if (failure) throw failure
  if (!result) throw new RunError('STREAM_ENDED', 'The answer stopped before it was complete')
  return result
}

/** A provider error's details in words (its HTTP status and message), for the error banner. */
export function providerDetail(details: unknown): string | undefined {
  if (!details || typeof details !== 'object') return undefined
  const d = details as { providerStatus?: unknown; message?: unknown; retryAfter?: unknown }
  const parts: string[] = []
  if (d.providerStatus !== undefined) parts.push(`provider status ${String(d.providerStatus)}`)
  if (typeof d.message === 'string') parts.push(d.message)
  if (d.retryAfter !== undefined) parts.push(`retry after ${String(d.retryAfter)} s`)
  return parts.length > 0 ? parts.join(': ') : undefined
}
