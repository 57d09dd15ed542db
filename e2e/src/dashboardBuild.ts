import { execFileSync } from 'node:child_process'
import { createHash } from 'node:crypto'
import { existsSync, mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { REPO_ROOT } from '@pm/testkit'

/** What the built dashboard depends on: its sources and the workspace packages it bundles. */
const SOURCES = [
  'apps/dashboard/src',
  'apps/dashboard/public',
  'apps/dashboard/index.html',
  'apps/dashboard/vite.config.ts',
  'apps/dashboard/package.json',
  'packages/client/src',
  'packages/contracts/src',
  'packages/template/src',
]

function hashInto(hash: ReturnType<typeof createHash>, path: string): void {
  if (!existsSync(path)) return
  if (statSync(path).isDirectory()) {
    for (const name of readdirSync(path).sort()) hashInto(hash, join(path, name))
    return
  }
  hash.update(path)
  hash.update(readFileSync(path))
}

function sleep(ms: number): void {
  Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms)
}

/**
 * The dashboard built once for all the browser test files of a run (each used to build its
 * own: a minute of a 2-core machine per file), in a folder named after a hash of its sources,
 * so a change rebuilds it. Files running side by side wait for the one that builds (a lock
 * folder; one left by a killed run is taken over after 5 minutes).
 */
export function builtDashboard(): string {
  const hash = createHash('sha256')
  for (const source of SOURCES) hashInto(hash, join(REPO_ROOT, source))
  const dir = join(tmpdir(), `pm-dashboard-dist-${hash.digest('hex').slice(0, 16)}`)
  const lock = `${dir}.lock`
  const deadline = Date.now() + 10 * 60_000
  while (!existsSync(join(dir, 'index.html'))) {
    if (Date.now() > deadline) throw new Error(`the dashboard build (${dir}) did not finish in 10 minutes`)
    try {
      mkdirSync(lock)
    } catch {
      // Another file builds it; take over a lock left by a run that died.
      const since = statSync(lock, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()
      if (Date.now() - since > 5 * 60_000) {
        rmSync(lock, { recursive: true, force: true })
      }
      sleep(500)
      continue
    }
    try {
      if (existsSync(join(dir, 'index.html'))) break
      const partial = `${dir}.partial-${process.pid}`
      execFileSync(
        'pnpm',
        ['--filter', '@pm/dashboard', 'exec', 'vite', 'build', '--outDir', partial, '--emptyOutDir'],
        { cwd: REPO_ROOT, stdio: 'pipe' },
      )
      renameSync(partial, dir)
    } finally {
      rmSync(lock, { recursive: true, force: true })
    }
  }
  return dir
}
