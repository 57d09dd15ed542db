/**
 * The cost of tracing in one process: the embedded service several times in one host process
 * (tracingAbHost.ts), tracing off, on at ratio 1.0, on at 0.1 (and any --ratios), each on its
 * own port and data folder, all exporting to one OTLP sink in this process. The variants are
 * loaded one at a time in short phases, in rotating order, and the host's CPU time is read
 * around each phase: what a request costs each variant, with the same JIT, heap and machine
 * state behind all of them. Beside `bench:invoke --tracing` (a process per variant), whose
 * readings move with each process's own luck (which requests a 0.1 process samples, when it
 * collects, how V8 compiled it) by more than the 5 % asked of it.
 *
 *   pnpm --filter @pm/bench bench:tracing-ab [--ratios 1,0.1] [--phases 24] [--requests 2000]
 *        [--warmup 4000] [--concurrency 16]
 *
 * Last line:
 *   tracing in one process, CPU a request: 1.0/off <r>, 0.1/off <r> (off <N> µs, ...)
 */
import { spawn } from 'node:child_process'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createInterface } from 'node:readline'
import { parseArgs } from 'node:util'
import { freePort, REPO_ROOT } from '@pm/testkit'
import { type Invoker, invoker, prepare, serviceEnv, startSink, tracedEnv } from './invokeSetup.ts'
import { cpuSeconds, entryPath } from './processes.ts'
import { median } from './stats.ts'

const { values: args } = parseArgs({
  options: {
    ratios: { type: 'string', default: '1,0.1' },
    phases: { type: 'string', default: '60' },
    requests: { type: 'string', default: '500' },
    warmup: { type: 'string', default: '4000' },
    concurrency: { type: 'string', default: '16' },
  },
})
const count = (name: keyof typeof args, min: number) => {
  const n = Number(args[name])
  if (!Number.isInteger(n) || n < min) {
    process.stderr.write(`--${name} must be a whole number of at least ${min}\n`)
    process.exit(2)
  }
  return n
}
const phases = count('phases', 1)
const requests = count('requests', 1)
const warmup = count('warmup', 0)
const concurrency = count('concurrency', 1)
const ratios = String(args.ratios)
  .split(',')
  .map((r) => r.trim())
for (const r of ratios) {
  const n = Number(r)
  if (r === '' || !Number.isFinite(n) || n < 0 || n > 1) {
    process.stderr.write(`--ratios: '${r}' is not a ratio from 0 to 1\n`)
    process.exit(2)
  }
}

const dir = mkdtempSync(join(tmpdir(), 'pm-tracing-ab-'))
const sink = await startSink()
const variants = [
  { label: 'off', env: {} as Record<string, string> },
  // Batches sent within 100 ms (the default is 1 s), so that a phase's spans are exported in its
  // own window, which is kept open that long after its last request.
  ...ratios.map((r) => ({
    label: Number(r) === 1 ? '1.0' : r,
    env: { ...tracedEnv(sink.url, r), OTEL_BSP_SCHEDULE_DELAY: '100' },
  })),
]
const envs = []
for (const [i, v] of variants.entries())
  envs.push({ ...serviceEnv(join(dir, `variant-${i}`)), ...v.env, PORT: String(await freePort()) })

const host = spawn(
  process.execPath,
  [
    '--conditions=source',
    '--disable-warning=ExperimentalWarning',
    ...(process.env.X_PROF ? ['--cpu-prof', '--cpu-prof-dir=/tmp/abprof'] : []),
    entryPath('bench/src/tracingAbHost.ts'),
    JSON.stringify(envs),
  ],
  { cwd: REPO_ROOT, env: { PATH: process.env.PATH ?? '' }, stdio: ['ignore', 'pipe', 'inherit'] },
)
const stop = async () => {
  if (host.exitCode === null && host.signalCode === null) {
    const exited = new Promise((resolve) => host.once('exit', resolve))
    host.kill('SIGTERM')
    await exited
  }
  sink.close()
  rmSync(dir, { recursive: true, force: true })
}
try {
  const urls = await new Promise<string[]>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error('host: not ready within 120 s')), 120_000)
    host.once('exit', (code) => reject(new Error(`host exited (${code}) before it was ready`)))
    const lines = createInterface({ input: host.stdout })
    lines.on('line', (line) => {
      if (!line.startsWith('{"urls"')) return
      clearTimeout(timer)
      resolve((JSON.parse(line) as { urls: string[] }).urls)
    })
  })
  const loads: Array<{
    label: string
    invoker: Invoker
    cpu: number
    done: number
    perPhase: number[]
  }> = []
  for (const [i, url] of urls.entries()) {
    const variant = variants[i]
    if (!variant) throw new Error('no variant')
    loads.push({
      ...variant,
      invoker: invoker(variant.label, url, await prepare(url), concurrency),
      cpu: 0,
      done: 0,
      perPhase: [] as number[],
    })
  }
  process.stdout.write(
    `bench tracing-ab: ${loads.map((l) => l.label).join(', ')} in one host process; ${phases} phases of ${requests} invokes each, ${concurrency} at a time, after ${warmup} each\n`,
  )
  for (const l of loads) await l.invoker.load(warmup)
  const pid = host.pid
  // What the host uses a second with no load (its pollers and timers, each variant's), taken
  // off each phase by its length: a dearer variant's phase lasts longer.
  await new Promise((resolve) => setTimeout(resolve, 2000))
  const idleFrom = cpuSeconds(pid)
  const idleStarted = performance.now()
  await new Promise((resolve) => setTimeout(resolve, 4000))
  const idle = (cpuSeconds(pid) - idleFrom) / ((performance.now() - idleStarted) / 1000)
  for (let p = 0; p < phases; p++) {
    for (let j = 0; j < loads.length; j++) {
      const l = loads[(p + j) % loads.length]
      if (!l) continue
      const before = cpuSeconds(pid)
      const started = performance.now()
      await l.invoker.load(requests)
      // The phase's last spans are exported within OTEL_BSP_SCHEDULE_DELAY: in its own window.
      await new Promise((resolve) => setTimeout(resolve, 250))
      const used = cpuSeconds(pid) - before - (idle * (performance.now() - started)) / 1000
      l.cpu += used
      l.done += requests
      l.perPhase.push((used * 1e6) / requests)
    }
  }
  const off = loads[0]
  if (!off) throw new Error('no baseline')
  const us = (l: (typeof loads)[number]) => (l.cpu * 1e6) / l.done
  for (const l of loads) {
    const ratiosByPhase = l.perPhase.map((x, k) => x / (off.perPhase[k] ?? Number.NaN))
    process.stdout.write(
      `${l.label}: ${us(l).toFixed(0)} µs a request (${l.done} requests); per phase, ratio to off: median ${median(ratiosByPhase).toFixed(3)}, ${ratiosByPhase.map((r) => r.toFixed(2)).join(' ')}\n`,
    )
  }
  process.stdout.write(`host idle: ${(idle * 100).toFixed(1)} % of a core, taken off each phase\n`)
  process.stdout.write(
    `OTLP sink: ${sink.counts.requests} export requests, ${(sink.counts.bytes / 2 ** 20).toFixed(1)} MiB\n`,
  )
  process.stdout.write(
    `tracing in one process, CPU a request: ${loads
      .slice(1)
      .map((l) => `${l.label}/off ${(us(l) / us(off)).toFixed(3)}`)
      .join(', ')} (${loads.map((l) => `${l.label} ${us(l).toFixed(0)} µs`).join(', ')})\n`,
  )
  for (const l of loads) await l.invoker.close()
} finally {
  await stop()
}
