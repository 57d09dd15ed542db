import { spawn } from 'node:child_process'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'

const entry = fileURLToPath(new URL('./fixtures/slowServer.ts', import.meta.url))

async function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer()
    s.once('error', reject)
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number }
      s.close(() => resolve(port))
    })
  })
}

/**
 * Starts the slow service, begins one request, sends SIGTERM while it is in flight, and
 * answers how the request and the process ended.
 */
async function stopDuringRequest(env: Record<string, string>) {
  const port = await freePort()
  const child = spawn(
    process.execPath,
    ['--conditions=source', '--disable-warning=ExperimentalWarning', entry],
    {
      env: {
        PATH: process.env.PATH ?? '',
        ...(process.env.NODE_COMPILE_CACHE ? { NODE_COMPILE_CACHE: process.env.NODE_COMPILE_CACHE } : {}),
        INTERNAL_AUTH_SECRET: 'x'.repeat(32),
        HOST: '127.0.0.1',
        PORT: String(port),
        LOG_LEVEL: 'silent',
        ...env,
      },
      stdio: ['ignore', 'pipe', 'pipe'],
    },
  )
  let stderr = ''
  // Both streams, for the message of a start that never answers (a crash logs to stdout).
  const collect = (c: Buffer) => {
    stderr = `${stderr}${c.toString()}`.slice(-4_000)
  }
  child.stderr?.on('data', collect)
  child.stdout?.on('data', collect)
  const exited = new Promise<number | null>((resolve) => child.once('exit', (code) => resolve(code)))
  try {
    // A bound, not a timing: npm test starts this beside the other packages' unit tests, and a start
    // on a loaded 2-core machine has taken over 20 s there.
    const until = Date.now() + 60_000
    for (;;) {
      try {
        if ((await fetch(`http://127.0.0.1:${port}/health/live`)).ok) break
      } catch {}
      if (Date.now() > until) throw new Error(`not ready (exit code ${child.exitCode}): ${stderr}`)
      await new Promise((r) => setTimeout(r, 50))
    }
    const answer = fetch(`http://127.0.0.1:${port}/slow`).then(
      async (res) => ({ status: res.status, body: await res.json() }),
      () => 'cut' as const,
    )
    await new Promise((r) => setTimeout(r, 200))
    const signalled = Date.now()
    child.kill('SIGTERM')
    const [request, code] = await Promise.all([answer, exited])
    return { request, code, afterSignalMs: Date.now() - signalled }
  } finally {
    child.kill('SIGKILL')
  }
}

describe('shutdown (runServer)', () => {
  it('lets a request in flight finish within SHUTDOWN_TIMEOUT_MS, then exits 0', async () => {
    const ended = await stopDuringRequest({ SLOW_MS: '2500', SHUTDOWN_TIMEOUT_MS: '8000' })
    expect(ended.request).toEqual({ status: 200, body: { done: true } })
    expect(ended.code).toBe(0)
    expect(ended.afterSignalMs).toBeGreaterThan(1_500)
  }, 90_000)

  it('cuts a request still in flight at SHUTDOWN_TIMEOUT_MS and exits 1', async () => {
    const ended = await stopDuringRequest({ SLOW_MS: '15000', SHUTDOWN_TIMEOUT_MS: '1000' })
    expect(ended.request).toBe('cut')
    expect(ended.code).toBe(1)
    expect(ended.afterSignalMs).toBeLessThan(8_000)
  }, 90_000)
})
