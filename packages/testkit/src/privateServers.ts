import { spawn } from 'node:child_process'
import { accessSync, constants, mkdtempSync } from 'node:fs'
import { connect } from 'node:net'
import { tmpdir } from 'node:os'
import { delimiter, join } from 'node:path'
import { freePort } from './processes.ts'

/**
 * Private servers for test files that run side by side. With PM_TEST_PRIVATE_SERVERS=1 (set by
 * `npm test`, whose integration files run concurrently) and the binary installed, each test
 * file gets its own `nats-server -js` or `redis-server` on a free loopback port: files then
 * share no JetStream stream, durable consumer or Redis key (files that run one after another in
 * a worker share its modules: vitest.setup.int.ts stops the servers of the file before).
 * Otherwise (a single file run by hand, no binary) undefined: the caller uses NATS_URL /
 * REDIS_URL.
 *
 * A server lives as long as the process that started it: a small shell watches that process
 * and stops the server when it is gone, so a killed test worker leaves nothing behind.
 */
export type PrivateKind = 'nats' | 'redis'

const BINARIES: Record<PrivateKind, string> = { nats: 'nats-server', redis: 'redis-server' }

function findBinary(name: string): string | undefined {
  const dirs = [...(process.env.PATH ?? '').split(delimiter), '/usr/sbin', '/usr/local/sbin', '/usr/bin']
  for (const dir of dirs) {
    if (!dir) continue
    const candidate = join(dir, name)
    try {
      accessSync(candidate, constants.X_OK)
      return candidate
    } catch {
      // not here
    }
  }
  return undefined
}

function accepts(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = connect({ host: '127.0.0.1', port })
    socket.once('connect', () => {
      socket.destroy()
      resolve(true)
    })
    socket.once('error', () => resolve(false))
  })
}

export function privateServersWanted(): boolean {
  return process.env.PM_TEST_PRIVATE_SERVERS === '1'
}

/** Wanted, and both binaries installed: every test file then gets its own NATS and Redis. */
export function privateServersAvailable(): boolean {
  return privateServersWanted() && Object.values(BINARIES).every((name) => findBinary(name) !== undefined)
}

/** The watching shells of the servers this process started and has not stopped. */
const watchers = new Set<number>()

export async function startPrivateServer(kind: PrivateKind): Promise<string | undefined> {
  if (!privateServersWanted()) return undefined
  const bin = findBinary(BINARIES[kind])
  if (!bin) return undefined
  const port = await freePort()
  const dir = mkdtempSync(join(tmpdir(), `pm-test-${kind}-`))
  const args =
    kind === 'nats'
      ? ['-a', '127.0.0.1', '-p', String(port), '-js', '-sd', dir]
      : ['--bind', '127.0.0.1', '--port', String(port), '--save', '', '--appendonly', 'no', '--dir', dir]
  // The server in the background; the shell polls the test process once a second and, when it
  // is gone or the shell is sent SIGTERM (stopPrivateServers), stops the server and removes its
  // folder.
  const quoted = [bin, ...args].map((a) => `'${a.replace(/'/g, `'\\''`)}'`).join(' ')
  const script = `${quoted} >/dev/null 2>&1 & s=$!; trap 'kill $s 2>/dev/null; wait $s 2>/dev/null; rm -rf '"'${dir}'"'' EXIT; trap 'exit 0' TERM; while kill -0 ${process.pid} 2>/dev/null && kill -0 $s 2>/dev/null; do sleep 1; done`
  const watcher = spawn('bash', ['-c', script], { stdio: 'ignore', detached: true })
  watcher.unref()
  if (watcher.pid !== undefined) watchers.add(watcher.pid)
  const deadline = Date.now() + 15_000
  while (Date.now() < deadline) {
    if (await accepts(port)) return `${kind}://127.0.0.1:${port}`
    await new Promise((r) => setTimeout(r, 25))
  }
  throw new Error(`${BINARIES[kind]} did not listen on 127.0.0.1:${port} within 15 s`)
}

/**
 * Stops every private server this process started: its watching shell is sent SIGTERM, on which
 * its EXIT trap stops the server and removes its folder. For test files that share a worker
 * (vitest's `isolate: false`): the next file starts servers of its own.
 */
export function stopPrivateServers(): void {
  for (const pid of watchers) {
    try {
      process.kill(pid, 'SIGTERM')
    } catch {
      // already gone
    }
  }
  watchers.clear()
}
