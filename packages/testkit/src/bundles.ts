import { execFileSync } from 'node:child_process'
import { existsSync, readdirSync, rmSync, statSync } from 'node:fs'
import { join } from 'node:path'
import { buildOnce, hashFiles } from './buildOnce.ts'
import { REPO_ROOT } from './root.ts'

/** The entry points bundled, by the name of their bundle. */
export const BUNDLED: readonly { name: string; entry: string }[] = [
  ...['identity', 'prompts', 'render', 'webhooks', 'experiments', 'runs', 'gateway'].map((name) => ({
    name,
    entry: join(REPO_ROOT, `apps/${name}/src/server.ts`),
  })),
  { name: 'embedded', entry: join(REPO_ROOT, 'apps/embedded/src/main.ts') },
  { name: 'cli', entry: join(REPO_ROOT, 'apps/cli/src/main.ts') },
]

let built: string | undefined

/** The folder of this tree's bundles, built by the first test process that asks (buildOnce). */
function bundleDir(): string {
  if (built) return built
  const sources = [
    'pnpm-lock.yaml',
    ...['apps', 'packages'].flatMap((top) =>
      readdirSync(join(REPO_ROOT, top))
        .filter((name) => name !== 'dashboard')
        .flatMap((name) => [`${top}/${name}/src`, `${top}/${name}/package.json`]),
    ),
  ].map((path) => join(REPO_ROOT, path))
  const cache = join(REPO_ROOT, 'node_modules/.cache/pm-test-bundles')
  const dir = join(cache, hashFiles(sources))
  built = buildOnce(dir, 'cli.mjs', (partial) => {
    // The bundles of earlier trees (about 8 MB each) go once they are an hour old: a run of
    // one of them still going may restart a service from it.
    for (const name of existsSync(cache) ? readdirSync(cache) : []) {
      const path = join(cache, name)
      const since = statSync(path, { throwIfNoEntry: false })?.mtimeMs ?? Date.now()
      if (Date.now() - since > 3_600_000) rmSync(path, { recursive: true, force: true })
    }
    execFileSync(
      process.execPath,
      [
        '--disable-warning=ExperimentalWarning',
        join(REPO_ROOT, 'packages/testkit/src/bundleServices.ts'),
        partial,
      ],
      { cwd: REPO_ROOT, stdio: 'pipe' },
    )
  })
  return built
}

/**
 * The Node arguments that start `entry`: its bundle when this run starts bundles
 * (PM_TEST_BUNDLES=1, which `npm test` sets) and it is one of BUNDLED, else its TypeScript
 * source (Node 24 strips the types).
 */
export function entryArgs(entry: string): string[] {
  const bundled = process.env.PM_TEST_BUNDLES === '1' ? BUNDLED.find((b) => b.entry === entry) : undefined
  if (!bundled) return ['--conditions=source', '--disable-warning=ExperimentalWarning', entry]
  return [
    '--conditions=source',
    '--experimental-import-meta-resolve',
    '--disable-warning=ExperimentalWarning',
    join(bundleDir(), `${bundled.name}.mjs`),
  ]
}
