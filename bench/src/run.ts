/**
 * The runs service's added latency over calling the same local provider directly, in one run
 * (DESIGN section 13): the embedded default (one process, the gateway in front) and the local
 * provider (a process of its own), the same prompt, the same rendered message.
 *
 *   node --conditions=source bench/src/run.ts [--calls 1000] [--concurrency 50] [--rounds 4]
 *        [--sequential 200] [--streams 200] [--provider-ms 0] [--provider-jitter 0] [--cpu-prof]
 *
 * Figures, each the p50 of the service's minus the p50 of the direct calls, rounds alternating:
 * non-streamed calls and the first token of streamed ones at --concurrency calls at once, and
 * non-streamed calls one at a time (the figure gateway benchmarks publish); then the memory of
 * the service per open stream (--streams streams held open on a stalled answer). Also the CPU
 * time per call of the service and of the provider (through the service), from /proc. The same
 * calls, in the same rounds, through the bare chain (bench/src/bareRun.ts: a plain Fastify proxy
 * in front of a plain handler calling the provider through the OpenAI SDK, in one process): what
 * any service built as DESIGN section 13 asks adds on this machine, and the service's figures
 * above it; and through that chain's handler alone (no proxy: the floor of any design that calls
 * the SDK behind one HTTP exchange). --cpu-prof: V8 CPU profiles of the processes in
 * bench/profiles/ (written at exit). Last line:
 *   run overhead: p50 <a> ms, first token p50 <b> ms (<N> calls, <C> concurrent)
 */
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { freePort } from '@pm/testkit'
import { Pool } from 'undici'
import { type Child, cpuSeconds, startChild } from './processes.ts'

const { values: args } = parseArgs({
  options: {
    calls: { type: 'string', default: '1000' },
    concurrency: { type: 'string', default: '50' },
    rounds: { type: 'string', default: '4' },
    sequential: { type: 'string', default: '200' },
    streams: { type: 'string', default: '200' },
    'provider-ms': { type: 'string', default: '0' },
    'provider-jitter': { type: 'string', default: '0' },
    'cpu-prof': { type: 'boolean', default: false },
  },
})
const CALLS = Number(args.calls)
const CONCURRENCY = Number(args.concurrency)
const ROUNDS = Number(args.rounds)
const SEQUENTIAL = Number(args.sequential)
const STREAMS = Number(args.streams)
/**
 * How long the local provider takes before it answers (its `fake-slow-<ms>` model), the same for
 * the direct and the through-the-service calls. 0: at once, so that --concurrency calls at once
 * is as many calls a second as the service can take (the figure is then its queue at saturation).
 */
const PROVIDER_MS = Number(args['provider-ms'])
if (!Number.isInteger(PROVIDER_MS) || PROVIDER_MS < 0 || PROVIDER_MS > 60_000)
  throw new Error('--provider-ms: a whole number of milliseconds, 0 to 60000')
/**
 * --provider-jitter J: each answer waits a uniformly random time from --provider-ms - J to
 * --provider-ms + J (the `fake-slow-<min>-<max>` model), as a real provider's do. With a fixed
 * wait the --concurrency callers stay in step (all answered at once, all calling again at once),
 * so each call queues behind the others' bursts; a spread wait lets the calls arrive apart.
 */
const PROVIDER_JITTER = Number(args['provider-jitter'])
if (!Number.isInteger(PROVIDER_JITTER) || PROVIDER_JITTER < 0 || PROVIDER_JITTER > PROVIDER_MS)
  throw new Error('--provider-jitter: a whole number of milliseconds, 0 to --provider-ms')
const MODEL =
  PROVIDER_JITTER > 0
    ? `fake-slow-${PROVIDER_MS - PROVIDER_JITTER}-${PROVIDER_MS + PROVIDER_JITTER}`
    : PROVIDER_MS > 0
      ? `fake-slow-${PROVIDER_MS}`
      : 'gpt-bench'
const profDir = join(process.cwd(), 'bench', 'profiles')
const nodeFlags = args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []

const logDir = mkdtempSync(join(tmpdir(), 'pm-bench-run-'))
const dataDir = mkdtempSync(join(tmpdir(), 'pm-bench-run-data-'))
const children: Child[] = []

async function waitFor(url: string, timeoutMs = 180_000): Promise<void> {
  const until = Date.now() + timeoutMs
  for (;;) {
    try {
      if ((await fetch(url)).ok) return
    } catch {}
    if (Date.now() > until) throw new Error(`${url} not ready`)
    await new Promise((r) => setTimeout(r, 200))
  }
}

async function json<T>(
  pool: Pool,
  method: 'GET' | 'POST',
  path: string,
  body: unknown,
  token?: string,
): Promise<T> {
  const res = await pool.request({
    method,
    path,
    headers: { 'content-type': 'application/json', ...(token ? { authorization: `Bearer ${token}` } : {}) },
    body: JSON.stringify(body),
  })
  const text = await res.body.text()
  if (res.statusCode >= 300) throw new Error(`${method} ${path}: ${res.statusCode} ${text}`)
  return JSON.parse(text) as T
}

/** Failed calls by status, reported with the figures (a failure is not a latency). */
const failures = new Map<string, number>()
function failed(path: string, status: number, body: string): number {
  const key = `${status} ${/"code":"(\w+)"/.exec(body)?.[1] ?? ''} ${path.startsWith('/api/') ? 'service' : path === '/run' ? 'bare' : 'direct'}`
  if (!failures.has(key)) console.error(`first ${key}: ${body.slice(0, 300)}`)
  failures.set(key, (failures.get(key) ?? 0) + 1)
  return Number.NaN
}

const p50 = (all: number[]): number => {
  const s = all.filter(Number.isFinite).sort((a, b) => a - b)
  return s[Math.floor(s.length / 2)] ?? Number.NaN
}

/** Runs `total` calls, `concurrency` at a time; call i (0 to total - 1) answers its own latency in ms. */
async function load(
  total: number,
  concurrency: number,
  one: (i: number) => Promise<number>,
): Promise<number[]> {
  const out: number[] = []
  let next = 0
  await Promise.all(
    Array.from({ length: concurrency }, async () => {
      while (next < total) {
        const i = next++
        out.push(await one(i))
      }
    }),
  )
  return out
}

/** Time until the body's first chunk containing `marker` (a streamed answer's first text). */
async function firstChunk(
  pool: Pool,
  path: string,
  headers: Record<string, string>,
  body: string,
  marker: string,
) {
  const started = performance.now()
  const res = await pool.request({ method: 'POST', path, headers, body })
  let first = Number.NaN
  let text = ''
  for await (const chunk of res.body) {
    if (Number.isNaN(first) && String(chunk).includes(marker)) first = performance.now() - started
    if (res.statusCode !== 200 || text.length < 2000) text += String(chunk)
  }
  if (res.statusCode !== 200 || text.includes('event: error')) return failed(path, res.statusCode, text)
  return first
}

async function whole(
  pool: Pool,
  path: string,
  headers: Record<string, string>,
  body: string,
): Promise<number> {
  const started = performance.now()
  const res = await pool.request({ method: 'POST', path, headers, body })
  const text = await res.body.text()
  if (res.statusCode !== 200) return failed(path, res.statusCode, text)
  return performance.now() - started
}

function rssKiB(pid: number | undefined): number {
  const status = readFileSync(`/proc/${pid}/status`, 'utf8')
  return Number(/VmRSS:\s+(\d+)/.exec(status)?.[1] ?? Number.NaN)
}

try {
  const fakePort = await freePort()
  const fakeprovider = startChild(
    'fakeprovider',
    'bench/src/fakeServer.ts',
    { PORT: String(fakePort) },
    logDir,
    nodeFlags,
  )
  children.push(fakeprovider)
  const fakeUrl = `http://127.0.0.1:${fakePort}`
  const port = await freePort()
  const service = startChild(
    'embedded',
    'apps/embedded/src/main.ts',
    {
      PORT: String(port),
      HOST: '127.0.0.1',
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      AUTH_ALLOW_SIGNUP: 'true',
      PROVIDER_ALLOWED_HOSTS: '127.0.0.1',
      RUN_MAX_CONCURRENT: String(Math.max(1000, STREAMS * 2)),
    },
    logDir,
    nodeFlags,
  )
  children.push(service)
  const barePort = await freePort()
  const handlerPort = await freePort()
  const bareChain = startChild(
    'bare-run',
    'bench/src/bareRun.ts',
    { PORT: String(barePort), HANDLER_PORT: String(handlerPort), PROVIDER_URL: `${fakeUrl}/v1` },
    logDir,
    nodeFlags,
  )
  children.push(bareChain)
  const base = `http://127.0.0.1:${port}`
  await waitFor(`${base}/health/ready`)
  await waitFor(`http://127.0.0.1:${barePort}/health`)
  await waitFor(`http://127.0.0.1:${handlerPort}/health`)
  const gateway = new Pool(base, { connections: CONCURRENCY + STREAMS + 8 })
  const provider = new Pool(fakeUrl, { connections: CONCURRENCY + 8 })
  const barePool = new Pool(`http://127.0.0.1:${barePort}`, { connections: CONCURRENCY + 8 })
  const handlerPool = new Pool(`http://127.0.0.1:${handlerPort}`, { connections: CONCURRENCY + 8 })

  // A user token: user tokens are not rate limited (an API key's 600 a minute would be).
  const reg = await json<{ data: { accessToken: string; organizationId: string } }>(
    gateway,
    'POST',
    '/api/v1/auth/register',
    {
      email: `bench-${Date.now()}@example.com`,
      password: 'correct horse battery staple',
      name: 'bench',
    },
  )
  const { accessToken: token, organizationId } = reg.data
  const conn = await json<{ data: { _id: string } }>(
    gateway,
    'POST',
    `/api/v1/organizations/${organizationId}/connections`,
    { name: 'fake', provider: 'openai-compatible', baseUrl: `${fakeUrl}/v1`, apiKey: 'sk-bench-0000' },
    token,
  )
  const template = 'Summarize the following text in one sentence: {{text}}'
  const prompt = await json<{ data: { _id: string } }>(
    gateway,
    'POST',
    '/api/v1/prompts',
    {
      name: 'bench run',
      template,
      config: { model: 'gpt-bench', temperature: 0.2, max_tokens: 200 },
    },
    token,
  )
  await json(gateway, 'POST', `/api/v1/prompts/${prompt.data._id}/publish`, {}, token)
  // Call i of a round sends the same text directly and through the service, so that with
  // --provider-jitter both get the same waits (the local provider draws a ranged wait from the
  // message's text).
  const text = (i: number) =>
    `the quick brown fox jumps over the lazy dog and keeps running through the field until dusk ${i}`
  const runPath = `/api/v1/prompts/${prompt.data._id}/run`
  const runBody = (stream: boolean, i: number) =>
    JSON.stringify({ connectionId: conn.data._id, variables: { text: text(i) }, stream, model: MODEL })
  /** What the provider gets: the prompt's config and its rendered message. */
  const providerRequest = (i: number) => ({
    model: MODEL,
    temperature: 0.2,
    max_tokens: 200,
    messages: [{ role: 'user', content: template.replace('{{text}}', text(i)) }],
  })
  const directBody = (stream: boolean, i: number) =>
    JSON.stringify({
      ...providerRequest(i),
      ...(stream ? { stream: true, stream_options: { include_usage: true } } : {}),
    })
  const svcHeaders = { 'content-type': 'application/json', authorization: `Bearer ${token}` }
  const directHeaders = { 'content-type': 'application/json', authorization: 'Bearer sk-bench-0000' }

  const viaService = {
    plain: (i: number) => whole(gateway, runPath, svcHeaders, runBody(false, i)),
    first: (i: number) => firstChunk(gateway, runPath, svcHeaders, runBody(true, i), 'event: delta'),
  }
  // The bare chain gets the request the provider gets, with `stream` for its handler to pass on.
  const bareBody = (stream: boolean, i: number) => JSON.stringify({ ...providerRequest(i), stream })
  const bareHeaders = { 'content-type': 'application/json' }
  const viaBareRun = (pool: Pool) => ({
    plain: (i: number) => whole(pool, '/run', bareHeaders, bareBody(false, i)),
    first: (i: number) => firstChunk(pool, '/run', bareHeaders, bareBody(true, i), 'event: delta'),
  })
  const viaBare = viaBareRun(barePool)
  const viaHandler = viaBareRun(handlerPool)
  const direct = {
    plain: (i: number) => whole(provider, '/v1/chat/completions', directHeaders, directBody(false, i)),
    first: (i: number) =>
      firstChunk(provider, '/v1/chat/completions', directHeaders, directBody(true, i), '"content":"S'),
  }

  // Warm-up: the SDKs load on the first run, the JIT warms up.
  await viaService.plain(0)
  await viaService.first(0)
  await load(200, CONCURRENCY, viaService.plain)
  await load(200, CONCURRENCY, viaService.first)
  await load(200, CONCURRENCY, direct.plain)
  await load(200, CONCURRENCY, viaBare.plain)
  await load(200, CONCURRENCY, viaBare.first)
  await load(200, CONCURRENCY, viaHandler.plain)
  await load(200, CONCURRENCY, viaHandler.first)

  /**
   * Where a call goes: directly to the provider, through the service, through the bare chain, or
   * through its handler alone; and, for each but the direct calls, the process whose CPU counts.
   */
  const routes = {
    direct: { calls: direct, front: null },
    svc: { calls: viaService, front: service },
    bare: { calls: viaBare, front: bareChain },
    handler: { calls: viaHandler, front: bareChain },
  }
  type Route = keyof typeof routes
  type Kind = 'plain' | 'first'
  const samples = Object.fromEntries(
    (Object.keys(routes) as Route[]).map((r) => [r, { plain: [] as number[], first: [] as number[] }]),
  ) as Record<Route, Record<Kind, number[]>>
  const perRound = Math.ceil(CALLS / ROUNDS)
  /** CPU seconds of the front process and of the provider over each route's rounds. */
  const cpu = Object.fromEntries(
    (Object.keys(routes) as Route[]).map((r) => [
      r,
      { plain: { service: 0, provider: 0 }, first: { service: 0, provider: 0 } },
    ]),
  ) as Record<Route, Record<Kind, { service: number; provider: number }>>
  for (let r = 0; r < ROUNDS; r++) {
    for (const kind of ['plain', 'first'] as const) {
      for (const route of Object.keys(routes) as Route[]) {
        const { calls, front } = routes[route]
        const service0 = cpuSeconds(front?.child.pid)
        const provider0 = cpuSeconds(fakeprovider.child.pid)
        samples[route][kind].push(...(await load(perRound, CONCURRENCY, calls[kind])))
        cpu[route][kind].service += cpuSeconds(front?.child.pid) - service0
        cpu[route][kind].provider += cpuSeconds(fakeprovider.child.pid) - provider0
      }
    }
  }
  const sequential = {} as Record<Route, number[]>
  for (const route of Object.keys(routes) as Route[])
    sequential[route] = await load(SEQUENTIAL, 1, routes[route].calls.plain)

  const fmt = (x: number) => x.toFixed(2)
  /** p50 added over the direct calls: at --concurrency (non-streamed, first token), one at a time. */
  const addedBy = (route: Route) => ({
    plain: p50(samples[route].plain) - p50(samples.direct.plain),
    first: p50(samples[route].first) - p50(samples.direct.first),
    seq: p50(sequential[route]) - p50(sequential.direct),
  })
  const added = addedBy('svc')
  console.log(
    `non-streamed, ${CONCURRENCY} concurrent: direct p50 ${fmt(p50(samples.direct.plain))} ms, via the service ${fmt(p50(samples.svc.plain))} ms, added ${fmt(added.plain)} ms`,
  )
  console.log(
    `first token, ${CONCURRENCY} concurrent: direct p50 ${fmt(p50(samples.direct.first))} ms, via the service ${fmt(p50(samples.svc.first))} ms, added ${fmt(added.first)} ms`,
  )
  const perCall = (seconds: number) => `${((seconds / (perRound * ROUNDS)) * 1e6).toFixed(0)} µs`
  console.log(
    `CPU per call through the service: non-streamed service ${perCall(cpu.svc.plain.service)}, provider ${perCall(cpu.svc.plain.provider)}; streamed service ${perCall(cpu.svc.first.service)}, provider ${perCall(cpu.svc.first.provider)}`,
  )
  console.log(
    `sequential: direct p50 ${fmt(p50(sequential.direct))} ms, via the service ${fmt(p50(sequential.svc))} ms, added ${fmt(added.seq)} ms`,
  )
  const chainLine = (label: string, route: Route) => {
    const a = addedBy(route)
    console.log(
      `${label}: added p50 ${fmt(a.plain)} ms non-streamed, ${fmt(a.first)} ms first token, ${fmt(a.seq)} ms sequential; CPU per call ${perCall(cpu[route].plain.service)} non-streamed, ${perCall(cpu[route].first.service)} streamed`,
    )
    return a
  }
  const bareAdded = chainLine('bare chain (proxy → handler → OpenAI SDK, one process)', 'bare')
  chainLine('bare handler alone (no proxy: one HTTP exchange, then the SDK)', 'handler')
  console.log(
    `the service above the bare chain: p50 ${fmt(added.plain - bareAdded.plain)} ms non-streamed, ${fmt(added.first - bareAdded.first)} ms first token, ${fmt(added.seq - bareAdded.seq)} ms sequential`,
  )

  // Memory per open stream: streams held open on an answer that stalls after its first delta.
  const before = rssKiB(service.child.pid)
  const controllers: AbortController[] = []
  const opened = Array.from({ length: STREAMS }, async () => {
    const controller = new AbortController()
    controllers.push(controller)
    const res = await gateway.request({
      method: 'POST',
      path: runPath,
      headers: svcHeaders,
      body: JSON.stringify({
        connectionId: conn.data._id,
        variables: { text },
        model: 'fake-stall',
        stream: true,
      }),
      signal: controller.signal,
    })
    // Resolve once the first delta arrived; the rest is never sent.
    for await (const chunk of res.body) if (String(chunk).includes('event: delta')) break
  })
  await Promise.all(opened.map((p) => p.catch(() => {})))
  await new Promise((r) => setTimeout(r, 500))
  const after = rssKiB(service.child.pid)
  for (const c of controllers) c.abort()
  console.log(
    `memory per open stream: ${((after - before) / STREAMS).toFixed(1)} KiB (${STREAMS} streams, RSS ${(before / 1024).toFixed(0)} → ${(after / 1024).toFixed(0)} MiB)`,
  )
  await gateway.close().catch(() => {})
  await provider.close().catch(() => {})
  await barePool.close().catch(() => {})
  await handlerPool.close().catch(() => {})
  if (failures.size > 0)
    console.log(`failed calls (not counted): ${[...failures].map(([k, v]) => `${k} × ${v}`).join(', ')}`)
  console.log(
    `run overhead: p50 ${fmt(added.plain)} ms, first token p50 ${fmt(added.first)} ms (${samples.svc.plain.filter(Number.isFinite).length} calls, ${CONCURRENCY} concurrent)`,
  )
  if (args['cpu-prof'])
    console.log(
      `CPU profiles in ${profDir} (written at exit), by pid: ${children.map((c) => `${c.name} ${c.child.pid}`).join(', ')}`,
    )
} finally {
  for (const c of children) await c.stop()
  rmSync(dataDir, { recursive: true, force: true })
  rmSync(logDir, { recursive: true, force: true })
}
