/**
 * The cost of tracing at the layer that pays it (packages/kit/src/otel.ts, tracing.ts), in one
 * process: a Fastify app with traceRequests and a handler making three traced store calls,
 * answered through app.inject, tracing off, on at ratio 1.0 and on at 0.1 (spans exported to an
 * exporter that drops them), in interleaved rounds. Prints requests per second of each and the
 * ratios to off.
 *
 *   node --conditions=source bench/src/tracing-cost.ts [--requests 4000] [--rounds 5]
 */
import { parseArgs } from 'node:util'
import Fastify from 'fastify'
// Not exported by @pm/kit (it loads the SDK only when tracing is on): the files themselves.
import { createOtelTracing } from '../../packages/kit/src/otel.ts'
import { type Tracing, traceMethods, traceRequests } from '../../packages/kit/src/tracing.ts'

const { values: args } = parseArgs({
  options: { requests: { type: 'string', default: '4000' }, rounds: { type: 'string', default: '5' } },
})
const requests = Number(args.requests)
const rounds = Number(args.rounds)

/** Accepts spans and keeps nothing (what a fast collector costs this process: serialising aside). */
const exporter = {
  export: (_spans: unknown[], done: (r: { code: number }) => void) => done({ code: 0 }),
  shutdown: async () => {},
}

async function appWith(tracing: Tracing | undefined) {
  const app = Fastify({ logger: false })
  const store = {
    async key(id: string) {
      return { id, org: 'o' }
    },
    async limit(_id: string) {
      return true
    },
    async prompt(id: string) {
      return { id, template: 'Hello {{name}}' }
    },
  }
  const s = tracing ? traceMethods(store, tracing, 'bench.store') : store
  if (tracing) traceRequests(app, tracing, { service: 'bench' })
  app.post('/invoke/:id', async (request) => {
    const { id } = request.params as { id: string }
    await s.key(id)
    await s.limit(id)
    const p = await s.prompt(id)
    return { data: { renderedContent: p.template.replace('{{name}}', 'Ada'), version: 1 } }
  })
  await app.ready()
  return app
}

const traced = (ratio: number) =>
  createOtelTracing({
    endpoint: 'http://127.0.0.1:9',
    serviceName: 'bench',
    sampler: 'parentbased_traceidratio',
    ratio,
    exporter: exporter as never,
  })

const variants = [
  { name: 'off', app: await appWith(undefined), seconds: 0, done: 0 },
  { name: '1.0', app: await appWith(traced(1)), seconds: 0, done: 0 },
  { name: '0.1', app: await appWith(traced(0.1)), seconds: 0, done: 0 },
]
const body = JSON.stringify({ variables: { name: 'Ada' } })
const run = async (v: (typeof variants)[number], n: number) => {
  const started = performance.now()
  for (let i = 0; i < n; i++) {
    const res = await v.app.inject({
      method: 'POST',
      url: '/invoke/p1',
      headers: { 'content-type': 'application/json' },
      payload: body,
    })
    if (res.statusCode !== 200) throw new Error(`${v.name}: ${res.statusCode}`)
  }
  return (performance.now() - started) / 1000
}
for (const v of variants) await run(v, 500)
for (let r = 0; r < rounds; r++) {
  for (let j = 0; j < variants.length; j++) {
    const v = variants[(r + j) % variants.length]
    if (!v) continue
    v.seconds += await run(v, requests)
    v.done += requests
  }
}
const rate = (v: (typeof variants)[number]) => v.done / v.seconds
const off = variants[0]
if (!off) throw new Error('no baseline')
for (const v of variants)
  process.stdout.write(
    `${v.name}: ${rate(v).toFixed(0)} req/s, ratio to off ${(rate(v) / rate(off)).toFixed(3)}\n`,
  )
process.exit(0)
