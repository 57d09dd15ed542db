import { randomBytes } from 'node:crypto'
import { createServer, type IncomingMessage, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'

/**
 * A local model provider for tests and the bench: it speaks the OpenAI chat completions
 * (`POST /v1/chat/completions`) and Anthropic messages (`POST /v1/messages`) wire protocols,
 * non-streamed and streamed (SSE), with tool calls, and each provider's error shapes.
 *
 * Answers are deterministic: the assistant echoes the last user message's text. Tokens are
 * counted as whitespace-separated words (`countTokens`), so a test can compute the usage.
 *
 * The behaviour is chosen by the model name, so that concurrent requests never interfere:
 * - anything else: echo
 * - `fake-tool`: a call of the first tool in `tools`, arguments `{"input": <echo>}`
 * - `fake-401`, `fake-429` (Retry-After: 7), `fake-500`: the provider's error
 * - `fake-slow-<ms>`: waits before answering (before the headers)
 * - `fake-slow-<min>-<max>`: waits from <min> to <max> ms, spread evenly, as a real provider's
 *   answers vary (a fixed wait keeps concurrent callers in step: they all come back at once).
 *   The wait is drawn from the last user message's text (a hash), so the same messages wait the
 *   same: a bench compares calls made directly and through the service on equal terms
 * - `fake-drip-<ms>`: streams one word every <ms> (non-streamed: waits <ms> per word)
 * - `fake-stall`: never answers (streamed: sends the first delta, then nothing)
 * - `fake-cut`: streamed, sends the first delta, then ends the response cleanly without the
 *   stream's closing events (a cut answer); non-streamed, answers as echo
 *
 * Every request is recorded (`requests`), with whether the client went away before the answer
 * was complete (`cancelled`).
 */

export type WireProtocol = 'openai' | 'anthropic'

export interface RecordedRequest {
  protocol: WireProtocol
  path: string
  headers: IncomingMessage['headers']
  body: Record<string, unknown>
  receivedAt: number
  /** The answer was sent in full. */
  finished: boolean
  /** The client closed the connection before the answer was complete. */
  cancelled: boolean
}

export interface FakeProvider {
  /** Base URL, e.g. http://127.0.0.1:40123 (OpenAI clients use `${url}/v1`). */
  url: string
  requests: RecordedRequest[]
  /** Requests whose body's last user message contains `marker`. */
  find(marker: string): RecordedRequest[]
  close(): Promise<void>
}

export const RETRY_AFTER_SECONDS = 7

/** The fake's token count: whitespace-separated words. */
export function countTokens(text: string): number {
  return text.split(/\s+/).filter(Boolean).length
}

/** The pieces a streamed answer is sent in: words with their trailing spaces. */
export function chunksOf(text: string): string[] {
  return text.match(/\s*\S+\s*/g) ?? (text ? [text] : [])
}

interface Message {
  role?: unknown
  content?: unknown
}

function textOf(content: unknown): string {
  if (typeof content === 'string') return content
  if (Array.isArray(content)) {
    return content
      .map((part) => (part && typeof part === 'object' && 'text' in part ? String(part.text) : ''))
      .join('')
  }
  return ''
}

function lastUserText(body: Record<string, unknown>): string {
  const messages = Array.isArray(body.messages) ? (body.messages as Message[]) : []
  for (let i = messages.length - 1; i >= 0; i--) {
    const m = messages[i]
    if (m?.role === 'user') return textOf(m.content)
  }
  return ''
}

/** Every message's text (and Anthropic's `system`), for the input token count. */
function inputText(body: Record<string, unknown>): string {
  const messages = Array.isArray(body.messages) ? (body.messages as Message[]) : []
  const parts = messages.map((m) => textOf(m.content))
  if (body.system !== undefined) parts.unshift(textOf(body.system))
  return parts.join(' ')
}

type Scenario =
  | { kind: 'echo' }
  | { kind: 'tool' }
  | { kind: 'error'; status: 401 | 429 | 500 }
  | { kind: 'slow'; ms: number; maxMs?: number }
  | { kind: 'drip'; ms: number }
  | { kind: 'stall' }
  | { kind: 'cut' }

function scenarioOf(model: unknown): Scenario {
  const name = typeof model === 'string' ? model : ''
  if (name === 'fake-tool') return { kind: 'tool' }
  if (name === 'fake-401') return { kind: 'error', status: 401 }
  if (name === 'fake-429') return { kind: 'error', status: 429 }
  if (name === 'fake-500') return { kind: 'error', status: 500 }
  if (name === 'fake-stall') return { kind: 'stall' }
  if (name === 'fake-cut') return { kind: 'cut' }
  const timed = /^fake-(slow|drip)-(\d{1,6})$/.exec(name)
  if (timed) return { kind: timed[1] as 'slow' | 'drip', ms: Number(timed[2]) }
  const ranged = /^fake-slow-(\d{1,6})-(\d{1,6})$/.exec(name)
  if (ranged && Number(ranged[1]) <= Number(ranged[2]))
    return { kind: 'slow', ms: Number(ranged[1]), maxMs: Number(ranged[2]) }
  return { kind: 'echo' }
}

/** How long a `fake-slow-<ms>` or `fake-slow-<min>-<max>` model waits for a text: from min to max, repeatably. */
function waitOf(scenario: { ms: number; maxMs?: number }, text: string): number {
  const { ms, maxMs = ms } = scenario
  return ms + (textHash(text) % (maxMs - ms + 1))
}

/** The wait a `fake-slow-*` model gives `text` (what the server waits before answering), else undefined. */
export function slowWaitMs(model: string, text: string): number | undefined {
  const scenario = scenarioOf(model)
  return scenario.kind === 'slow' ? waitOf(scenario, text) : undefined
}

/**
 * FNV-1a of a string's UTF-16 code units, then MurmurHash3's finalizer (FNV alone barely moves its
 * low bits for texts that differ in their last character): a spread, repeatable number.
 */
function textHash(text: string): number {
  let h = 0x811c9dc5
  for (let i = 0; i < text.length; i++) {
    h ^= text.charCodeAt(i)
    h = Math.imul(h, 0x01000193)
  }
  h ^= h >>> 16
  h = Math.imul(h, 0x85ebca6b)
  h ^= h >>> 13
  h = Math.imul(h, 0xc2b2ae35)
  h ^= h >>> 16
  return h >>> 0
}

function id(prefix: string): string {
  return `${prefix}${randomBytes(12).toString('hex')}`
}

function keyOf(req: IncomingMessage, protocol: WireProtocol): string {
  // Anthropic's SDK sends `x-api-key`, or (1.x) `Authorization: Bearer`.
  if (protocol === 'anthropic' && req.headers['x-api-key']) return String(req.headers['x-api-key'])
  return String(req.headers.authorization ?? '').replace(/^Bearer\s+/i, '')
}

function firstToolName(body: Record<string, unknown>): string | undefined {
  const tools = Array.isArray(body.tools) ? (body.tools as Record<string, unknown>[]) : []
  const first = tools[0]
  if (!first) return undefined
  if (typeof first.name === 'string') return first.name
  const fn = first.function as { name?: unknown } | undefined
  return typeof fn?.name === 'string' ? fn.name : undefined
}

/**
 * Each provider's error body. The 401 message repeats the key the client sent, in full: a
 * worst case that the caller's sanitizing must survive (OpenAI's own shows part of it).
 */
function sendError(res: ServerResponse, protocol: WireProtocol, status: 401 | 429 | 500, key: string): void {
  const headers: Record<string, string> = { 'content-type': 'application/json' }
  if (status === 429) headers['retry-after'] = String(RETRY_AFTER_SECONDS)
  let body: unknown
  if (protocol === 'openai') {
    const error =
      status === 401
        ? {
            message: `Incorrect API key provided: ${key}. You can find your API key at https://platform.openai.com/account/api-keys.`,
            type: 'invalid_request_error',
            param: null,
            code: 'invalid_api_key',
          }
        : status === 429
          ? {
              message: 'Rate limit reached for requests. Please try again in 7s.',
              type: 'requests',
              param: null,
              code: 'rate_limit_exceeded',
            }
          : {
              message: 'The server had an error while processing your request.',
              type: 'server_error',
              param: null,
              code: null,
            }
    headers['x-request-id'] = id('req_')
    body = { error }
  } else {
    const error =
      status === 401
        ? { type: 'authentication_error', message: `invalid x-api-key: ${key}` }
        : status === 429
          ? { type: 'rate_limit_error', message: 'Number of requests has exceeded your rate limit.' }
          : { type: 'api_error', message: 'Internal server error' }
    headers['request-id'] = id('req_')
    body = { type: 'error', error, request_id: headers['request-id'] }
  }
  res.writeHead(status, headers)
  res.end(JSON.stringify(body))
}

function sse(res: ServerResponse): void {
  res.writeHead(200, {
    'content-type': 'text/event-stream; charset=utf-8',
    'cache-control': 'no-cache',
    connection: 'keep-alive',
  })
  res.flushHeaders()
}

interface Answer {
  text: string
  tool?: { id: string; name: string; arguments: string }
  inputTokens: number
  outputTokens: number
}

function answerFor(body: Record<string, unknown>, scenario: Scenario): Answer {
  const echo = lastUserText(body)
  const inputTokens = countTokens(inputText(body))
  const toolName = scenario.kind === 'tool' ? firstToolName(body) : undefined
  if (toolName) {
    const args = JSON.stringify({ input: echo })
    return {
      text: '',
      tool: { id: id('call_'), name: toolName, arguments: args },
      inputTokens,
      outputTokens: countTokens(args),
    }
  }
  return { text: echo, inputTokens, outputTokens: countTokens(echo) }
}

/** Waits `ms` unless the client leaves first; true when it left. */
function waitOrGone(res: ServerResponse, ms: number): Promise<boolean> {
  if (res.destroyed) return Promise.resolve(true)
  return new Promise((resolve) => {
    const timer = setTimeout(() => {
      res.off('close', onClose)
      resolve(res.destroyed)
    }, ms)
    const onClose = () => {
      clearTimeout(timer)
      resolve(true)
    }
    res.once('close', onClose)
  })
}

async function openaiAnswer(
  res: ServerResponse,
  body: Record<string, unknown>,
  scenario: Scenario,
): Promise<void> {
  const a = answerFor(body, scenario)
  const model = String(body.model ?? '')
  const completionId = id('chatcmpl-')
  const created = Math.floor(Date.now() / 1000)
  const finish = a.tool ? 'tool_calls' : 'stop'
  const usage = {
    prompt_tokens: a.inputTokens,
    completion_tokens: a.outputTokens,
    total_tokens: a.inputTokens + a.outputTokens,
  }
  const drip = scenario.kind === 'drip' ? scenario.ms : 0
  if (body.stream !== true) {
    if (drip && (await waitOrGone(res, drip * chunksOf(a.text).length))) return
    const message = a.tool
      ? {
          role: 'assistant',
          content: null,
          refusal: null,
          tool_calls: [
            { id: a.tool.id, type: 'function', function: { name: a.tool.name, arguments: a.tool.arguments } },
          ],
        }
      : { role: 'assistant', content: a.text, refusal: null }
    res.writeHead(200, { 'content-type': 'application/json', 'x-request-id': id('req_') })
    res.end(
      JSON.stringify({
        id: completionId,
        object: 'chat.completion',
        created,
        model,
        choices: [{ index: 0, message, logprobs: null, finish_reason: finish }],
        usage,
        system_fingerprint: 'fp_fake',
      }),
    )
    return
  }
  sse(res)
  const chunk = (
    delta: Record<string, unknown>,
    finishReason: string | null,
    extra: Record<string, unknown> = {},
  ) =>
    `data: ${JSON.stringify({
      id: completionId,
      object: 'chat.completion.chunk',
      created,
      model,
      system_fingerprint: 'fp_fake',
      choices: [{ index: 0, delta, logprobs: null, finish_reason: finishReason }],
      ...extra,
    })}\n\n`
  res.write(chunk({ role: 'assistant', content: '', refusal: null }, null))
  if (a.tool) {
    res.write(
      chunk(
        {
          tool_calls: [
            { index: 0, id: a.tool.id, type: 'function', function: { name: a.tool.name, arguments: '' } },
          ],
        },
        null,
      ),
    )
    for (const piece of chunksOf(a.tool.arguments))
      res.write(chunk({ tool_calls: [{ index: 0, function: { arguments: piece } }] }, null))
  } else {
    let first = true
    for (const piece of chunksOf(a.text)) {
      if (!first && drip && (await waitOrGone(res, drip))) return
      if (!first && scenario.kind === 'stall') return
      if (!first && scenario.kind === 'cut') {
        res.end()
        return
      }
      first = false
      res.write(chunk({ content: piece }, null))
    }
  }
  res.write(chunk({}, finish))
  const options = body.stream_options as { include_usage?: unknown } | undefined
  if (options?.include_usage === true) {
    res.write(
      `data: ${JSON.stringify({ id: completionId, object: 'chat.completion.chunk', created, model, system_fingerprint: 'fp_fake', choices: [], usage })}\n\n`,
    )
  }
  res.end('data: [DONE]\n\n')
}

async function anthropicAnswer(
  res: ServerResponse,
  body: Record<string, unknown>,
  scenario: Scenario,
): Promise<void> {
  const a = answerFor(body, scenario)
  const model = String(body.model ?? '')
  const messageId = id('msg_')
  const stop = a.tool ? 'tool_use' : 'end_turn'
  const drip = scenario.kind === 'drip' ? scenario.ms : 0
  if (body.stream !== true) {
    if (drip && (await waitOrGone(res, drip * chunksOf(a.text).length))) return
    const content = a.tool
      ? [
          {
            type: 'tool_use',
            id: a.tool.id.replace('call_', 'toolu_'),
            name: a.tool.name,
            input: JSON.parse(a.tool.arguments) as unknown,
          },
        ]
      : [{ type: 'text', text: a.text }]
    res.writeHead(200, { 'content-type': 'application/json', 'request-id': id('req_') })
    res.end(
      JSON.stringify({
        id: messageId,
        type: 'message',
        role: 'assistant',
        model,
        content,
        stop_reason: stop,
        stop_sequence: null,
        usage: { input_tokens: a.inputTokens, output_tokens: a.outputTokens },
      }),
    )
    return
  }
  sse(res)
  const event = (type: string, data: Record<string, unknown>) =>
    `event: ${type}\ndata: ${JSON.stringify({ type, ...data })}\n\n`
  res.write(
    event('message_start', {
      message: {
        id: messageId,
        type: 'message',
        role: 'assistant',
        model,
        content: [],
        stop_reason: null,
        stop_sequence: null,
        usage: { input_tokens: a.inputTokens, output_tokens: 1 },
      },
    }),
  )
  if (a.tool) {
    res.write(
      event('content_block_start', {
        index: 0,
        content_block: {
          type: 'tool_use',
          id: a.tool.id.replace('call_', 'toolu_'),
          name: a.tool.name,
          input: {},
        },
      }),
    )
    for (const piece of chunksOf(a.tool.arguments)) {
      res.write(
        event('content_block_delta', { index: 0, delta: { type: 'input_json_delta', partial_json: piece } }),
      )
    }
  } else {
    res.write(event('content_block_start', { index: 0, content_block: { type: 'text', text: '' } }))
    res.write(event('ping', {}))
    let first = true
    for (const piece of chunksOf(a.text)) {
      if (!first && drip && (await waitOrGone(res, drip))) return
      if (!first && scenario.kind === 'stall') return
      if (!first && scenario.kind === 'cut') {
        res.end()
        return
      }
      first = false
      res.write(event('content_block_delta', { index: 0, delta: { type: 'text_delta', text: piece } }))
    }
  }
  res.write(event('content_block_stop', { index: 0 }))
  res.write(
    event('message_delta', {
      delta: { stop_reason: stop, stop_sequence: null },
      usage: { output_tokens: a.outputTokens },
    }),
  )
  res.end(event('message_stop', {}))
}

function readBody(req: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = []
    req.on('data', (c: Buffer) => chunks.push(c))
    req.once('end', () => resolve(Buffer.concat(chunks).toString('utf8')))
    req.once('error', reject)
  })
}

export async function startFakeProvider(
  options: { host?: string; port?: number } = {},
): Promise<FakeProvider> {
  const requests: RecordedRequest[] = []
  const server: Server = createServer((req, res) => {
    handle(req, res).catch(() => {
      if (!res.headersSent) res.writeHead(500)
      res.end()
    })
  })

  async function handle(req: IncomingMessage, res: ServerResponse): Promise<void> {
    const path = (req.url ?? '/').split('?')[0] ?? '/'
    const protocol: WireProtocol | undefined =
      req.method === 'POST' && path.endsWith('/chat/completions')
        ? 'openai'
        : req.method === 'POST' && path.endsWith('/messages')
          ? 'anthropic'
          : undefined
    if (!protocol) {
      res.writeHead(404, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: 'not found', type: 'invalid_request_error' } }))
      return
    }
    let body: Record<string, unknown>
    try {
      body = JSON.parse(await readBody(req)) as Record<string, unknown>
    } catch {
      res.writeHead(400, { 'content-type': 'application/json' })
      res.end(JSON.stringify({ error: { message: 'invalid JSON body', type: 'invalid_request_error' } }))
      return
    }
    const record: RecordedRequest = {
      protocol,
      path,
      headers: req.headers,
      body,
      receivedAt: Date.now(),
      finished: false,
      cancelled: false,
    }
    requests.push(record)
    res.once('finish', () => {
      record.finished = true
    })
    res.once('close', () => {
      if (!res.writableFinished) record.cancelled = true
    })

    const scenario = scenarioOf(body.model)
    if (scenario.kind === 'error') {
      sendError(res, protocol, scenario.status, keyOf(req, protocol))
      return
    }
    if (scenario.kind === 'slow') {
      if (await waitOrGone(res, waitOf(scenario, lastUserText(body)))) return
    }
    if (scenario.kind === 'stall' && body.stream !== true) return // never answers; the client gives up
    if (protocol === 'openai') await openaiAnswer(res, body, scenario)
    else await anthropicAnswer(res, body, scenario)
  }

  await new Promise<void>((resolve) => server.listen(options.port ?? 0, options.host ?? '127.0.0.1', resolve))
  const { port } = server.address() as AddressInfo
  return {
    url: `http://127.0.0.1:${port}`,
    requests,
    find: (marker) =>
      requests.filter(
        (r) => lastUserText(r.body).includes(marker) || JSON.stringify(r.body).includes(marker),
      ),
    close: async () => {
      server.closeAllConnections()
      await new Promise<void>((resolve) => server.close(() => resolve()))
    },
  }
}
