import { createServer, type Server, type ServerResponse } from 'node:http'
import type { AddressInfo } from 'node:net'
import { createGzip } from 'node:zlib'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { Runs } from '../src/services/runs.ts'
import { ORG, preparedRun, runsHarness } from './helpers.ts'

/**
 * A provider that sends without end what the SDKs hold whole (a line, an event, a body, a tool
 * call's arguments) must not fill the memory until the deadline: RUN_MAX_OUTPUT_BYTES bounds
 * what is read, not only the answer once read. And a 200 that is no answer is not a success.
 */
const harness = runsHarness('hostile')
const MAX_OUTPUT = 4096
const runs = new Runs({ ...harness.deps(), maxOutputBytes: MAX_OUTPUT })
/** Far past what any bound lets through: a provider that got this far was not stopped. */
const SERVER_MAX = 256 * 1024 * 1024
let hostile: Server
let hostileUrl = ''
/** Bytes each model's answer got out before its connection closed. */
const written = new Map<string, number>()

/** Writes `piece()` until the client goes (or SERVER_MAX), minding backpressure. */
function pump(res: ServerResponse | NodeJS.WritableStream, model: string, piece: () => string | Buffer) {
  let n = 0
  const go = () => {
    while (n < SERVER_MAX) {
      const b = piece()
      n += b.length
      written.set(model, n)
      if (!res.write(b)) {
        res.once('drain', go)
        return
      }
    }
    res.end()
  }
  go()
}

beforeAll(async () => {
  hostile = createServer((req, res) => {
    let raw = ''
    req.setEncoding('utf8')
    req.on('data', (chunk: string) => {
      raw += chunk
    })
    req.on('end', () => {
      const { model } = JSON.parse(raw) as { model: string }
      const anthropic = (req.url ?? '').endsWith('/messages')
      res.on('error', () => {})
      const sse = { 'content-type': 'text/event-stream' }
      const a = 'a'.repeat(64 * 1024)
      if (model === 'endless-line') {
        res.writeHead(200, sse)
        res.write('data: {"choices":[{"delta":{"content":"')
        pump(res, model, () => a)
      } else if (model === 'endless-event') {
        // data lines, each short, and never the blank line that ends the event
        res.writeHead(200, sse)
        pump(res, model, () => `data: ${'a'.repeat(1000)}\n`.repeat(64))
      } else if (model === 'endless-tool-arguments') {
        // interleaved calls, each event small, their arguments without end
        res.writeHead(200, sse)
        let i = 0
        if (anthropic)
          for (const index of [0, 1])
            res.write(
              `event: content_block_start\ndata: ${JSON.stringify({ type: 'content_block_start', index, content_block: { type: 'tool_use', id: `t${index}`, name: 'f', input: {} } })}\n\n`,
            )
        pump(res, model, () => {
          const index = i++ % 2
          return anthropic
            ? `event: content_block_delta\ndata: ${JSON.stringify({ type: 'content_block_delta', index, delta: { type: 'input_json_delta', partial_json: 'a'.repeat(1000) } })}\n\n`
            : `data: ${JSON.stringify({ choices: [{ index: 0, delta: { tool_calls: [{ index, id: `t${index}`, function: { name: 'f', arguments: 'a'.repeat(1000) } }] }, finish_reason: null }] })}\n\n`
        })
      } else if (model === 'endless-tool-names') {
        // no arguments: a name sent in pieces (openai), or a new call for each event (anthropic)
        res.writeHead(200, sse)
        let index = 0
        pump(res, model, () =>
          anthropic
            ? `event: content_block_start\ndata: ${JSON.stringify({ type: 'content_block_start', index: index++, content_block: { type: 'tool_use', id: `t${index}`, name: 'f'.repeat(1000), input: {} } })}\n\n`
            : `data: ${JSON.stringify({ choices: [{ index: 0, delta: { tool_calls: [{ index: 0, function: { name: 'f'.repeat(1000) } }] }, finish_reason: null }] })}\n\n`,
        )
      } else if (model === 'endless-empty-calls') {
        // a new tool call in each event, with nothing in it: no id, no name, no arguments
        res.writeHead(200, sse)
        let index = 0
        pump(res, model, () =>
          anthropic
            ? `event: content_block_start\ndata: ${JSON.stringify({ type: 'content_block_start', index: index++, content_block: { type: 'tool_use', id: '', name: '', input: {} } })}\n\n`
            : `data: ${JSON.stringify({ choices: [{ index: 0, delta: { tool_calls: [{ index: index++ }] }, finish_reason: null }] })}\n\n`,
        )
      } else if (model === 'huge-text') {
        res.writeHead(200, { 'content-type': 'text/plain' })
        pump(res, model, () => a)
      } else if (model === 'gzip-bomb') {
        // a few hundred kB on the wire, 256 MB once unpacked
        res.writeHead(200, { 'content-type': 'text/plain', 'content-encoding': 'gzip' })
        const gzip = createGzip({ level: 9 })
        gzip.pipe(res)
        res.on('close', () => gzip.destroy())
        const zeros = Buffer.alloc(1024 * 1024)
        pump(gzip, model, () => zeros)
      } else if (model === 'html') {
        res.writeHead(200, { 'content-type': 'text/html' })
        res.end('<html><body>a login page</body></html>')
      } else {
        res.writeHead(404)
        res.end()
      }
    })
  })
  await new Promise<void>((resolve) => hostile.listen(0, '127.0.0.1', resolve))
  hostileUrl = `http://127.0.0.1:${(hostile.address() as AddressInfo).port}`
})
afterAll(async () => {
  hostile.closeAllConnections()
  await new Promise<void>((resolve) => hostile.close(() => resolve()))
  await harness.close()
})

const outcome = (pending: Promise<unknown>) =>
  pending.then(
    () => ({ code: 'answered', message: '' }),
    (err: { code?: string; message?: string }) => ({ code: err.code, message: err.message }),
  )

const TOO_LONG = { code: 'PROVIDER_ERROR', message: 'the answer was longer than RUN_MAX_OUTPUT_BYTES allows' }

describe.each(['openai', 'anthropic'] as const)('a provider sending without end (%s)', (provider) => {
  it.each([
    ['endless-line', true],
    ['endless-event', true],
    ['endless-tool-arguments', true],
    ['endless-tool-names', true],
    ['endless-empty-calls', true],
    ['huge-text', false],
    ['gzip-bomb', false],
  ] as const)('%s (streamed: %s) is cut at the bound, and the run failed', async (model, stream) => {
    const run = preparedRun({ provider, baseUrl: hostileUrl, marker: model, model, stream })
    const started = Date.now()
    const failed = await outcome(
      runs.execute(run, new AbortController().signal, stream ? () => {} : undefined),
    )
    expect(failed).toEqual(TOO_LONG)
    // Cut at its bound (8 × 4096 + 1 MiB here), not at the deadline (10 s) nor the server's end.
    expect(Date.now() - started).toBeLessThan(5_000)
    expect(written.get(model) ?? 0).toBeLessThan(SERVER_MAX)
    expect(await runs.get(ORG, run.id)).toMatchObject({
      status: 'failed',
      output: null,
      error: { code: 'PROVIDER_ERROR', details: { maxOutputBytes: MAX_OUTPUT } },
    })
  })
})

describe('a 200 that is no answer (openai)', () => {
  it('fails the run instead of logging a success with no content', async () => {
    const run = preparedRun({
      provider: 'openai',
      baseUrl: hostileUrl,
      marker: 'html',
      model: 'html',
      stream: false,
    })
    expect(await outcome(runs.execute(run, new AbortController().signal))).toEqual({
      code: 'PROVIDER_ERROR',
      message: "the provider's answer is not valid: it has no choices",
    })
    expect(await runs.get(ORG, run.id)).toMatchObject({ status: 'failed', output: null })
  })
})
