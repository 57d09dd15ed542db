import { ENVIRONMENTS, type EnvironmentName } from '@pm/contracts'
import { CommandError, type Context, clientFor, parse, positiveInt, table, UsageError } from '../context.ts'

/** Release safety commands (DESIGN section 15): an environment's history, and a split rollout. */

function environment(text: string | undefined): EnvironmentName | undefined {
  return (ENVIRONMENTS as readonly string[]).includes(text ?? '') ? (text as EnvironmentName) : undefined
}

/** `pm history <promptId> <env> [--page n] [--limit n]`: who promoted what, newest first. */
export async function historyCommand(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { page: { type: 'string' }, limit: { type: 'string' } })
  const [id, envText] = positionals
  const env = environment(envText)
  if (!id || !env)
    throw new UsageError('pm history <promptId> <preview|production> [--page <n>] [--limit <n>]')
  const page = positiveInt(values.page, '--page')
  const limit = positiveInt(values.limit, '--limit')
  const query = { ...(page !== undefined ? { page } : {}), ...(limit !== undefined ? { limit } : {}) }
  const client = await clientFor(ctx, 'any')
  const history = await client.api.getEnvironmentHistory({ params: { id, env }, query })
  const rows = history.entries.map((e) => [
    e.promotedAt,
    e.split ? e.split.variants.map((v) => `v${v.version} ${v.weight}%`).join(', ') : `v${e.version}`,
    `${e.promotedByType} ${e.promotedBy}`,
  ])
  ctx.print(table(['PROMOTED AT', 'VERSION', 'BY'], rows), history)
  return 0
}

/**
 * `pm split <promptId> <env> <version>=<weight> ...`: serve 2 to 5 published versions by weight
 * (whole percentages summing to 100); a plain `pm promote` ends it.
 */
export async function splitCommand(ctx: Context, args: string[]): Promise<number> {
  const { positionals } = parse(args, {})
  const [id, envText, ...specs] = positionals
  const env = environment(envText)
  const usage = 'pm split <promptId> <preview|production> <version>=<weight> <version>=<weight> ...'
  if (!id || !env || specs.length < 2) throw new UsageError(usage)
  const wanted = specs.map((spec) => {
    const match = /^v?(\d+)=(\d+)$/.exec(spec)
    if (!match) throw new UsageError(`"${spec}" is not <version>=<weight> (for example 3=10)`)
    return { version: Number(match[1]), weight: Number(match[2]) }
  })
  const client = await clientFor(ctx, 'any')
  const { versions } = await client.api.listVersions({ params: { id } })
  const split = wanted.map((w) => {
    const found = versions.find((v) => v.version === w.version)
    // What was asked for does not exist: exit 1, as promote --version answers it (not usage).
    if (!found) {
      const known = versions.map((v) => v.version).join(', ') || 'none'
      throw new CommandError('NOT_FOUND', `prompt ${id} has no version ${w.version} (its versions: ${known})`)
    }
    return { versionId: found._id, weight: w.weight }
  })
  const pin = await client.api.promoteVersion({ params: { id, env }, body: { split } })
  const shares = (pin.split?.variants ?? []).map((v) => `v${v.version} ${v.weight}%`).join(', ')
  ctx.print(`${env} of ${id} now splits: ${shares}.`, pin)
  return 0
}
