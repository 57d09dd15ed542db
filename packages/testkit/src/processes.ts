import { type ChildProcess, execFileSync, spawn } from 'node:child_process'
import { closeSync, mkdirSync, openSync, statSync, unlinkSync } from 'node:fs'
import { createServer } from 'node:net'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { entryArgs } from './bundles.ts'
import { REPO_ROOT } from './root.ts'

export { REPO_ROOT }

/** Ports handed out by this process: never twice. */
const handedOut = new Set<number>()

/**
 * Ports handed out by any test process on this machine lately, one empty file each: the test
 * runners start several processes side by side (vitest's workers, turbo's packages), each with
 * stacks of its own, and a port one of them checked free could be picked by another before the
 * first one's service listened on it; that service then failed to listen, and its stack's
 * readiness check was answered by the other stack's service (a sign-up refused with the other
 * stack's secret, 401). A reservation is taken with an exclusive create, so two processes never
 * hold the same port; it is free again RESERVED_MS later (by then its server listens or is gone).
 */
const RESERVATIONS = join(tmpdir(), 'pm-test-ports')
const RESERVED_MS = 15 * 60_000

let reservationsMade = false

function reserve(port: number): boolean {
  if (!reservationsMade) {
    mkdirSync(RESERVATIONS, { recursive: true })
    reservationsMade = true
  }
  const file = join(RESERVATIONS, String(port))
  const create = () => closeSync(openSync(file, 'wx'))
  try {
    create()
    return true
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  // Held: taken again only once stale.
  try {
    if (Date.now() - statSync(file).mtimeMs < RESERVED_MS) return false
    unlinkSync(file)
    create()
    return true
  } catch {
    // Freed or taken by another process meanwhile.
    return false
  }
}

/** Whether 127.0.0.1:`port` can be listened on now. */
function bindable(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const srv = createServer()
    srv.unref()
    srv.once('error', () => resolve(false))
    srv.listen(port, '127.0.0.1', () => srv.close(() => resolve(true)))
  })
}

/**
 * A port to start a server on, picked at random from 15000-31999 and checked free. Below the
 * kernel's ephemeral range (Linux: 32768-60999) on purpose: a port the kernel hands out
 * (`listen(0)`) is one it also gives to outgoing connections, and in the moment between this
 * check and the service's own listen, a client connection of a test running beside this one took
 * it (EADDRINUSE). Another test process's pick is kept apart by a reservation (reserve, above).
 */
export async function freePort(): Promise<number> {
  for (let attempt = 0; attempt < 100; attempt++) {
    const port = 15_000 + Math.floor(Math.random() * 17_000)
    if (handedOut.has(port) || !reserve(port)) continue
    if (await bindable(port)) {
      handedOut.add(port)
      return port
    }
  }
  throw new Error('no free port found in 15000-31999 after 100 tries')
}

export interface RunningProcess {
  name: string
  child: ChildProcess
  logs: string[]
  /** SIGTERM and wait for exit. */
  stop(): Promise<void>
  /** SIGKILL: no shutdown hooks run. */
  kill(): Promise<void>
}

/** Settings of the test run that every process it starts gets too (scripts/run.sh test sets them). */
const PASSED_THROUGH = [
  // Node's compile cache: a started service compiles its modules, TypeScript stripping
  // included, once per run instead of once per start.
  'NODE_COMPILE_CACHE',
  // identity's cost of new password hashes (2^10 in the tests instead of 2^15).
  'PASSWORD_HASH_COST',
] as const

/** The environment of a child process the tests start: PATH, the run's PASSED_THROUGH settings, then `env`. */
export function childEnv(env: Record<string, string>): Record<string, string> {
  const out: Record<string, string> = { PATH: process.env.PATH ?? '' }
  for (const name of PASSED_THROUGH) {
    const value = process.env[name]
    if (value) out[name] = value
  }
  return { ...out, ...env }
}

/**
 * Starts a service entry point (its TypeScript source, or its bundle: `entryArgs`) as a child process
 * with the given environment; collects its output lines for assertions. With `umask` (e.g.
 * 0o022), a shell sets it and then becomes Node (exec: same pid, signals reach Node).
 */
export function startProcess(
  name: string,
  entry: string,
  env: Record<string, string>,
  opts: { umask?: number } = {},
): RunningProcess {
  const node = [process.execPath, ...entryArgs(entry)]
  const [command = process.execPath, ...args] =
    opts.umask === undefined
      ? node
      : ['/bin/sh', '-c', `umask ${opts.umask.toString(8).padStart(3, '0')} && exec "$@"`, 'sh', ...node]
  const child = spawn(command, args, {
    cwd: REPO_ROOT,
    env: childEnv(env),
    stdio: ['ignore', 'pipe', 'pipe'],
  })
  const logs: string[] = []
  const collect = (chunk: Buffer) => {
    for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(line)
  }
  child.stdout?.on('data', collect)
  child.stderr?.on('data', collect)
  const exited = new Promise<void>((resolve) => child.once('exit', () => resolve()))
  const signal = async (sig: NodeJS.Signals) => {
    if (child.exitCode === null && child.signalCode === null) child.kill(sig)
    await exited
  }
  return { name, child, logs, stop: () => signal('SIGTERM'), kill: () => signal('SIGKILL') }
}

export interface ProcessResult {
  code: number | null
  stdout: string
  stderr: string
}

/**
 * Runs a command to its end with `stdin` (default: nothing) as its input; resolves with its
 * exit status and output. `env` is its whole environment. With `timeoutMs`, a command still
 * running then is killed (SIGKILL).
 */
export function runCommand(
  command: string,
  args: string[],
  opts: { cwd?: string; env: Record<string, string>; stdin?: string; timeoutMs?: number },
): Promise<ProcessResult> {
  return new Promise((resolve, reject) => {
    const child = spawn(command, args, { cwd: opts.cwd, env: opts.env, stdio: ['pipe', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (c: Buffer) => {
      stdout += c.toString('utf8')
    })
    child.stderr.on('data', (c: Buffer) => {
      stderr += c.toString('utf8')
    })
    const timer =
      opts.timeoutMs === undefined ? undefined : setTimeout(() => child.kill('SIGKILL'), opts.timeoutMs)
    child.on('error', reject)
    child.on('close', (code) => {
      clearTimeout(timer)
      resolve({ code, stdout, stderr })
    })
    child.stdin.end(opts.stdin ?? '')
  })
}

/**
 * Runs an entry point (a CLI; its source or bundle, as startProcess does) to its
 * end from the repository root, with `childEnv(env)` and `stdin` as its input.
 */
export function runEntry(
  entry: string,
  args: string[],
  env: Record<string, string>,
  stdin = '',
): Promise<ProcessResult> {
  return runCommand(process.execPath, [...entryArgs(entry), ...args], {
    cwd: REPO_ROOT,
    env: childEnv(env),
    stdin,
  })
}

/** Polls `url` until it answers 200 (or the deadline passes). */
export async function waitForHttp(url: string, timeoutMs = 20_000, proc?: RunningProcess): Promise<void> {
  const deadline = Date.now() + timeoutMs
  let last = ''
  while (Date.now() < deadline) {
    if (proc && proc.child.exitCode !== null) {
      throw new Error(`${proc.name} exited with ${proc.child.exitCode}:\n${proc.logs.slice(-20).join('\n')}`)
    }
    try {
      const res = await fetch(url)
      if (res.ok) return
      last = `status ${res.status}`
    } catch (err) {
      last = (err as Error).message
    }
    await new Promise((r) => setTimeout(r, 100))
  }
  throw new Error(
    `${url} not ready after ${timeoutMs} ms (${last})${proc ? `\n${proc.logs.slice(-20).join('\n')}` : ''}`,
  )
}

/**
 * A Node.js binary of the given major version, for tests that check what users on that version
 * get (the packed client and CLI on Node 20): `NODE<major>` from the environment, the system's
 * node, or the one running the tests; undefined when none is that version.
 */
export function findNode(major: number): string | undefined {
  const candidates = [process.env[`NODE${major}`], '/usr/bin/node', '/usr/local/bin/node', process.execPath]
  for (const candidate of candidates) {
    if (!candidate) continue
    try {
      const version = execFileSync(candidate, ['-p', 'process.versions.node'], { encoding: 'utf8' })
      if (Number(version.split('.')[0]) === major) return candidate
    } catch {
      // not there, or not runnable: try the next one
    }
  }
  return undefined
}
