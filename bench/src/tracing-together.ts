/**
 * The cost of tracing with every process loaded at the same time: `--processes` embedded services
 * of each variant (tracing off, on at ratio 1.0, on at 0.1 by default), all started, then all
 * loaded at once for the whole run, each by its own `--connections` invokes at a time (as fast as
 * it answers, or `--rate` a second). Each process's main-thread CPU a request is read over
 * `--windows` windows of `--seconds` each, less its own idle CPU (timers, pollers).
 *
 *   pnpm --filter @pm/bench bench:tracing-together [--variants off,1,0.1] [--processes 2]
 *        [--connections 8] [--rate 0] [--warmup 20] [--windows 12] [--seconds 4]
 *
 * Why another design: on a shared 2-core VM the machine's speed moves by 10-30 % from one second
 * to the next, and the default `bench:invoke --tracing` loads one variant after another, so that
 * each variant reads a different stretch of those moods (two untraced variants read 0.93 apart in
 * one run). Loaded at the same moment, processes move together: four untraced processes read
 * 591-883 µs a request from window to window yet within 3-5 % of each other in every window, and
 * within 1.5 % over the run (bench/README.md, "All at once"). What this reads is the main
 * thread's CPU a request with the machine shared by every process, not one process's throughput
 * with a core of its own: at saturation here a request costs more than alone (context switches,
 * colder caches), and a fixed rate (`--rate`) measures yet another regime.
 *
 * A variant is `off` or a ratio (parentbased_traceidratio, spans to an OTLP sink in this
 * process), optionally followed by `:NAME=VALUE` settings for its processes, e.g.
 * `0.1:OTEL_BSP_SCHEDULE_DELAY=5000`. The last line printed is
 *   tracing, all at once: 1.0/off <r1>, 0.1/off <r2> (main-thread CPU a request: off <N> µs, ...)
 * where a ratio is off's main-thread CPU a request over the variant's, as the default bench's
 * throughput ratios read (0.95: the variant needs 5 % more CPU a request, 1/0.95).
 * Under each variant's figure a second line gives, a request, the main thread's system time and
 * context switches and the CPU of all the process's threads (V8's compilers and GC helpers
 * included), to tell where a cost the main thread's figure shows is spent.
 */
import { mkdirSync, mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { freePort } from '@pm/testkit'
import { type Invoker, invoker, prepare, serviceEnv, startSink, tracedEnv } from './invokeSetup.ts'
import {
  type Child,
  cpuSeconds,
  mainThreadKernel,
  mainThreadSeconds,
  startChild,
  waitReady,
  wholeOption,
} from './processes.ts'
import { mean, median } from './stats.ts'

const { values: args } = parseArgs({
  options: {
    variants: { type: 'string', default: 'off,1,0.1' },
    processes: { type: 'string', default: '2' },
    connections: { type: 'string', default: '8' },
    /** Requests a second each process gets; 0: as fast as it answers. */
    rate: { type: 'string', default: '0' },
    warmup: { type: 'string', default: '20' },
    windows: { type: 'string', default: '12' },
    seconds: { type: 'string', default: '4' },
    'keep-logs': { type: 'boolean', default: false },
  },
})
const whole = (name: string, min: number, max: number): number => wholeOption(args, name, min, max)
const processes = whole('processes', 1, 8)
const connections = whole('connections', 1, 64)
const rate = whole('rate', 0, 100_000)
const warmup = whole('warmup', 1, 600)
const windows = whole('windows', 1, 200)
const seconds = whole('seconds', 1, 600)

interface Variant {
  label: string
  ratio: string
  env: Record<string, string>
}
const variants: Variant[] = String(args.variants)
  .split(',')
  .map((spec) => {
    const [ratio = '', ...settings] = spec.split(':')
    if (ratio !== 'off' && !(Number(ratio) >= 0 && Number(ratio) <= 1))
      throw new Error(`--variants: "${spec}": off or a ratio from 0 to 1, then :NAME=VALUE settings`)
    const env: Record<string, string> = {}
    for (const setting of settings) {
      const at = setting.indexOf('=')
      if (!/^[A-Z][A-Z0-9_]*$/.test(setting.slice(0, at)))
        throw new Error(`--variants: "${setting}": NAME=VALUE, NAME in capitals`)
      env[setting.slice(0, at)] = setting.slice(at + 1)
    }
    return { label: spec, ratio, env }
  })
if (!variants.some((v) => v.label === 'off')) throw new Error('--variants: one must be off, the baseline')
if (new Set(variants.map((v) => v.label)).size !== variants.length) throw new Error('--variants: each once')

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms))
const log = (line: string) => console.log(line)
const fmt = (n: number, digits = 1) => n.toFixed(digits)

interface Member {
  variant: Variant
  name: string
  proc: Child
  invokes: Invoker
  /** Requests answered since the counter was last reset. */
  answered: number
  idlePerSecond: number
  /** Main-thread CPU a request in each window, in µs. */
  windows: number[]
  /** Over all windows: main-thread seconds above idle, requests. */
  cpu: number
  requests: number
  /** Over all windows: the main thread's system seconds and context switches, every thread's CPU seconds (idle included). */
  system: number
  switches: number
  allThreads: number
}

const workDir = mkdtempSync(join(tmpdir(), 'pm-bench-together-'))
const sink = await startSink()
const members: Member[] = []
let exitCode = 0
try {
  log(
    `bench tracing-together: ${processes} process(es) of each of ${variants.map((v) => v.label).join(', ')}, all loaded at once, ${connections} invokes at a time each${rate ? ` at ${rate} a second` : ', as fast as each answers'}; ${warmup} s warm-up, ${windows} windows of ${seconds} s`,
  )
  // Started in turn (off 1, 1.0 1, 0.1 1, off 2, ...), each ready before the next.
  for (let k = 1; k <= processes; k++) {
    for (const variant of variants) {
      const name = `${variant.label.replace(/[^A-Za-z0-9.]+/g, '_')}-${k}`
      const dataDir = join(workDir, name)
      mkdirSync(dataDir)
      const port = await freePort()
      const proc = startChild(
        name,
        'apps/embedded/src/main.ts',
        {
          ...serviceEnv(dataDir),
          ...(variant.ratio === 'off' ? {} : tracedEnv(sink.url, variant.ratio)),
          ...variant.env,
          PORT: String(port),
        },
        workDir,
      )
      const gateway = `http://127.0.0.1:${port}`
      await waitReady(`${gateway}/health/ready`, proc)
      const invokes = invoker(name, gateway, await prepare(gateway), connections)
      members.push({
        variant,
        name,
        proc,
        invokes,
        answered: 0,
        idlePerSecond: 0,
        windows: [],
        cpu: 0,
        requests: 0,
        system: 0,
        switches: 0,
        allThreads: 0,
      })
    }
  }

  // Each member's connections: back to back, or paced to `rate` a second between them. The first
  // failed invoke stops every load; `finish` rethrows it once the load is awaited.
  let loading = false
  let failure: unknown
  const finish = async (load: Promise<unknown>) => {
    loading = false
    await load
    if (failure !== undefined) throw failure
  }
  const load = () => {
    loading = true
    return Promise.all(
      members.map(async (m) => {
        const start = performance.now()
        let sent = 0
        await Promise.all(
          Array.from({ length: connections }, async () => {
            while (loading) {
              if (rate > 0) {
                const wait = start + (sent++ * 1000) / rate - performance.now()
                if (wait > 0) await sleep(wait)
                if (!loading) break
              }
              try {
                await m.invokes.invoke()
              } catch (err) {
                failure ??= err
                loading = false
                break
              }
              m.answered++
            }
          }),
        )
      }),
    )
  }

  let running = load()
  await sleep(warmup * 1000)
  await finish(running)
  // What each process spends with no load, after the warm-up's last spans went out (within 1 s).
  await sleep(2_000)
  const idleSeconds = 8
  const before = members.map((m) => mainThreadSeconds(m.proc.child.pid))
  await sleep(idleSeconds * 1000)
  members.forEach((m, i) => {
    m.idlePerSecond = (mainThreadSeconds(m.proc.child.pid) - (before[i] ?? 0)) / idleSeconds
  })
  log(
    `idle main-thread CPU: ${members.map((m) => `${m.name} ${fmt(m.idlePerSecond * 1000)} ms/s`).join(', ')}`,
  )

  running = load()
  await sleep(3_000)
  for (let w = 1; w <= windows && failure === undefined; w++) {
    const at = members.map((m) => {
      m.answered = 0
      const pid = m.proc.child.pid
      return { main: mainThreadSeconds(pid), kernel: mainThreadKernel(pid), all: cpuSeconds(pid) }
    })
    const t0 = performance.now()
    await sleep(seconds * 1000)
    const elapsed = (performance.now() - t0) / 1000
    members.forEach((m, i) => {
      const pid = m.proc.child.pid
      const from = at[i]
      const used = mainThreadSeconds(pid) - (from?.main ?? Number.NaN) - m.idlePerSecond * elapsed
      const requests = m.answered
      const kernel = mainThreadKernel(pid)
      m.cpu += used
      m.requests += requests
      m.system += kernel.system - (from?.kernel.system ?? Number.NaN)
      m.switches += kernel.switches - (from?.kernel.switches ?? Number.NaN)
      m.allThreads += cpuSeconds(pid) - (from?.all ?? Number.NaN)
      m.windows.push(requests > 0 ? (used * 1e6) / requests : Number.NaN)
    })
    log(
      `window ${w}: ${members.map((m) => `${m.name} ${fmt(m.windows.at(-1) ?? Number.NaN, 0)}`).join(', ')} µs`,
    )
  }
  await finish(running)

  const perProcess = (m: Member) => (m.cpu * 1e6) / m.requests
  const byVariant = variants.map((variant) => {
    const own = members.filter((m) => m.variant === variant)
    // A window's figure for the variant: its processes' mean in that window.
    const windowMeans = Array.from({ length: windows }, (_, w) =>
      mean(own.map((m) => m.windows[w] ?? Number.NaN)),
    )
    return { variant, own, us: mean(own.map(perProcess)), windowMeans }
  })
  const off = byVariant.find((v) => v.variant.label === 'off')
  if (!off) throw new Error('no off variant')
  for (const v of byVariant) {
    const windowRatios = v.windowMeans.map((x, w) => x / (off.windowMeans[w] ?? Number.NaN))
    log(
      `${v.variant.label}: main-thread CPU a request ${fmt(v.us, 1)} µs (${fmt((v.us / off.us - 1) * 100)} % over off; processes ${v.own.map((m) => fmt(perProcess(m), 0)).join(', ')}; ${v.own.map((m) => fmt(m.requests / (windows * seconds), 0)).join(', ')} req/s); by window over off: median ${fmt((median(windowRatios) - 1) * 100)} %, ${fmt((Math.min(...windowRatios) - 1) * 100)} to ${fmt((Math.max(...windowRatios) - 1) * 100)} %`,
    )
    const per = (pick: (m: Member) => number, scale: number) =>
      mean(v.own.map((m) => (pick(m) * scale) / m.requests))
    log(
      `  ${v.variant.label}, a request: main-thread system time ${fmt(per((m) => m.system, 1e6))} µs, context switches ${fmt(
        per((m) => m.switches, 1),
        2,
      )}, all threads' CPU ${fmt(per((m) => m.allThreads, 1e6))} µs (idle included)`,
    )
  }
  const others = byVariant.filter((v) => v !== off)
  log(
    `tracing, all at once: ${others.map((v) => `${v.variant.label === '1' ? '1.0' : v.variant.label}/off ${(off.us / v.us).toFixed(2)}`).join(', ')} (main-thread CPU a request: off ${fmt(off.us, 0)} µs, ${others.map((v) => `${v.variant.label} ${fmt(v.us, 0)} µs`).join(', ')})`,
  )
} catch (err) {
  process.stderr.write(`bench failed: ${(err as Error).stack ?? String(err)}\nlogs: ${workDir}\n`)
  exitCode = 1
} finally {
  await Promise.all(members.map((m) => m.invokes.close().catch(() => {})))
  await Promise.all(members.map((m) => m.proc.stop()))
  sink.close()
  if (exitCode === 0 && !args['keep-logs']) rmSync(workDir, { recursive: true, force: true })
  else process.stderr.write(`logs kept in ${workDir}\n`)
}
process.exit(exitCode)
