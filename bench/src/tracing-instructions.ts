/**
 * The cost of tracing counted in instructions, not timed: the embedded service (as
 * `pnpm bench:invoke --tracing` starts it) tracing off, on at ratio 1.0 and on at 0.1, each run
 * under Valgrind's callgrind, which counts the instructions every thread of the process executes
 * (`Ir`). A timed bench on a shared VM moves by more than the 5 % asked of tracing at 0.1 (two
 * processes of the same untraced code measured 2-13 % apart there); an instruction count does
 * not depend on the machine's moods. It still depends on the process's own history: untraced
 * processes repeat their counts to 0.1 %, but a sampled process's work follows which requests it
 * happened to sample (two at 0.1 counted 17 % apart), hence --processes.
 *
 *   node --conditions=source bench/src/tracing-instructions.ts [--requests 2000] [--windows 3]
 *        [--warmup 3000] [--idle 8] [--concurrency 8] [--ratios 1,0.1] [--processes 1]
 *        [--keep-logs] [--perf-map]
 *
 * Each variant starts with counting off; after --warmup invokes (the JIT warmed) counting is
 * turned on and, in each of --windows windows, callgrind counts --idle seconds with no load (the
 * process's timers and pollers) and then --requests invokes, --concurrency at a time. The
 * instructions a request: the load window's, less V8's compilers' and less the idle rate of the
 * rest times the window's length, divided by the requests (window(), below). The variants run
 * side by side; their counts do not depend on it. Needs `valgrind` (Debian: apt-get install
 * valgrind). Under callgrind the service runs about 30 times slower: the defaults take about 10
 * minutes on a 2-core VM. The last line printed is
 *   tracing, instructions a request: 1.0/off <r1>, 0.1/off <r2> (off <N>, 1.0 <M>, 0.1 <K>)
 * where a ratio is the variant's instructions a request over off's (1.04: 4 % more work).
 *
 * What it cannot see: time that is not instructions (cache misses, system calls' kernel side,
 * waits). It counts what the process executes, the kernel's side of its system calls excepted.
 */
import { execFile } from 'node:child_process'
import { mkdirSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs, promisify } from 'node:util'
import { freePort } from '@pm/testkit'
import { type Invoker, invoker, prepare, serviceEnv, startSink, tracedEnv } from './invokeSetup.ts'
import { type Child, startChild, waitReady, wholeOption } from './processes.ts'

const run = promisify(execFile)

const { values: args } = parseArgs({
  options: {
    requests: { type: 'string', default: '2000' },
    windows: { type: 'string', default: '3' },
    warmup: { type: 'string', default: '3000' },
    idle: { type: 'string', default: '8' },
    concurrency: { type: 'string', default: '8' },
    ratios: { type: 'string', default: '1,0.1' },
    'keep-logs': { type: 'boolean', default: false },
    /** Node writes /tmp/perf-<pid>.map (--perf-basic-prof), to name the JIT's code in the kept counts. */
    'perf-map': { type: 'boolean', default: false },
    /** Processes of each variant: a process's JIT and GC luck moves its count by several per cent. */
    processes: { type: 'string', default: '1' },
  },
})
const whole = (name: string, min: number, max: number): number => wholeOption(args, name, min, max)
const REQUESTS = whole('requests', 10, 1_000_000)
const WINDOWS = whole('windows', 1, 100)
const WARMUP = whole('warmup', 0, 1_000_000)
const IDLE_S = whole('idle', 1, 600)
const CONCURRENCY = whole('concurrency', 1, 256)
const PROCESSES = whole('processes', 1, 8)
/** Each traced variant: its ratio, and any settings of its own (`0.1:OTEL_BSP_MAX_EXPORT_BATCH_SIZE=128`). */
const RATIOS = (args.ratios ?? '').split(',').map((spec) => {
  const [ratio = '', ...settings] = spec.trim().split(':')
  const n = Number(ratio)
  if (ratio === '' || !Number.isFinite(n) || n < 0 || n > 1)
    throw new Error(
      `--ratios: numbers from 0 to 1, each with NAME=VALUE settings after a colon, not '${spec}'`,
    )
  const env: Record<string, string> = {}
  for (const setting of settings) {
    const m = /^([A-Z][A-Z0-9_]*)=([\w.]+)$/.exec(setting)
    if (!m?.[1] || m[2] === undefined)
      throw new Error(`--ratios: '${setting}' is not NAME=value (NAME in capitals)`)
    env[m[1]] = m[2]
  }
  return { ratio, settings: settings.join(' '), env }
})

const log = (line: string) => process.stdout.write(`${line}\n`)
const workDir = mkdtempSync(join(tmpdir(), 'pm-bench-instr-'))
const logDir = join(workDir, 'logs')
const countDir = join(workDir, 'callgrind')
mkdirSync(logDir)
mkdirSync(countDir)
const children: Child[] = []

/** Sends callgrind's monitor command to the process (through vgdb), e.g. `-z` (zero) or `-d` (dump). */
async function control(pid: number, ...command: string[]): Promise<void> {
  // The process's environment has no USER or HOST (startChild passes PATH alone); vgdb names its
  // pipes from both, so this call must have neither either.
  await run('callgrind_control', [...command, String(pid)], {
    env: { PATH: process.env.PATH ?? '' },
    timeout: 120_000,
  })
}

/** Instructions by what ran them: V8's compilers (a start-up cost, while the JIT warms), its GC, the rest. */
interface Counts {
  total: number
  compile: number
  gc: number
}

const COMPILE =
  /v8::internal::(compiler|maglev|baseline|interpreter|turboshaft)::|v8::internal::(Parser|Scanner|Compiler|BytecodeGenerator|OptimizingCompileDispatcher)/
const GC =
  /Scaveng|Marking|Mark[A-Z]|Sweep|Evacuat|Compact|v8::internal::Heap::|heap::base::|cppgc::|MemoryAllocator|MemoryChunk|PagedSpace|NewSpace|SemiSpace|RememberedSet|SlotSet|FreeList|LargeObjectSpace|GCTracer|WeakObjects/

/** A dump's instructions by function (callgrind_annotate's self cost), summed by kind. */
async function countsOf(file: string): Promise<Counts> {
  const { stdout } = await run('callgrind_annotate', ['--threshold=100', '--inclusive=no', file], {
    maxBuffer: 256 * 1024 * 1024,
  })
  const counts: Counts = { total: 0, compile: 0, gc: 0 }
  for (const line of stdout.split('\n')) {
    const m = /^\s*([\d,]+) \(\s*[\d.]+%\)\s+(.*)$/.exec(line)
    if (!m?.[1] || m[2] === undefined) continue
    const n = Number(m[1].replaceAll(',', ''))
    if (m[2].startsWith('PROGRAM TOTALS')) counts.total = n
    else if (COMPILE.test(m[2])) counts.compile += n
    else if (GC.test(m[2])) counts.gc += n
  }
  return counts
}

/** The instructions counted since the last zero: a dump, read (and removed unless --keep-logs). */
async function dumpCounts(name: string, pid: number): Promise<Counts> {
  const prefix = `${name}.${pid}.`
  const before = new Set(readdirSync(countDir).filter((f) => f.startsWith(prefix)))
  await control(pid, '-d')
  // The dump is written before the command answers; a moment for the file system all the same.
  for (let tries = 0; tries < 50; tries++) {
    const fresh = readdirSync(countDir).filter((f) => f.startsWith(prefix) && !before.has(f))
    const file = fresh[0] === undefined ? undefined : join(countDir, fresh[0])
    if (file && statSync(file).size > 0 && /^totals:/m.test(readFileSync(file, 'utf8'))) {
      const counts = await countsOf(file)
      if (!args['keep-logs']) rmSync(file)
      return counts
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${name}: callgrind wrote no dump`)
}

interface Variant {
  name: string
  label: string
  env: Record<string, string>
}

interface Started extends Variant {
  proc: Child
  pid: number
  /** Its invokes, `CONCURRENCY` at a time. */
  invokes: Invoker
  /** Each window's instructions a request above idle, the compilers' left out (the steady state's). */
  perRequest: number[]
  /** The same, GC's only. */
  gcPerRequest: number[]
  /** The same, the compilers' only. */
  compilePerRequest: number[]
  idleShare: number[]
}

async function start(variant: Variant): Promise<Started> {
  const port = await freePort()
  const dataDir = join(workDir, `data-${variant.name}`)
  mkdirSync(dataDir)
  const proc = startChild(
    variant.name,
    'apps/embedded/src/main.ts',
    { ...serviceEnv(dataDir), ...variant.env, PORT: String(port) },
    logDir,
    // All of V8's work on the main thread, in an order set by the work itself: compiling and
    // collecting in background threads, as V8 does by default, puts their work into one window
    // or the next as the threads happen to be scheduled (under Valgrind, which runs one thread at
    // a time, by far). The same work is done; the counts of one window then repeat in the next.
    ['--single-threaded', '--predictable-gc-schedule', ...(args['perf-map'] ? ['--perf-basic-prof'] : [])],
    [
      'valgrind',
      '--tool=callgrind',
      '--cache-sim=no',
      '--instr-atstart=no',
      `--callgrind-out-file=${join(countDir, `${variant.name}.%p`)}`,
    ],
  )
  children.push(proc)
  const url = `http://127.0.0.1:${port}`
  // Starting under Valgrind takes about 30 s on the 2-core VM, more with the others starting beside it.
  await waitReady(`${url}/health/ready`, proc, 600_000)
  const pid = proc.child.pid
  if (pid === undefined) throw new Error(`${variant.name}: no pid`)
  const invokes = invoker(variant.name, url, await prepare(url), CONCURRENCY)
  return {
    ...variant,
    proc,
    pid,
    invokes,
    perRequest: [],
    gcPerRequest: [],
    compilePerRequest: [],
    idleShare: [],
  }
}

/**
 * One window of one variant: its idle rate, then the load; the instructions a request above idle.
 * The compilers' are kept apart: the JIT still optimizes (and re-optimizes) after the warm-up, in
 * bursts that land in one window or the next, and in a service that runs for days that cost is
 * gone. GC's stay in (tracing's allocations are its cost), all of the load window's, and are shown
 * apart too. Only the rest is taken above idle: V8 collects garbage when the process goes idle,
 * the requests' garbage, and one such collection in a few seconds of idle, scaled to the load
 * window, would be taken off many times over.
 */
async function window(v: Started): Promise<void> {
  await control(v.pid, '-z')
  const idleFrom = performance.now()
  await new Promise((r) => setTimeout(r, IDLE_S * 1000))
  const idle = await dumpCounts(v.name, v.pid)
  const idleMs = performance.now() - idleFrom
  await control(v.pid, '-z')
  const loadFrom = performance.now()
  await v.invokes.load(REQUESTS)
  const loaded = await dumpCounts(v.name, v.pid)
  // Not below zero: an idle window whose dump came in the middle of a major collection (an
  // incremental marking finalized in a foreground task) lists that collection under each of its
  // frames, so its GC lines can add up to more than the window's total. Taken as they were, such a
  // window's idle rate read negative and its load window 1.8-5.7 M instructions a request, against
  // about 1.2 M in the others (2026-12-03).
  const idleRest = Math.max(0, idle.total - idle.gc - idle.compile)
  const idlePart = (idleRest * (performance.now() - loadFrom)) / idleMs
  v.perRequest.push((loaded.total - loaded.compile - idlePart) / REQUESTS)
  v.gcPerRequest.push(loaded.gc / REQUESTS)
  v.compilePerRequest.push(loaded.compile / REQUESTS)
  v.idleShare.push(idlePart / loaded.total)
}

const mean = (xs: number[]) => xs.reduce((a, b) => a + b, 0) / xs.length
const fmtInstr = (n: number) => `${(n / 1e6).toFixed(3)} M`

try {
  const sink = await startSink()
  const traced = (ratio: string) => ({
    ...tracedEnv(sink.url, ratio),
    // Batches go out full (512 spans), as they do at the rates the timed bench reaches (0.1 at
    // 2,000 requests a second ends 600 spans a second); under callgrind, 30 times slower, the
    // default 1 s would send a batch of a few spans each second, and its cost would be counted
    // to a few requests instead of hundreds.
    OTEL_BSP_SCHEDULE_DELAY: '600000',
  })
  const variants: Variant[] = [
    { name: 'off', label: 'off', env: {} },
    ...RATIOS.map(({ ratio, settings, env }, i) => ({
      name: `ratio${ratio.replace('.', '')}-${i + 1}`,
      label: `${Number(ratio) === 1 ? '1.0' : ratio}${settings ? ` (${settings})` : ''}`,
      env: { ...traced(ratio), ...env },
    })),
  ]
  log(
    `bench tracing-instructions: embedded, under callgrind; ${WARMUP} invokes warm-up, ${WINDOWS} windows of ${IDLE_S} s idle + ${REQUESTS} invokes, ${CONCURRENCY} at a time`,
  )
  const started = await Promise.all(
    variants.flatMap((v) =>
      Array.from({ length: PROCESSES }, (_, k) =>
        start(PROCESSES > 1 ? { ...v, name: `${v.name}-p${k + 1}` } : v),
      ),
    ),
  )
  log(`started: ${started.map((v) => `${v.label} (pid ${v.pid})`).join(', ')}`)
  await Promise.all(started.map((v) => v.invokes.load(WARMUP)))
  // The warm-up's last spans go out within a second; then counting starts.
  await new Promise((r) => setTimeout(r, 2_000))
  await Promise.all(started.map((v) => control(v.pid, '-i', 'on')))
  for (let w = 0; w < WINDOWS; w++) {
    await Promise.all(started.map(window))
    log(
      `window ${w + 1}: ${started.map((v) => `${v.label} ${fmtInstr(v.perRequest[w] ?? Number.NaN)} (GC ${fmtInstr(v.gcPerRequest[w] ?? Number.NaN)}, compilers ${fmtInstr(v.compilePerRequest[w] ?? Number.NaN)})`).join(', ')} instructions a request`,
    )
  }
  // Each variant: its processes' windows together; off's mean is the base of every ratio.
  const byLabel = variants.map((v) => {
    const procs = started.filter((p) => p.label === v.label)
    const all = (k: 'perRequest' | 'gcPerRequest' | 'compilePerRequest' | 'idleShare') =>
      procs.flatMap((p) => p[k])
    return {
      label: v.label,
      procs,
      perRequest: all('perRequest'),
      gc: all('gcPerRequest'),
      compile: all('compilePerRequest'),
      idle: all('idleShare'),
    }
  })
  const off = byLabel[0]
  if (!off) throw new Error('no variant')
  const offMean = mean(off.perRequest)
  const offRest = offMean - mean(off.gc)
  for (const v of byLabel) {
    const m = mean(v.perRequest)
    log(
      `${v.label}: ${fmtInstr(m)} instructions a request, ${(m / offMean).toFixed(3)} of off (GC left out: ${((m - mean(v.gc)) / offRest).toFixed(3)}); of them GC ${fmtInstr(mean(v.gc))}; besides, the compilers ${fmtInstr(mean(v.compile))}; idle share of the load windows ${(mean(v.idle) * 100).toFixed(1)} %; by process ${v.procs.map((p) => fmtInstr(mean(p.perRequest))).join(', ')}, by window ${v.perRequest.map((x) => (x / 1e6).toFixed(3)).join(' ')}`,
    )
  }
  log(`exported to the sink: ${sink.counts.requests} requests, ${sink.counts.bytes} bytes`)
  sink.close()
  await Promise.all(started.map((v) => v.invokes.close()))
  const rest = byLabel.slice(1)
  log(
    `tracing, instructions a request: ${rest.map((v) => `${v.label}/off ${(mean(v.perRequest) / offMean).toFixed(3)}`).join(', ')} (${byLabel.map((v) => `${v.label} ${fmtInstr(mean(v.perRequest))}`).join(', ')})`,
  )
} finally {
  for (const c of children) await c.stop()
  if (args['keep-logs']) log(`logs and counts kept in ${workDir}`)
  else rmSync(workDir, { recursive: true, force: true })
}
