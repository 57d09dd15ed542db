/**
 * Invoke through the whole chain (gateway with API-key auth and rate limits → render with a
 * cached snapshot) against a bare chain (a plain Fastify proxy in front of a plain Fastify
 * handler returning a fixed JSON body), both measured in the same run with autocannon.
 *
 *   node --conditions=source bench/src/invoke.ts [--mode embedded|distributed]
 *        [--duration 16] [--rounds 4] [--warmup 4] [--connections 50]
 *        [--log-level info] [--cpu-prof] [--keep-logs]
 *
 * embedded (default): the whole service in one process (`pnpm start`), and the bare chain in one
 * process too. distributed: the five processes on SQLite stores with NATS_URL and REDIS_URL (the
 * rate limiter then goes to Redis on every request), and the bare chain as two processes.
 * The last line printed is
 *   invoke/bare ratio: <r> (full <N> req/s p50 <a> ms p99 <b> ms, bare <M> req/s)
 */
import { randomBytes } from 'node:crypto'
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { freePort } from '@pm/testkit'
import autocannon, { type Result } from 'autocannon'
import {
  type Child,
  cpuSeconds,
  findServers,
  machineSeconds,
  peakRssMiB,
  startChild,
  waitReady,
} from './processes.ts'

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string', default: 'embedded' },
    /** Seconds of measurement per chain, split over --rounds alternating runs. */
    duration: { type: 'string', default: '16' },
    rounds: { type: 'string', default: '4' },
    warmup: { type: 'string', default: '4' },
    connections: { type: 'string', default: '50' },
    'cpu-prof': { type: 'boolean', default: false },
    'keep-logs': { type: 'boolean', default: false },
    /** Passed to every process of the chain as LOG_LEVEL (default: each service's own, info). */
    'log-level': { type: 'string' },
  },
})
const mode = args.mode
if (mode !== 'embedded' && mode !== 'distributed') throw new Error('--mode is embedded or distributed')
const duration = Number(args.duration)
const warmup = Number(args.warmup)
const connections = Number(args.connections)
const rounds = Math.max(1, Number(args.rounds))

const ADMIN = { email: 'bench@example.com', password: 'bench password 0123456789' }
const TEMPLATE =
  'You are a helpful assistant for {{company}}. Answer the customer {{ name }} in {{language}}, ' +
  'in a friendly tone, in at most {{limit}} words. Their question: {{question}}'
const VARIABLES = {
  company: 'Acme',
  name: 'Ada',
  language: 'English',
  limit: 120,
  question: 'How do I reset my password?',
}

const log = (line: string) => process.stdout.write(`${line}\n`)
const workDir = mkdtempSync(join(tmpdir(), 'pm-bench-'))
const logDir = join(workDir, 'logs')
mkdirSync(logDir)
const profDir = join(process.cwd(), 'bench', 'profiles')
const nodeFlags = args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []
const children: Child[] = []

interface Json {
  data?: Record<string, unknown>
  error?: { code: string; message: string }
}

async function api(base: string, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const json = (await res.json()) as Json
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json.error)}`)
  return json.data ?? {}
}

interface Chain {
  url: string
  procs: Child[]
}

/** The named settings of the bench's own environment that are set. */
function passThrough(names: string[]): Record<string, string> {
  const out: Record<string, string> = {}
  for (const name of names) {
    const value = process.env[name]
    if (value) out[name] = value
  }
  return out
}

/** Starts the service in the chosen mode. */
async function startFull(): Promise<Chain> {
  const port = await freePort()
  const secret = randomBytes(32).toString('hex')
  const common = {
    INTERNAL_AUTH_SECRET: secret,
    DATA_DIR: join(workDir, 'data'),
    BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
    BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
    BOOTSTRAP_ORG_NAME: 'Bench',
    ...(args['log-level'] ? { LOG_LEVEL: args['log-level'] } : {}),
  }
  mkdirSync(common.DATA_DIR)
  if (mode === 'embedded') {
    const proc = startChild(
      'embedded',
      'apps/embedded/src/main.ts',
      // Operating settings pass through in embedded mode (one process, one metrics port), so the
      // cost of metrics and traces can be measured: METRICS_PORT=9464 pnpm bench:invoke.
      { ...common, ...passThrough(['METRICS_PORT', 'OTEL_EXPORTER_OTLP_ENDPOINT']), PORT: String(port) },
      logDir,
      nodeFlags,
    )
    children.push(proc)
    await waitReady(`http://127.0.0.1:${port}/health/ready`, proc)
    return { url: `http://127.0.0.1:${port}`, procs: [proc] }
  }
  const natsUrl = process.env.NATS_URL
  const redisUrl = process.env.REDIS_URL
  if (!natsUrl || !redisUrl) {
    throw new Error(
      '--mode distributed needs NATS_URL and REDIS_URL (e.g. nats://127.0.0.1:4222, redis://127.0.0.1:6379)',
    )
  }
  const ports: Record<string, number> = { gateway: port }
  for (const name of ['identity', 'prompts', 'render', 'webhooks']) ports[name] = await freePort()
  const env = {
    ...common,
    NODE_ENV: 'production',
    // TLS is terminated in front of the gateway in production; the bench talks plain HTTP on loopback.
    REQUIRE_HTTPS: 'false',
    HOST: '127.0.0.1',
    NATS_URL: natsUrl,
    REDIS_URL: redisUrl,
    IDENTITY_URL: `http://127.0.0.1:${ports.identity}`,
    PROMPTS_URL: `http://127.0.0.1:${ports.prompts}`,
    RENDER_URLS: `http://127.0.0.1:${ports.render}`,
    WEBHOOKS_URL: `http://127.0.0.1:${ports.webhooks}`,
  }
  const procs: Child[] = []
  for (const name of ['identity', 'prompts', 'render', 'webhooks', 'gateway']) {
    const proc = startChild(
      name,
      `apps/${name}/src/server.ts`,
      { ...env, PORT: String(ports[name]) },
      logDir,
      nodeFlags,
    )
    children.push(proc)
    procs.push(proc)
    await waitReady(`http://127.0.0.1:${ports[name]}/health/ready`, proc)
  }
  return { url: `http://127.0.0.1:${port}`, procs }
}

/** Starts the bare chain, answering with `body`. */
async function startBare(body: string): Promise<Chain> {
  const port = await freePort()
  const procs: Child[] = []
  let front: Child
  if (mode === 'embedded') {
    front = startChild(
      'bare',
      'bench/src/bare.ts',
      { BARE_ROLE: 'both', PORT: String(port), BARE_BODY: body },
      logDir,
      nodeFlags,
    )
    procs.push(front)
    children.push(front)
  } else {
    const upstreamPort = await freePort()
    const upstream = startChild(
      'bare-upstream',
      'bench/src/bare.ts',
      { BARE_ROLE: 'upstream', PORT: String(upstreamPort), BARE_BODY: body },
      logDir,
      nodeFlags,
    )
    procs.push(upstream)
    children.push(upstream)
    await waitReady(`http://127.0.0.1:${upstreamPort}/health`, upstream)
    front = startChild(
      'bare-proxy',
      'bench/src/bare.ts',
      { BARE_ROLE: 'proxy', PORT: String(port), UPSTREAM_URL: `http://127.0.0.1:${upstreamPort}` },
      logDir,
      nodeFlags,
    )
    procs.push(front)
    children.push(front)
  }
  await waitReady(`http://127.0.0.1:${port}/health`, front)
  return { url: `http://127.0.0.1:${port}`, procs }
}

/** A process whose CPU time a run accounts for. */
interface Tracked {
  name: string
  pid: number | undefined
}

/** One autocannon run, with the CPU each process spent on it. */
interface Run {
  result: Result
  /** CPU seconds, by process (the chain's, the servers it uses, and the load generator's). */
  cpu: Record<string, number>
  /** CPU seconds the rest of the machine used meanwhile, and the machine's total (all cores). */
  otherBusy: number
  machineTotal: number
}

async function load(
  url: string,
  headers: Record<string, string>,
  body: string,
  expectBody: string,
  seconds: number,
  procs: Tracked[],
): Promise<Run> {
  const before = procs.map((c) => cpuSeconds(c.pid))
  const selfBefore = process.cpuUsage()
  const machineBefore = machineSeconds()
  const result: Result = await autocannon({
    url,
    method: 'POST',
    headers,
    body,
    connections,
    duration: seconds,
    expectBody,
    timeout: 10,
  })
  const machine = machineSeconds()
  const failed = result.errors + result.timeouts + result.non2xx + result.mismatches
  if (failed > 0) {
    throw new Error(
      `${url}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx, ${result.mismatches} wrong bodies`,
    )
  }
  const cpu: Record<string, number> = {}
  let ours = 0
  procs.forEach((c, i) => {
    const used = cpuSeconds(c.pid) - (before[i] ?? 0)
    ours += used
    cpu[c.name] = used
  })
  const self = process.cpuUsage(selfBefore)
  cpu.autocannon = (self.user + self.system) / 1e6
  ours += cpu.autocannon
  return {
    result,
    cpu,
    otherBusy: Math.max(0, machine.busy - machineBefore.busy - ours),
    machineTotal: machine.total - machineBefore.total,
  }
}

/** Several runs of one chain taken together. */
interface Summary {
  requests: number
  reqPerSec: number
  /** Median of the runs' medians, and the worst run's p99 and max (autocannon keeps no histogram to merge). */
  p50: number
  p99: number
  max: number
  cpuPerRequest: Record<string, number>
  otherLoad: number
}

function summarize(runs: Run[]): Summary {
  const requests = runs.reduce((a, r) => a + r.result.requests.total, 0)
  const seconds = runs.reduce((a, r) => a + r.result.duration, 0)
  const p50s = runs.map((r) => r.result.latency.p50).sort((a, b) => a - b)
  const cpuPerRequest: Record<string, number> = {}
  for (const r of runs) {
    for (const [name, used] of Object.entries(r.cpu)) {
      cpuPerRequest[name] = (cpuPerRequest[name] ?? 0) + (used * 1e6) / requests
    }
  }
  return {
    requests,
    reqPerSec: requests / seconds,
    p50: p50s[Math.floor((p50s.length - 1) / 2)] ?? Number.NaN,
    p99: Math.max(...runs.map((r) => r.result.latency.p99)),
    max: Math.max(...runs.map((r) => r.result.latency.max)),
    cpuPerRequest,
    otherLoad: runs.reduce((a, r) => a + r.otherBusy, 0) / runs.reduce((a, r) => a + r.machineTotal, 0),
  }
}

const fmt = (n: number, digits = 1) => n.toFixed(digits)
const describe = (name: string, s: Summary, runs: Run[]) =>
  `${name}: ${fmt(s.reqPerSec, 0)} req/s (runs: ${runs.map((r) => fmt(r.result.requests.average, 0)).join(', ')}), latency p50 ${fmt(s.p50)} ms, p99 ${fmt(s.p99)} ms, max ${fmt(s.max)} ms; ${s.requests} requests, ${connections} connections\n` +
  `  CPU per request: ${Object.entries(s.cpuPerRequest)
    .map(([n, us]) => `${n} ${fmt(us, 0)} µs`)
    .join(', ')}; other processes used ${fmt(s.otherLoad * 100, 0)}% of the machine meanwhile`

/** After a publish returns, how long until the next invoke renders the new version. */
async function freshness(gateway: string, token: string, apiKey: string, promptId: string, rounds: number) {
  const delays: number[] = []
  let firstTry = 0
  for (let i = 0; i < rounds; i++) {
    await api(gateway, 'PATCH', `/api/v1/prompts/${promptId}`, apiKey, { template: `${TEMPLATE} (${i})` })
    const published = await api(gateway, 'POST', `/api/v1/prompts/${promptId}/publish`, token, {})
    const started = performance.now()
    for (let attempt = 0; ; attempt++) {
      const data = await api(gateway, 'POST', `/api/v1/prompts/${promptId}/invoke`, apiKey, {
        variables: VARIABLES,
      })
      if (data.version === published.version) {
        if (attempt === 0) firstTry++
        delays.push(performance.now() - started)
        break
      }
      if (performance.now() - started > 5_000) throw new Error('a publish was not seen within 5 s')
    }
  }
  return { firstTry, max: Math.max(...delays) }
}

async function main(): Promise<void> {
  log(`bench invoke: mode ${mode}, ${connections} connections, ${warmup} s warm-up, ${duration} s per run`)
  const full = await startFull()
  const gateway = full.url
  const login = await api(gateway, 'POST', '/api/v1/auth/login', undefined, ADMIN)
  const token = String(login.accessToken)
  const org = String(login.organizationId)
  // A limit high enough never to be hit, so the limiter is on the path but never refuses.
  const created = await api(gateway, 'POST', `/api/v1/organizations/${org}/api-keys`, token, {
    name: 'bench',
    scopes: ['prompts:read', 'prompts:write'],
    rateLimit: { points: 1_000_000, durationSeconds: 60 },
  })
  const apiKey = String(created.key)
  const prompt = await api(gateway, 'POST', '/api/v1/prompts', apiKey, {
    name: 'Bench prompt',
    template: TEMPLATE,
  })
  const promptId = String(prompt._id)
  await api(gateway, 'POST', `/api/v1/prompts/${promptId}/publish`, token, {})

  const path = `/api/v1/prompts/${promptId}/invoke`
  const body = JSON.stringify({ variables: VARIABLES })
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  const first = await fetch(`${gateway}${path}`, { method: 'POST', headers, body })
  const expected = await first.text()
  if (first.status !== 200 || first.headers.get('x-service-version') !== '1') {
    throw new Error(`invoke answered ${first.status}: ${expected}`)
  }
  log(`full chain answers ${expected.length} bytes: ${expected.slice(0, 100)}...`)

  // The bare handler answers the very bytes the full chain does.
  // In the distributed mode the chain also uses Redis (a rate-limit call per request): its CPU counts.
  const servers = mode === 'distributed' ? findServers(['redis-server']) : []
  const bareChain = await startBare(expected)
  const bare = bareChain.url

  log('warming up')
  const fullProcs: Tracked[] = [...full.procs.map((c) => ({ name: c.name, pid: c.child.pid })), ...servers]
  const bareProcs: Tracked[] = bareChain.procs.map((c) => ({ name: c.name, pid: c.child.pid }))
  const runBare = (seconds: number) => load(`${bare}${path}`, headers, body, expected, seconds, bareProcs)
  const runFull = (seconds: number) => load(`${gateway}${path}`, headers, body, expected, seconds, fullProcs)
  await runBare(warmup)
  await runFull(warmup)

  // Alternating rounds (bare, full, full, bare, ...): a change in the machine's load during the
  // bench then weighs on both chains alike.
  const bareRuns: Run[] = []
  const fullRuns: Run[] = []
  const slice = duration / rounds
  for (let i = 0; i < rounds; i++) {
    if (i % 2 === 0) {
      bareRuns.push(await runBare(slice))
      fullRuns.push(await runFull(slice))
    } else {
      fullRuns.push(await runFull(slice))
      bareRuns.push(await runBare(slice))
    }
  }
  const b = summarize(bareRuns)
  const f = summarize(fullRuns)
  log(describe('bare', b, bareRuns))
  log(describe('full', f, fullRuns))
  if (Math.max(b.otherLoad, f.otherLoad) > 0.15) {
    log('  note: the machine was busy with other work during the runs; the figures above carry that noise')
  }

  const fresh = await freshness(gateway, token, apiKey, promptId, 20)
  log(
    `publish → invoke: the first invoke after the publish returned rendered the new version ${fresh.firstTry}/20 times; slowest ${fmt(fresh.max)} ms`,
  )

  if (args['cpu-prof']) {
    log(
      `CPU profiles in ${profDir} (written at exit), by pid: ${children.map((c) => `${c.name} ${c.child.pid}`).join(', ')}`,
    )
  }
  log('peak RSS (VmHWM):')
  for (const child of children) log(`  ${child.name}: ${fmt(child.peakRssMiB() ?? Number.NaN)} MiB`)
  log(`  bench (autocannon): ${fmt(peakRssMiB(process.pid) ?? Number.NaN)} MiB`)

  // On a shared machine the throughput ratio moves with other load; the ratio of each adjacent
  // pair of rounds and the CPU the chains spent per request show how much of it is noise.
  const chainCpu = (s: Summary) =>
    Object.entries(s.cpuPerRequest)
      .filter(([name]) => name !== 'autocannon')
      .reduce((a, [, us]) => a + us, 0)
  const pairs = fullRuns.map(
    (r, i) => r.result.requests.average / (bareRuns[i]?.result.requests.average ?? Number.NaN),
  )
  const fullCpu = chainCpu(f)
  const bareCpu = chainCpu(b)
  log(
    `per-round ratios: ${pairs.map((r) => r.toFixed(2)).join(', ')}; CPU per request of the chain (autocannon excluded): full ${fmt(fullCpu, 0)} µs, bare ${fmt(bareCpu, 0)} µs (bare/full ${(bareCpu / fullCpu).toFixed(2)})`,
  )
  const ratio = f.reqPerSec / b.reqPerSec
  log(
    `invoke/bare ratio: ${ratio.toFixed(2)} (full ${fmt(f.reqPerSec, 0)} req/s p50 ${fmt(f.p50)} ms p99 ${fmt(f.p99)} ms, bare ${fmt(b.reqPerSec, 0)} req/s)`,
  )
}

let exitCode = 0
try {
  await main()
} catch (err) {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\nlogs: ${logDir}\n`)
  exitCode = 1
} finally {
  await Promise.all(children.map((c) => c.stop()))
  if (exitCode === 0 && !args['keep-logs']) rmSync(workDir, { recursive: true, force: true })
  else process.stderr.write(`logs kept in ${logDir}\n`)
}
process.exit(exitCode)
