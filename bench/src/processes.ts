import { type ChildProcess, spawn } from 'node:child_process'
import { closeSync, openSync, readdirSync, readFileSync } from 'node:fs'
import { join, resolve as resolvePath } from 'node:path'
import { createInterface } from 'node:readline'
import { REPO_ROOT } from '@pm/testkit'
import type { Options, Result } from 'autocannon'

export interface Child {
  name: string
  child: ChildProcess
  logFile: string
  /** Peak resident set size so far (VmHWM), in MiB; null once the process is gone. */
  peakRssMiB(): number | null
  stop(): Promise<void>
}

/** A /proc stat file's user and system CPU time (Linux), in seconds; NaN once it is gone. */
function statTimes(path: string): { user: number; system: number } {
  try {
    // Fields after the command name (which may hold spaces, hence the last ')'); utime and stime are 14 and 15.
    const stat = readFileSync(path, 'utf8')
    const fields = stat.slice(stat.lastIndexOf(')') + 2).split(' ')
    return { user: Number(fields[11]) / 100, system: Number(fields[12]) / 100 }
  } catch {
    return { user: Number.NaN, system: Number.NaN }
  }
}

/** The CPU time (user + system) in a /proc stat file (Linux), in seconds; NaN once it is gone. */
function statSeconds(path: string): number {
  const { user, system } = statTimes(path)
  return user + system
}

/**
 * What a process's main thread has used so far (Linux): its system CPU time in seconds (the
 * kernel's side of its system calls) and its context switches, voluntary (it waited) and not
 * (the scheduler took the core away). NaN once it is gone.
 */
export function mainThreadKernel(pid: number | undefined): { system: number; switches: number } {
  if (pid === undefined) return { system: Number.NaN, switches: Number.NaN }
  const { system } = statTimes(`/proc/${pid}/task/${pid}/stat`)
  try {
    const status = readFileSync(`/proc/${pid}/task/${pid}/status`, 'utf8')
    const count = (name: string) => Number(new RegExp(`^${name}:\\s*(\\d+)`, 'm').exec(status)?.[1])
    return { system, switches: count('voluntary_ctxt_switches') + count('nonvoluntary_ctxt_switches') }
  } catch {
    return { system: Number.NaN, switches: Number.NaN }
  }
}

/** CPU time (user + system) a process has used so far, in seconds (Linux). */
export function cpuSeconds(pid: number | undefined): number {
  return pid === undefined ? Number.NaN : statSeconds(`/proc/${pid}/stat`)
}

/**
 * CPU time (user + system) a process's main thread has used so far, in seconds (Linux): the
 * thread that runs its JavaScript, the one a saturated Node.js service is limited by. The rest of
 * the process's CPU is V8's helper threads (parallel and concurrent GC, compilers), which moved
 * by up to 40 µs a request between identical processes here, where the main thread moved by under 10.
 */
export function mainThreadSeconds(pid: number | undefined): number {
  return pid === undefined ? Number.NaN : statSeconds(`/proc/${pid}/task/${pid}/stat`)
}

/** CPU time the whole machine has spent busy and in all, in seconds (Linux, all cores). */
export function machineSeconds(): { busy: number; total: number } {
  try {
    const line = readFileSync('/proc/stat', 'utf8').split('\n', 1)[0] ?? ''
    const ticks = line.trim().split(/\s+/).slice(1).map(Number)
    const total = ticks.reduce((a, b) => a + b, 0)
    const idle = (ticks[3] ?? 0) + (ticks[4] ?? 0)
    return { busy: (total - idle) / 100, total: total / 100 }
  } catch {
    return { busy: Number.NaN, total: Number.NaN }
  }
}

/** Local server processes by command name (Linux /proc), e.g. redis-server. */
export function findServers(names: string[]): Array<{ name: string; pid: number }> {
  const found: Array<{ name: string; pid: number }> = []
  for (const entry of readdirSync('/proc')) {
    if (!/^\d+$/.test(entry)) continue
    try {
      const comm = readFileSync(`/proc/${entry}/comm`, 'utf8').trim()
      if (names.includes(comm)) found.push({ name: comm, pid: Number(entry) })
    } catch {
      // gone meanwhile
    }
  }
  return found
}

/** VmHWM of a process from /proc (Linux), in MiB. */
export function peakRssMiB(pid: number | undefined): number | null {
  if (pid === undefined) return null
  try {
    const status = readFileSync(`/proc/${pid}/status`, 'utf8')
    const kb = /^VmHWM:\s+(\d+)\s+kB/m.exec(status)?.[1]
    return kb === undefined ? null : Number(kb) / 1024
  } catch {
    return null
  }
}

/**
 * Where a child's entry point is: the TypeScript source (`bench/src/bare.ts`), or, with
 * PM_BENCH_BUNDLED=<folder> (relative to the repository's root, or absolute), the single-file
 * bundle of that source at the same path under the folder with `.mjs` for `.ts`
 * (`<folder>/bench/src/bare.mjs`). The bundles let the benches run on a machine with Node but
 * without node_modules (scripts/bench-pack.mjs builds them; bench/README.md, "Bundled").
 */
export function entryPath(entry: string, bundled = process.env.PM_BENCH_BUNDLED): string {
  if (!bundled) return join(REPO_ROOT, entry)
  return resolvePath(REPO_ROOT, bundled, entry.replace(/\.ts$/, '.mjs'))
}

/**
 * Starts a TypeScript entry point on Node 24 with its output going straight to a log file, as a
 * deployed service's would go to its collector: the bench process never touches those bytes.
 */
export function startChild(
  name: string,
  entry: string,
  env: Record<string, string>,
  logDir: string,
  nodeFlags: string[] = [],
  /** A command the process runs under, e.g. `['valgrind', '--tool=callgrind']`: node is its last argument. */
  launcher: string[] = [],
): Child {
  return spawnEntry(name, entry, env, logDir, nodeFlags, false, launcher)
}

function spawnEntry(
  name: string,
  entry: string,
  env: Record<string, string>,
  logDir: string,
  nodeFlags: string[],
  piped: boolean,
  launcher: string[] = [],
): Child {
  const logFile = join(logDir, `${name}.log`)
  const fd = openSync(logFile, 'a')
  const nodeArgs = [
    '--conditions=source',
    '--disable-warning=ExperimentalWarning',
    ...nodeFlags,
    entryPath(entry),
  ]
  const [command, ...launcherArgs] = launcher
  const child = spawn(
    command ?? process.execPath,
    command === undefined ? nodeArgs : [...launcherArgs, process.execPath, ...nodeArgs],
    {
      cwd: REPO_ROOT,
      env: { PATH: process.env.PATH ?? '', ...env },
      stdio: piped ? ['pipe', 'pipe', fd] : ['ignore', fd, fd],
    },
  )
  closeSync(fd)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  return {
    name,
    child,
    logFile,
    peakRssMiB: () => (child.exitCode === null ? peakRssMiB(child.pid) : null),
    stop: async () => {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGTERM')
      await exited
    },
  }
}

/** A load generator process (load.ts): runs one autocannon job at a time. */
export interface LoadGenerator extends Child {
  /** Resolves once autocannon is loaded in the child, so that the first job starts at once. */
  ready: Promise<void>
  run(options: Options): Promise<Result>
}

/** Starts load.ts in a process of its own; a job that outlasts its duration by 30 s fails. */
export function startLoadGenerator(name: string, logDir: string): LoadGenerator {
  // stdin and stdout are pipes to the bench; stderr goes to the log file.
  const proc = spawnEntry(name, 'bench/src/load.ts', {}, logDir, [], true)
  const { child } = proc
  const { stdin, stdout } = child
  if (!stdin || !stdout) throw new Error(`load generator ${name}: no pipes`)
  // A write after the child died fails here; the failure itself is reported by its exit.
  stdin.on('error', () => {})
  let waiting: { resolve: (line: string) => void; reject: (err: Error) => void } | null = null
  const failed = () =>
    new Error(`load generator ${name} exited (${child.exitCode ?? child.signalCode}):\n${tail(proc.logFile)}`)
  child.once('exit', () => waiting?.reject(failed()))
  const lines = createInterface({ input: stdout })
  const pending: string[] = []
  lines.on('line', (line) => {
    if (waiting) waiting.resolve(line)
    else pending.push(line)
  })
  const next = (timeoutMs: number) =>
    new Promise<string>((resolve, reject) => {
      const queued = pending.shift()
      if (queued !== undefined) return resolve(queued)
      if (child.exitCode !== null || child.signalCode !== null) return reject(failed())
      const timer = setTimeout(() => {
        waiting = null
        reject(new Error(`load generator ${name}: no answer within ${timeoutMs} ms`))
      }, timeoutMs)
      waiting = {
        resolve: (line) => {
          clearTimeout(timer)
          waiting = null
          resolve(line)
        },
        reject: (err) => {
          clearTimeout(timer)
          waiting = null
          reject(err)
        },
      }
    })
  const ready = next(30_000).then(() => undefined)
  // Failures surface through `ready` or `run`; this keeps an unawaited `ready` from crashing the bench.
  ready.catch(() => {})
  return {
    ...proc,
    ready,
    run: async (options) => {
      await ready
      stdin.write(`${JSON.stringify(options)}\n`)
      return JSON.parse(await next(((options.duration ?? 10) + 30) * 1000)) as Result
    },
  }
}

function tail(file: string, lines = 20): string {
  try {
    return readFileSync(file, 'utf8').trimEnd().split('\n').slice(-lines).join('\n')
  } catch {
    return ''
  }
}

/**
 * Polls `url` until it answers 200; fails early, with the log's tail, if the process exits.
 * 120 s: on a loaded shared machine a process of the chain took longer than 30 s to start.
 */
export async function waitReady(url: string, proc: Child, timeoutMs = 120_000): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < deadline) {
    if (proc.child.exitCode !== null) {
      throw new Error(`${proc.name} exited with ${proc.child.exitCode}:\n${tail(proc.logFile)}`)
    }
    try {
      const res = await fetch(url, { signal: AbortSignal.timeout(2_000) })
      if (res.ok) return
      last = `status ${res.status}`
    } catch (err) {
      last = (err as Error).message
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(`${proc.name}: ${url} not ready after ${timeoutMs} ms (${last})\n${tail(proc.logFile)}`)
}

/** A command-line option that must be a whole number from `min` to `max` (parseArgs' string). */
export function wholeOption(args: Record<string, unknown>, name: string, min: number, max: number): number {
  const n = Number(args[name])
  if (!Number.isInteger(n) || n < min || n > max)
    throw new Error(`--${name}: a whole number from ${min} to ${max}`)
  return n
}
