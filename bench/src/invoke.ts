/**
 * Invoke through the whole chain (gateway with API-key auth and rate limits → render with a
 * cached snapshot) against a bare chain (a plain Fastify proxy in front of a plain Fastify
 * handler returning a fixed JSON body), both measured in the same run with autocannon.
 *
 *   node --conditions=source bench/src/invoke.ts [--mode embedded|distributed]
 *        [--gateways 1 --renders 1] [--duration 16] [--rounds 4] [--warmup 4] [--connections 50]
 *        [--log-level info] [--cpu-prof] [--keep-logs]
 *        [--tracing [--processes 3] [--together] [--rate R] [--ratio 0.1]]
 *
 * embedded (default): the whole service in one process (`pnpm start`), and the bare chain in one
 * process too. distributed: the five processes on SQLite stores with NATS_URL and REDIS_URL (the
 * rate limiter then goes to Redis on every request), and the bare chain as two processes.
 * distributed with --gateways G --renders R (1 to 32 each): G gateways and R render replicas
 * (identity, prompts and webhooks stay one each) against G bare proxies in front of R bare
 * handlers, each gateway and each bare proxy loaded by its own load generator process (load.ts),
 * the G generators' figures summed.
 * The last line printed is
 *   invoke/bare ratio: <r> (full <N> req/s p50 <a> ms p99 <b> ms, bare <M> req/s)
 *
 * --tracing (embedded): instead of the bare chain, the service three times, tracing off, on
 * with every request sampled (ratio 1.0) and on with OTEL_TRACES_SAMPLER_ARG=0.1 (sampler
 * parentbased_traceidratio), exporting OTLP to a sink in this process, loaded in interleaved
 * rounds (the order turns each round), each process warmed up twice (--warmup seconds each time).
 * --processes P (default 3, with --rounds 6 --duration 24): P processes of each variant,
 * started in turn, round i loading the (i mod P)-th, so that one process's luck is not the
 * variant's; the per-round ratios are printed with their median. --together: each round loads
 * the three variants at the same time (--connections each), so that they share the machine's
 * moods and its CPU; the autocannon CPU printed is then the three loads'. --rate R: each variant
 * loaded at R requests a second rather than as fast as it answers (the throughput ratios then read
 * 1.00), and a line with the CPU a request of each variant above its idle CPU, at the same rate:
 * the cost of tracing without the feedback of a saturated machine, where the variant that costs
 * more also gets less of the CPU. --ratio R: the third variant's ratio instead of 0.1 (0: every
 * trace dropped, what the unsampled requests cost; off: a second untraced variant, labelled
 * off2, whose ratio to off is this instrument's own spread in that run). The last line printed is
 *   tracing: 1.0/off <r1>, 0.1/off <r2> (off <N> req/s, 1.0 <M> req/s, 0.1 <K> req/s)
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { freePort } from '@pm/testkit'
import autocannon, { type Options, type Result } from 'autocannon'
import {
  type Child,
  cpuSeconds,
  findServers,
  type LoadGenerator,
  machineSeconds,
  mainThreadSeconds,
  peakRssMiB,
  startChild,
  startLoadGenerator,
  waitReady,
} from './processes.ts'
import {
  api,
  type InvokeTarget,
  prepare,
  serviceEnv,
  startSink,
  TEMPLATE,
  tracedEnv,
  VARIABLES,
} from './invokeSetup.ts'

const { values: args } = parseArgs({
  options: {
    mode: { type: 'string', default: 'embedded' },
    /** Seconds of measurement per chain, split over --rounds alternating runs: 16 (--tracing: 24). */
    duration: { type: 'string' },
    /** 4 (--tracing: 6, two a process). */
    rounds: { type: 'string' },
    warmup: { type: 'string', default: '4' },
    connections: { type: 'string', default: '50' },
    'cpu-prof': { type: 'boolean', default: false },
    /**
     * The cost of tracing (embedded mode): three services, tracing off, on with every request
     * sampled and on with a 10 % sampler, loaded in turn, exporting to a sink in this process.
     */
    tracing: { type: 'boolean', default: false },
    /**
     * --tracing: processes of each variant, taken in turn by the rounds (default 3: one process's
     * luck, which moved a variant by up to 13 % here, is averaged over three).
     */
    processes: { type: 'string' },
    /** --tracing: the variants loaded at the same time in each round, not one after another. */
    together: { type: 'boolean', default: false },
    /**
     * --tracing: each variant loaded at this many requests a second (autocannon's overallRate),
     * below what any of them can take, instead of as fast as it answers; the CPU a request is then
     * compared at the same rate, above each process's idle CPU (measured first).
     */
    rate: { type: 'string' },
    /** --tracing: the third variant's sampler ratio (0.1 unless given; 0 drops every trace; off: untraced again, a control). */
    ratio: { type: 'string', default: '0.1' },
    'keep-logs': { type: 'boolean', default: false },
    /** Passed to every process of the chain as LOG_LEVEL (default: each service's own, info). */
    'log-level': { type: 'string' },
    /** Distributed mode: gateway processes, each with its own load generator (default 1). */
    gateways: { type: 'string' },
    /** Distributed mode: render replicas, each gateway taking them in turn (default 1). */
    renders: { type: 'string' },
    /**
     * What invoke names (issue 29): `current` (the current version, as before), `env` (the
     * production pin, `?env=production`), or `split` (production under a 50/50 split of two
     * versions, each request with the same subject, so every answer is the same bytes).
     */
    target: { type: 'string', default: 'current' },
  },
})
const mode = args.mode
if (mode !== 'embedded' && mode !== 'distributed') throw new Error('--mode is embedded or distributed')
const target = args.target as InvokeTarget
if (target !== 'current' && target !== 'env' && target !== 'split')
  throw new Error('--target is current, env or split')

function usage(message: string): never {
  process.stderr.write(`bench invoke: ${message}\n`)
  process.exit(2)
}

/** --gateways or --renders: 1 unless given; an integer from 1 to 32, in the distributed mode only. */
function replicas(option: 'gateways' | 'renders'): number {
  const raw = args[option]
  if (raw === undefined) return 1
  if (mode !== 'distributed') usage(`--${option} needs --mode distributed (the embedded mode is one process)`)
  const n = Number(raw)
  if (!/^\d+$/.test(raw) || n < 1 || n > 32)
    usage(`--${option} must be an integer from 1 to 32, not '${raw}'`)
  return n
}
if (args.tracing && mode !== 'embedded') usage('--tracing needs --mode embedded')
const gateways = replicas('gateways')
const renders = replicas('renders')
/**
 * The scaling bench: more than one gateway or render. Each gateway then gets its own load generator
 * process; with G = R = 1 autocannon runs in this process, as it always has.
 */
const scaled = gateways > 1 || renders > 1
/** A replica's process name: numbered only when there are several. */
const replicaNames = (role: string, count: number) =>
  Array.from({ length: count }, (_, i) => (count > 1 ? `${role}${i}` : role))
const duration = Number(args.duration ?? (args.tracing ? 24 : 16))
const warmup = Number(args.warmup)
const connections = Number(args.connections)
const rounds = Math.max(1, Number(args.rounds ?? (args.tracing ? 6 : 4)))
const processes = Math.min(8, Math.max(1, Number(args.processes ?? (args.tracing ? 3 : 1)) || 1))
const rate = args.rate === undefined ? undefined : Number(args.rate)
if (rate !== undefined && !(Number.isInteger(rate) && rate >= 1 && rate <= 100_000))
  usage(`--rate must be an integer from 1 to 100000 requests a second, not '${args.rate}'`)
if (rate !== undefined && !args.tracing) usage('--rate needs --tracing')
const control = args.ratio === 'off'
const third = control ? 'off2' : args.ratio
if (!control && !/^0(\.\d{1,4})?$/.test(third))
  usage(
    `--ratio must be a number from 0 to below 1 (1.0 is the second variant already) or off, not '${third}'`,
  )

const log = (line: string) => process.stdout.write(`${line}\n`)
const workDir = mkdtempSync(join(tmpdir(), 'pm-bench-'))
const logDir = join(workDir, 'logs')
mkdirSync(logDir)
const profDir = join(process.cwd(), 'bench', 'profiles')
const nodeFlags = args['cpu-prof'] ? ['--cpu-prof', `--cpu-prof-dir=${profDir}`] : []
const children: Child[] = []
/** The scaling bench's load generators, one per gateway (and per bare proxy: the same ones in turn). */
const generators: LoadGenerator[] = []

interface Chain {
  /** The first front process's URL (the gateway's, or the bare proxy's). */
  url: string
  /** Every front process (G of them in the scaling bench), by name, to load each with its own generator. */
  fronts: Array<{ name: string; url: string }>
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

/**
 * Starts the service in the chosen mode. `variant` (the tracing bench): the embedded process's
 * name and the settings it gets on top of the ones passed through.
 */
async function startFull(variant?: { name: string; env: Record<string, string> }): Promise<Chain> {
  const port = await freePort()
  const dataDir = join(workDir, variant ? `data-${variant.name}` : 'data')
  mkdirSync(dataDir)
  // One internal secret for every process of the chain (the distributed mode's five share it).
  const common = {
    ...serviceEnv(dataDir),
    ...(args['log-level'] ? { LOG_LEVEL: args['log-level'] } : {}),
  }
  if (mode === 'embedded') {
    const proc = startChild(
      variant ? `embedded-${variant.name}` : 'embedded',
      'apps/embedded/src/main.ts',
      // Operating settings pass through in embedded mode (one process, one metrics port), so the
      // cost of metrics and traces can be measured: METRICS_PORT=9464 pnpm bench:invoke.
      {
        ...common,
        ...passThrough([
          'METRICS_PORT',
          'OTEL_EXPORTER_OTLP_ENDPOINT',
          'OTEL_TRACES_SAMPLER',
          'OTEL_TRACES_SAMPLER_ARG',
        ]),
        ...variant?.env,
        PORT: String(port),
      },
      logDir,
      nodeFlags,
    )
    children.push(proc)
    await waitReady(`http://127.0.0.1:${port}/health/ready`, proc)
    const url = `http://127.0.0.1:${port}`
    return { url, fronts: [{ name: 'embedded', url }], procs: [proc] }
  }
  const natsUrl = process.env.NATS_URL
  const redisUrl = process.env.REDIS_URL
  if (!natsUrl || !redisUrl) {
    throw new Error(
      '--mode distributed needs NATS_URL and REDIS_URL (e.g. nats://127.0.0.1:4222, redis://127.0.0.1:6379)',
    )
  }
  const gatewayNames = replicaNames('gateway', gateways)
  const renderNames = replicaNames('render', renders)
  const ports: Record<string, number> = {}
  for (const name of ['identity', 'prompts', ...renderNames, 'webhooks', ...gatewayNames]) {
    ports[name] = gatewayNames[0] === name ? port : await freePort()
  }
  const local = (name: string) => `http://127.0.0.1:${ports[name]}`
  const env = {
    ...common,
    NODE_ENV: 'production',
    // TLS is terminated in front of the gateway in production; the bench talks plain HTTP on loopback.
    REQUIRE_HTTPS: 'false',
    HOST: '127.0.0.1',
    NATS_URL: natsUrl,
    REDIS_URL: redisUrl,
    IDENTITY_URL: local('identity'),
    PROMPTS_URL: local('prompts'),
    // Every gateway knows every render replica and takes them in turn (apps/gateway/src/proxy.ts).
    RENDER_URLS: renderNames.map(local).join(','),
    WEBHOOKS_URL: local('webhooks'),
  }
  const procs: Child[] = []
  // In this order, the replicas of one service started together.
  for (const [app, names] of [
    ['identity', ['identity']],
    ['prompts', ['prompts']],
    ['render', renderNames],
    ['webhooks', ['webhooks']],
    ['gateway', gatewayNames],
  ] as const) {
    const started = names.map((name) => {
      const proc = startChild(
        name,
        `apps/${app}/src/server.ts`,
        { ...env, PORT: String(ports[name]) },
        logDir,
        nodeFlags,
      )
      children.push(proc)
      procs.push(proc)
      return proc
    })
    await Promise.all(started.map((proc) => waitReady(`${local(proc.name)}/health/ready`, proc)))
  }
  const fronts = gatewayNames.map((name) => ({ name, url: local(name) }))
  return { url: `http://127.0.0.1:${port}`, fronts, procs }
}

/**
 * Starts the bare chain, answering with `body`. In the scaling bench: G bare proxies in front of R
 * bare handlers, each proxy taking the handlers in turn, the same shape as the full chain's hot path.
 */
async function startBare(body: string): Promise<Chain> {
  const port = await freePort()
  const procs: Child[] = []
  if (mode === 'embedded') {
    const front = startChild(
      'bare',
      'bench/src/bare.ts',
      { BARE_ROLE: 'both', PORT: String(port), BARE_BODY: body },
      logDir,
      nodeFlags,
    )
    procs.push(front)
    children.push(front)
    await waitReady(`http://127.0.0.1:${port}/health`, front)
    const url = `http://127.0.0.1:${port}`
    return { url, fronts: [{ name: 'bare', url }], procs }
  }
  const start = async (names: string[], env: Record<string, string>, first?: number) => {
    const started: Array<{ name: string; url: string }> = []
    const ready: Promise<void>[] = []
    for (const name of names) {
      const own = started.length === 0 && first !== undefined ? first : await freePort()
      const proc = startChild(name, 'bench/src/bare.ts', { ...env, PORT: String(own) }, logDir, nodeFlags)
      procs.push(proc)
      children.push(proc)
      started.push({ name, url: `http://127.0.0.1:${own}` })
      ready.push(waitReady(`http://127.0.0.1:${own}/health`, proc))
    }
    await Promise.all(ready)
    return started
  }
  const upstreams = await start(replicaNames('bare-upstream', renders), {
    BARE_ROLE: 'upstream',
    BARE_BODY: body,
  })
  const fronts = await start(
    replicaNames('bare-proxy', gateways),
    { BARE_ROLE: 'proxy', UPSTREAM_URL: upstreams.map((u) => u.url).join(',') },
    port,
  )
  return { url: `http://127.0.0.1:${port}`, fronts, procs }
}

/** A process whose CPU time a run accounts for. */
interface Tracked {
  name: string
  pid: number | undefined
}

/** What the bench reads of one load run: one autocannon's, or several taken together. */
interface Figures {
  requests: number
  reqPerSec: number
  seconds: number
  p50: number
  p99: number
  max: number
}

const figures = (r: Result): Figures => ({
  requests: r.requests.total,
  reqPerSec: r.requests.average,
  seconds: r.duration,
  p50: r.latency.p50,
  p99: r.latency.p99,
  max: r.latency.max,
})

/** The lower median, as the bench has always taken it. */
function median(values: number[]): number {
  const sorted = [...values].sort((a, b) => a - b)
  return sorted[Math.floor((sorted.length - 1) / 2)] ?? Number.NaN
}

/**
 * Runs taken together: side by side (the G generators of one round: rates add up) or one after the
 * other (rounds: requests over seconds). p50 is the median of the medians, p99 and max the worst
 * (autocannon keeps no histogram to merge).
 */
function together(runs: Figures[], sideBySide: boolean): Figures {
  const requests = runs.reduce((a, r) => a + r.requests, 0)
  const seconds = sideBySide
    ? Math.max(...runs.map((r) => r.seconds))
    : runs.reduce((a, r) => a + r.seconds, 0)
  return {
    requests,
    reqPerSec: sideBySide ? runs.reduce((a, r) => a + r.reqPerSec, 0) : requests / seconds,
    seconds,
    p50: median(runs.map((r) => r.p50)),
    p99: Math.max(...runs.map((r) => r.p99)),
    max: Math.max(...runs.map((r) => r.max)),
  }
}

/** One load run (one round), with the CPU each process spent on it. */
interface Run {
  result: Figures
  /** Each front process's own figures, in the order of the chain's fronts. */
  byFront: Figures[]
  /** CPU seconds, by process (the chain's, the servers it uses, and the load generators'). */
  cpu: Record<string, number>
  /** CPU seconds of each of the chain's processes' main thread (processes.ts, mainThreadSeconds). */
  mainThread: Record<string, number>
  /** CPU seconds the rest of the machine used meanwhile, and the machine's total (all cores). */
  otherBusy: number
  machineTotal: number
}

/**
 * Loads every front of a chain for `seconds`: with autocannon in this process (G = R = 1), or with
 * one generator process per front, all started together. Every response is checked in every
 * generator (`expectBody`, status, timeouts): one failure anywhere fails the bench.
 */
async function load(
  chain: Chain,
  path: string,
  headers: Record<string, string>,
  body: string,
  expectBody: string,
  seconds: number,
  procs: Tracked[],
): Promise<Run> {
  const jobs: Options[] = chain.fronts.map((front) => ({
    url: `${front.url}${path}`,
    method: 'POST',
    headers,
    body,
    connections,
    duration: seconds,
    expectBody,
    timeout: 10,
    ...(rate !== undefined ? { overallRate: rate } : {}),
  }))
  const before = procs.map((c) => cpuSeconds(c.pid))
  const mainBefore = procs.map((c) => mainThreadSeconds(c.pid))
  const selfBefore = process.cpuUsage()
  const machineBefore = machineSeconds()
  const results: Result[] = scaled
    ? await Promise.all(
        jobs.map((job, i) => {
          const generator = generators[i]
          if (!generator) throw new Error(`no load generator for ${job.url}`)
          return generator.run(job)
        }),
      )
    : await Promise.all(jobs.map((job) => autocannon(job)))
  const machine = machineSeconds()
  results.forEach((result, i) => {
    const failed = result.errors + result.timeouts + result.non2xx + result.mismatches
    if (failed > 0) {
      throw new Error(
        `${jobs[i]?.url}: ${result.errors} errors, ${result.timeouts} timeouts, ${result.non2xx} non-2xx, ${result.mismatches} wrong bodies`,
      )
    }
  })
  const cpu: Record<string, number> = {}
  const mainThread: Record<string, number> = {}
  let ours = 0
  procs.forEach((c, i) => {
    const used = cpuSeconds(c.pid) - (before[i] ?? 0)
    ours += used
    cpu[c.name] = used
    mainThread[c.name] = mainThreadSeconds(c.pid) - (mainBefore[i] ?? 0)
  })
  // This process: the load generator itself by default; in the scaling bench, only the coordination.
  const self = process.cpuUsage(selfBefore)
  const selfName = scaled ? 'bench' : 'autocannon'
  cpu[selfName] = (self.user + self.system) / 1e6
  ours += cpu[selfName]
  const byFront = results.map(figures)
  return {
    result: byFront.length === 1 && byFront[0] ? byFront[0] : together(byFront, true),
    byFront,
    cpu,
    mainThread,
    otherBusy: Math.max(0, machine.busy - machineBefore.busy - ours),
    machineTotal: machine.total - machineBefore.total,
  }
}

/** Several runs of one chain taken together. */
interface Summary extends Figures {
  cpuPerRequest: Record<string, number>
  otherLoad: number
  /** Each front process's figures over the runs (the scaling bench's per-gateway view). */
  byFront: Figures[]
}

function summarize(runs: Run[]): Summary {
  const all = together(
    runs.map((r) => r.result),
    false,
  )
  const cpuPerRequest: Record<string, number> = {}
  for (const r of runs) {
    for (const [name, used] of Object.entries(r.cpu)) {
      cpuPerRequest[name] = (cpuPerRequest[name] ?? 0) + (used * 1e6) / all.requests
    }
  }
  const fronts = runs[0]?.byFront.length ?? 0
  return {
    ...all,
    cpuPerRequest,
    otherLoad: runs.reduce((a, r) => a + r.otherBusy, 0) / runs.reduce((a, r) => a + r.machineTotal, 0),
    byFront: Array.from({ length: fronts }, (_, i) =>
      together(
        runs.flatMap((r) => r.byFront[i] ?? []),
        false,
      ),
    ),
  }
}

const fmt = (n: number, digits = 1) => n.toFixed(digits)
const describe = (name: string, s: Summary, runs: Run[], chain: Chain) =>
  `${name}: ${fmt(s.reqPerSec, 0)} req/s (runs: ${runs.map((r) => fmt(r.result.reqPerSec, 0)).join(', ')}), latency p50 ${fmt(s.p50)} ms, p99 ${fmt(s.p99)} ms, max ${fmt(s.max)} ms; ${s.requests} requests, ${scaled ? `${connections * chain.fronts.length} connections (${connections} per load generator)` : `${connections} connections`}\n` +
  (scaled
    ? `  per front process (its own load generator): ${s.byFront
        .map(
          (f, i) =>
            `${chain.fronts[i]?.name} ${fmt(f.reqPerSec, 0)} req/s p50 ${fmt(f.p50)} ms p99 ${fmt(f.p99)} ms`,
        )
        .join(', ')}\n`
    : '') +
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
  log(
    scaled
      ? `bench invoke: mode ${mode}, target ${target}, ${gateways} gateway(s) × ${renders} render(s), one load generator process per gateway with ${connections} connections each, ${warmup} s warm-up, ${duration} s per run`
      : `bench invoke: mode ${mode}, target ${target}, ${connections} connections, ${warmup} s warm-up, ${duration} s per run`,
  )
  const full = await startFull()
  const gateway = full.url
  const { token, apiKey, promptId, path, body, headers, expected } = await prepare(gateway, target)
  log(`full chain answers ${expected.length} bytes: ${expected.slice(0, 100)}...`)
  // Every other gateway (and, taken in turn, every render replica) answers the very same bytes.
  for (const front of full.fronts.slice(1)) {
    const res = await fetch(`${front.url}${path}`, { method: 'POST', headers, body })
    const text = await res.text()
    if (res.status !== 200 || text !== expected)
      throw new Error(`${front.name} answered ${res.status}: ${text}`)
  }

  // The bare handler answers the very bytes the full chain does.
  // In the distributed mode the chain also uses Redis (a rate-limit call per request): its CPU counts.
  const servers = mode === 'distributed' ? findServers(['redis-server']) : []
  const bareChain = await startBare(expected)
  if (scaled) {
    for (const front of full.fronts) {
      const generator = startLoadGenerator(front.name.replace('gateway', 'autocannon'), logDir)
      generators.push(generator)
      children.push(generator)
    }
    await Promise.all(generators.map((g) => g.ready))
  }

  log('warming up')
  const tracked = (procs: Child[]): Tracked[] => procs.map((c) => ({ name: c.name, pid: c.child.pid }))
  // The generators load one chain at a time: their CPU counts for the chain they loaded.
  const fullProcs: Tracked[] = [...tracked(full.procs), ...servers, ...tracked(generators)]
  const bareProcs: Tracked[] = [...tracked(bareChain.procs), ...tracked(generators)]
  const runBare = (seconds: number) => load(bareChain, path, headers, body, expected, seconds, bareProcs)
  const runFull = (seconds: number) => load(full, path, headers, body, expected, seconds, fullProcs)
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
  log(describe('bare', b, bareRuns, bareChain))
  log(describe('full', f, fullRuns, full))
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
  log(`  bench${scaled ? '' : ' (autocannon)'}: ${fmt(peakRssMiB(process.pid) ?? Number.NaN)} MiB`)

  // On a shared machine the throughput ratio moves with other load; the ratio of each adjacent
  // pair of rounds and the CPU the chains spent per request show how much of it is noise.
  const chainCpu = (s: Summary) =>
    Object.entries(s.cpuPerRequest)
      .filter(([name]) => !/^(autocannon\d*|bench)$/.test(name))
      .reduce((a, [, us]) => a + us, 0)
  const pairs = fullRuns.map((r, i) => r.result.reqPerSec / (bareRuns[i]?.result.reqPerSec ?? Number.NaN))
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

/** --tracing: off, on at 1.0 and on at 0.1, in interleaved rounds. */
async function mainTracing(): Promise<void> {
  log(
    `bench invoke --tracing: mode embedded, ${connections} connections, ${warmup} s warm-up, ${duration} s per variant`,
  )
  const sink = await startSink()
  const traced = (ratio: string) => tracedEnv(sink.url, ratio)
  const variants = [
    { name: 'off', label: 'off', env: {} },
    { name: 'ratio1', label: '1.0', env: traced('1') },
    control
      ? { name: 'off2', label: third, env: {} }
      : { name: `ratio${third.replace('.', '')}`, label: third, env: traced(third) },
  ]
  // Started in turn (off 1, 1.0 1, 0.1 1, off 2, ...), so that no variant gets one stretch of
  // the run's starts. On the 2-core VM an off/off/0.1 run (the same code twice) measured the two
  // off variants 13 % apart with two processes each started in sequence (745 and 661 µs a
  // request), 5 % apart with four each started in turn (842 and 802 µs).
  const chains = variants.map((variant) => ({
    ...variant,
    members: [] as { chain: Chain; run: (seconds: number) => Promise<Run> }[],
    runs: [] as Run[],
  }))
  for (let k = 0; k < processes; k++) {
    for (const c of chains) {
      const chain = await startFull({ name: processes > 1 ? `${c.name}-${k + 1}` : c.name, env: c.env })
      const prepared = await prepare(chain.url, target)
      const procs: Tracked[] = chain.procs.map((p) => ({ name: p.name, pid: p.child.pid }))
      const run = (seconds: number) =>
        load(chain, prepared.path, prepared.headers, prepared.body, prepared.expected, seconds, procs)
      c.members.push({ chain, run })
    }
  }
  log(processes > 1 ? `warming up (${processes} processes a variant)` : 'warming up')
  // Twice each: the first time a process's connections close (the end of its first load), V8
  // throws away the optimized code of some 70 of Node's stream and HTTP functions ("dependent
  // prototype chain changed" in --trace-deopt) and compiles them again under the next load. With
  // one warm-up that happened in each process's first measured round, which read 3-23 % slower
  // than its second in every variant (2026-12-04, bench/README.md); the second warm-up takes it.
  for (let pass = 0; pass < 2; pass++) for (const c of chains) for (const m of c.members) await m.run(warmup)
  // --rate: what each process spends with no load (its timers and pollers), so that the CPU a
  // request can be read above it: at a fixed rate the idle share is the same µs a request for every
  // variant and would only dilute their ratio.
  const idlePerSecond = new Map<string, number>()
  if (rate !== undefined) {
    const idleSeconds = 6
    // After the warm-up's last spans went out (the exporter sends within a second).
    await new Promise((r) => setTimeout(r, 2_000))
    const all = chains.flatMap((c) => c.members.flatMap((m) => m.chain.procs))
    const before = all.map((p) => cpuSeconds(p.child.pid))
    await new Promise((r) => setTimeout(r, idleSeconds * 1000))
    all.forEach((p, i) => {
      idlePerSecond.set(p.name, (cpuSeconds(p.child.pid) - (before[i] ?? 0)) / idleSeconds)
    })
    log(
      `idle CPU (no load, ${idleSeconds} s): ${all.map((p) => `${p.name} ${fmt((idlePerSecond.get(p.name) ?? 0) * 100)} %`).join(', ')}`,
    )
  }
  const exportedBefore = { ...sink.counts }
  const slice = duration / rounds
  for (let i = 0; i < rounds; i++) {
    if (args.together) {
      // All three at once, each with its own connections: the machine's moods weigh on all alike,
      // and the processes share the CPU, so the one that needs more a request serves fewer.
      const runs = await Promise.all(chains.map((c) => c.members[i % processes]?.run(slice)))
      runs.forEach((r, j) => {
        if (r) chains[j]?.runs.push(r)
      })
      continue
    }
    // The order turns each round: off, 1.0, 0.1; 1.0, 0.1, off; ...; round i loads process i mod P.
    for (let j = 0; j < chains.length; j++) {
      const c = chains[(i + j) % chains.length]
      const m = c?.members[i % processes]
      if (c && m) c.runs.push(await m.run(slice))
    }
  }
  const summaries = chains.map((c) => ({ ...c, summary: summarize(c.runs) }))
  for (const c of summaries) {
    const first = c.members[0]
    if (first) log(describe(`tracing ${c.label}`, c.summary, c.runs, first.chain))
  }
  // Loaded together, each variant's "other processes" are the other two.
  if (!args.together && summaries.some((c) => c.summary.otherLoad > 0.15)) {
    log('  note: the machine was busy with other work during the runs; the figures above carry that noise')
  }
  log(
    `OTLP sink: ${sink.counts.requests - exportedBefore.requests} export requests, ${fmt((sink.counts.bytes - exportedBefore.bytes) / 1024 / 1024)} MiB during the measured rounds`,
  )
  const [off, all, tenth] = summaries
  if (!off || !all || !tenth) throw new Error('three variants expected')
  const serviceCpu = (s: Summary) =>
    Object.entries(s.cpuPerRequest)
      .filter(([name]) => name.startsWith('embedded'))
      .reduce((a, [, us]) => a + us, 0)
  const perRound = (c: typeof off) => {
    const each = c.runs.map((r, i) => r.result.reqPerSec / (off.runs[i]?.result.reqPerSec ?? Number.NaN))
    return `${each.map((r) => r.toFixed(2)).join(', ')} (median ${fmt(median(each), 2)})`
  }
  log(
    `per-round ratios to off: 1.0 ${perRound(all)}; ${third} ${perRound(tenth)}; CPU per request of the service: off ${fmt(serviceCpu(off.summary), 0)} µs, 1.0 ${fmt(serviceCpu(all.summary), 0)} µs, ${third} ${fmt(serviceCpu(tenth.summary), 0)} µs`,
  )
  // The main thread's CPU a request, all rounds and processes of a variant together: what limits a
  // saturated service, without the GC and compiler threads' share, which moves by far more between
  // processes (processes.ts, mainThreadSeconds). Each process's own figure follows, to show the spread.
  const mainThread = (c: typeof off) => {
    const by = new Map<string, { seconds: number; requests: number }>()
    const total = { seconds: 0, requests: 0 }
    for (const r of c.runs) {
      for (const [name, seconds] of Object.entries(r.mainThread)) {
        if (!name.startsWith('embedded')) continue
        const acc = by.get(name) ?? { seconds: 0, requests: 0 }
        acc.seconds += seconds
        acc.requests += r.result.requests
        by.set(name, acc)
        total.seconds += seconds
        total.requests += r.result.requests
      }
    }
    const each = [...by.values()].map((b) => fmt((b.seconds * 1e6) / b.requests, 0)).join(', ')
    return { us: (total.seconds * 1e6) / total.requests, each }
  }
  const [m0, m1, m01] = [mainThread(off), mainThread(all), mainThread(tenth)]
  log(
    `main thread CPU per request: off ${fmt(m0.us, 0)} µs (${m0.each}), 1.0 ${fmt(m1.us, 0)} µs (${m1.each}; ${fmt((m1.us / m0.us - 1) * 100)} %), ${third} ${fmt(m01.us, 0)} µs (${m01.each}; ${fmt((m01.us / m0.us - 1) * 100)} %)`,
  )
  if (rate !== undefined) {
    // The service's CPU over the measured rounds less its idle CPU over the same seconds, a request.
    const aboveIdle = (c: typeof off) => {
      let used = 0
      let requests = 0
      for (const r of c.runs) {
        requests += r.result.requests
        for (const [name, seconds] of Object.entries(r.cpu)) {
          if (name.startsWith('embedded')) used += seconds - (idlePerSecond.get(name) ?? 0) * r.result.seconds
        }
      }
      return (used * 1e6) / requests
    }
    const [a0, a1, a01] = [aboveIdle(off), aboveIdle(all), aboveIdle(tenth)]
    log(
      `at ${rate} req/s each (achieved: off ${fmt(off.summary.reqPerSec, 0)}, 1.0 ${fmt(all.summary.reqPerSec, 0)}, ${third} ${fmt(tenth.summary.reqPerSec, 0)}), CPU per request above idle: off ${fmt(a0, 0)} µs, 1.0 ${fmt(a1, 0)} µs (${fmt((a1 / a0 - 1) * 100)} %), ${third} ${fmt(a01, 0)} µs (${fmt((a01 / a0 - 1) * 100)} %)`,
    )
  }
  for (const child of children) log(`  peak RSS ${child.name}: ${fmt(child.peakRssMiB() ?? Number.NaN)} MiB`)
  sink.close()
  log(
    `tracing: 1.0/off ${(all.summary.reqPerSec / off.summary.reqPerSec).toFixed(2)}, ${third}/off ${(tenth.summary.reqPerSec / off.summary.reqPerSec).toFixed(2)} (off ${fmt(off.summary.reqPerSec, 0)} req/s, 1.0 ${fmt(all.summary.reqPerSec, 0)} req/s, ${third} ${fmt(tenth.summary.reqPerSec, 0)} req/s)`,
  )
}

let exitCode = 0
try {
  await (args.tracing ? mainTracing() : main())
} catch (err) {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\nlogs: ${logDir}\n`)
  exitCode = 1
} finally {
  await Promise.all(children.map((c) => c.stop()))
  if (exitCode === 0 && !args['keep-logs']) rmSync(workDir, { recursive: true, force: true })
  else process.stderr.write(`logs kept in ${logDir}\n`)
}
process.exit(exitCode)
