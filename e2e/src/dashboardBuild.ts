import { execFileSync } from 'node:child_process'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { buildOnce, hashFiles, REPO_ROOT } from '@pm/testkit'

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

/**
 * The dashboard built once for all the browser test files of a run (each used to build its
 * own: a minute of a 2-core machine per file), in a folder named after a hash of its sources,
 * so a change rebuilds it; files running side by side wait for the one that builds.
 */
export function builtDashboard(): string {
  const dir = join(
    tmpdir(),
    `pm-dashboard-dist-${hashFiles(SOURCES.map((source) => join(REPO_ROOT, source)))}`,
  )
  return buildOnce(dir, 'index.html', (partial) => {
    execFileSync(
      'pnpm',
      ['--filter', '@pm/dashboard', 'exec', 'vite', 'build', '--outDir', partial, '--emptyOutDir'],
      { cwd: REPO_ROOT, stdio: 'pipe' },
    )
  })
}
