import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { type ProcessResult, REPO_ROOT, runEntry } from '@pm/testkit'

/** Helpers of the CLI's integration tests. */

const CLI = join(REPO_ROOT, 'apps/cli/src/main.ts')

/** Runs `pm <args>` as its own process, the way an operator would (HOME: `env.HOME` or the temp folder). */
export function pm(args: string[], env: Record<string, string>, stdin = ''): Promise<ProcessResult> {
  return runEntry(CLI, args, { HOME: env.HOME ?? tmpdir(), ...env }, stdin)
}

/** The JSON `pm` printed, after checking that it succeeded. */
export function json<T>(result: ProcessResult): T {
  if (result.code !== 0) throw new Error(`pm exited ${result.code}: ${result.stderr}`)
  return JSON.parse(result.stdout) as T
}
