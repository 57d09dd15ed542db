/**
 * Invoke through the whole chain (gateway with API-key auth and rate limits → render with a
 * cached snapshot) against a bare chain (a plain Fastify proxy in front of a plain Fastify
 * handler returning a fixed JSON body), both measured in the same run with autocannon.
 *
 *   node --conditions=source bench/src/invoke.ts [--mode embedded|distributed]
 *        [--duration 12] [--warmup 4] [--connections 50] [--cpu-prof]
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
import { type Child, cpuSeconds, peakRssMiB, startChild, waitReady } from './processes.ts'

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string', default: 'embedded' },
    duration: { type: 'string', default: '12' },
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
      'packages/embedded/src/main.ts',
      { ...common, PORT: String(port) },
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

interface Run {
  result: Result
  /** CPU microseconds per request, by process (the chain's and the load generator's). */
  cpu: Record<string, number>
}

async function load(
  url: string,
  headers: Record<string, string>,
  body: string,
  expectBody: string,
  seconds: number,
  procs: Child[],
): Promise<Run> {
  const before = procs.map((c) => cpuSeconds(c.child.pid))
  const selfBefore = process.cpuUsage()
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
  const failed = result.errors + result.timeouts + result.non2xx + result.mismatches
  if (failed > 0) {
    throw new Error(
      `${url}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx, ${result.mismatches} wrong bodies`,
    )
  }
  const perRequest = (cpuS: number) => (cpuS * 1e6) / result.requests.total
  const cpu: Record<string, number> = {}
  procs.forEach((c, i) => {
    cpu[c.name] = perRequest(cpuSeconds(c.child.pid) - (before[i] ?? 0))
  })
  const self = process.cpuUsage(selfBefore)
  cpu.autocannon = perRequest((self.user + self.system) / 1e6)
  return { result, cpu }
}

const fmt = (n: number, digits = 1) => n.toFixed(digits)
const describeRun = (name: string, { result: r, cpu }: Run) =>
  `${name}: ${fmt(r.requests.average, 0)} req/s, latency p50 ${fmt(r.latency.p50)} ms, p90 ${fmt(r.latency.p90)} ms, p99 ${fmt(r.latency.p99)} ms, max ${fmt(r.latency.max)} ms (${r.requests.total} requests in ${r.duration} s, ${connections} connections)\n` +
  `  CPU per request: ${Object.entries(cpu)
    .map(([n, us]) => `${n} ${fmt(us, 0)} µs`)
    .join(', ')}`

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
  const bareChain = await startBare(expected)
  const bare = bareChain.url

  log('warming up')
  await load(`${bare}${path}`, headers, body, expected, warmup, bareChain.procs)
  await load(`${gateway}${path}`, headers, body, expected, warmup, full.procs)

  const bareRun = await load(`${bare}${path}`, headers, body, expected, duration, bareChain.procs)
  log(describeRun('bare', bareRun))
  const fullRun = await load(`${gateway}${path}`, headers, body, expected, duration, full.procs)
  log(describeRun('full', fullRun))

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

  const f = fullRun.result
  const b = bareRun.result
  const ratio = f.requests.average / b.requests.average
  log(
    `invoke/bare ratio: ${ratio.toFixed(2)} (full ${fmt(f.requests.average, 0)} req/s p50 ${fmt(f.latency.p50)} ms p99 ${fmt(f.latency.p99)} ms, bare ${fmt(b.requests.average, 0)} req/s)`,
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
