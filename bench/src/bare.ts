/**
 * The bare chain the invoke benchmark compares against: a plain Fastify proxy
 * (@fastify/http-proxy, default options) in front of a plain Fastify handler that returns a
 * fixed JSON body. No auth, no limits, no logging, no validation: the cost of two Fastify hops.
 *
 * Run as a child process of the bench:
 *   BARE_ROLE=upstream PORT=... BARE_BODY='{"data":...}'
 *   BARE_ROLE=proxy    PORT=... UPSTREAM_URL=http://127.0.0.1:...[,http://127.0.0.1:...]
 *   BARE_ROLE=both     PORT=... BARE_BODY=...   (one process, as the embedded default is)
 */
import type { AddressInfo } from 'node:net'
import proxy from '@fastify/http-proxy'
import Fastify from 'fastify'

const role = process.env.BARE_ROLE ?? 'both'
const port = Number(process.env.PORT ?? 0)
const body = process.env.BARE_BODY ?? '{"data":{"ok":true}}'

async function upstream(listenPort: number): Promise<string> {
  const app = Fastify()
  app.get('/health', async () => ({ status: 'ok' }))
  app.post('/api/v1/prompts/:id/invoke', async (_request, reply) => {
    reply.header('content-type', 'application/json; charset=utf-8').send(body)
  })
  await app.listen({ host: '127.0.0.1', port: listenPort })
  return `http://127.0.0.1:${(app.server.address() as AddressInfo).port}`
}

async function front(listenPort: number, upstreamUrls: string[]): Promise<void> {
  const app = Fastify()
  if (upstreamUrls.length <= 1) await app.register(proxy, { upstream: upstreamUrls[0] ?? '' })
  else {
    // Several handlers (the scaling bench's R): taken in turn, as the gateway takes render's replicas.
    let turn = 0
    await app.register(proxy, {
      upstream: '',
      replyOptions: {
        getUpstream: () => {
          turn = (turn + 1) % upstreamUrls.length
          return upstreamUrls[turn] ?? ''
        },
      },
    })
  }
  await app.listen({ host: '127.0.0.1', port: listenPort })
}

if (role === 'upstream') await upstream(port)
else if (role === 'proxy') await front(port, (process.env.UPSTREAM_URL ?? '').split(','))
else await front(port, [await upstream(0)])
process.stdout.write(`bare ${role} listening on ${port}\n`)
// Exit through process.exit so that --cpu-prof writes its profile.
process.once('SIGTERM', () => process.exit(0))
