/**
 * The bare chain `bench:run` compares the runs service against: what any service built as
 * DESIGN section 13 asks must do for a call, and nothing more. In one process, as the embedded
 * default is: a plain Fastify proxy (@fastify/http-proxy, default options) in front of a plain
 * Fastify handler that sends the request's messages to the provider through the OpenAI SDK
 * (undici's fetch, one shared pool, no retries: as apps/runs does) and answers its text, or
 * streams it as `event: delta` / `event: done` SSE. No auth, no render, no store, no limits, no
 * logging, no validation: the four HTTP exchanges of a run (client → gateway → runs →
 * provider) and the SDK.
 *
 * The handler also listens on a port of its own (HANDLER_PORT), for the floor of a design with no
 * proxy hop at all: one HTTP exchange in front of the SDK's call.
 *
 * Run as a child process of the bench: PORT=... HANDLER_PORT=... PROVIDER_URL=http://127.0.0.1:.../v1
 * Its route: POST /run, body `{model, messages, stream, temperature?, max_tokens?}`.
 */
import type { AddressInfo } from 'node:net'
import proxy from '@fastify/http-proxy'
import Fastify from 'fastify'
import OpenAI from 'openai'
import { Agent, fetch as undiciFetch } from 'undici'

const port = Number(process.env.PORT ?? 0)
const handlerPort = Number(process.env.HANDLER_PORT ?? 0)
const providerUrl = process.env.PROVIDER_URL ?? ''
if (!providerUrl) throw new Error('PROVIDER_URL is required')

type Body = OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming & { stream?: boolean }

const client = new OpenAI({
  apiKey: 'sk-bench-0000',
  baseURL: providerUrl,
  maxRetries: 0,
  timeout: 60_000,
  fetch: undiciFetch as unknown as typeof globalThis.fetch,
  fetchOptions: { dispatcher: new Agent({ keepAliveTimeout: 30_000 }) } as never,
})

async function upstream(): Promise<string> {
  const app = Fastify()
  app.get('/health', async () => ({ status: 'ok' }))
  app.post('/run', async (request, reply) => {
    const { stream, ...params } = request.body as Body
    const controller = new AbortController()
    // A client gone: the provider call stops (as apps/runs does).
    reply.raw.once('close', () => {
      if (!reply.raw.writableFinished) controller.abort()
    })
    if (!stream) {
      const answer = await client.chat.completions.create(params, { signal: controller.signal })
      return { data: { output: answer.choices[0]?.message.content ?? '', usage: answer.usage } }
    }
    const chunks = await client.chat.completions.create(
      { ...params, stream: true, stream_options: { include_usage: true } },
      { signal: controller.signal },
    )
    reply.hijack()
    reply.raw.writeHead(200, { 'content-type': 'text/event-stream', 'cache-control': 'no-cache' })
    let output = ''
    for await (const chunk of chunks) {
      const piece = chunk.choices[0]?.delta.content
      if (piece) {
        output += piece
        reply.raw.write(`event: delta\ndata: ${JSON.stringify({ content: piece })}\n\n`)
      }
    }
    reply.raw.end(`event: done\ndata: ${JSON.stringify({ output })}\n\n`)
  })
  await app.listen({ host: '127.0.0.1', port: handlerPort })
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

const front = Fastify()
front.get('/health', async () => ({ status: 'ok' }))
await front.register(proxy, { upstream: await upstream() })
await front.listen({ host: '127.0.0.1', port })
process.stdout.write(`bare run chain listening on ${port}\n`)
// Exit through process.exit so that --cpu-prof writes its profile.
process.once('SIGTERM', () => process.exit(0))
