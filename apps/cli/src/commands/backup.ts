import { resolve } from 'node:path'
import { backupStores, RestoreRefused, restoreStores } from '../backup.ts'
import { type Context, parse, required, UsageError } from '../context.ts'

const dataDirOf = (ctx: Context, flag: string | undefined) =>
  resolve(flag ?? ctx.settings.env.DATA_DIR ?? './data')

/** pm backup --out FILE [--data-dir DIR]: an online copy of the embedded default's SQLite stores. */
export async function backupCommand(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { out: { type: 'string' }, 'data-dir': { type: 'string' } })
  if (positionals.length > 0) throw new UsageError(`unexpected argument "${positionals[0]}"`)
  const out = resolve(required(values.out, '--out'))
  const dataDir = dataDirOf(ctx, values['data-dir'])
  const result = await backupStores(dataDir, out)
  ctx.print(
    [
      `Backed up ${dataDir} to ${result.file} (${result.createdAt}):`,
      ...result.stores.map((s) => `  ${s.name}  ${s.bytes} bytes  sha256 ${s.sha256}`),
    ].join('\n'),
    result,
  )
  return 0
}

/** pm restore FILE [--data-dir DIR] [--force]: puts a backup back, with the service stopped. */
export async function restoreCommand(ctx: Context, args: string[]): Promise<number> {
  const { values, positionals } = parse(args, { 'data-dir': { type: 'string' }, force: { type: 'boolean' } })
  const [file, extra] = positionals
  if (!file) throw new UsageError('the backup file is required: pm restore FILE')
  if (extra) throw new UsageError(`unexpected argument "${extra}"`)
  const dataDir = dataDirOf(ctx, values['data-dir'])
  try {
    const result = restoreStores(resolve(file), dataDir, { force: values.force === true })
    ctx.print(
      [
        `Restored the backup of ${result.createdAt} into ${dataDir}:`,
        ...result.stores.map((s) => `  ${s.name}  ${s.bytes} bytes`),
        ...result.setAside.map((f) => `  (the file it replaced is kept as ${f})`),
        ...(result.notInBackup.length > 0
          ? [
              `Not in this backup: ${result.notInBackup.join(', ')} (it was made before they were backed up, or before they existed). None is left in ${dataDir}: the service starts them empty.`,
            ]
          : []),
      ].join('\n'),
      result,
    )
    return 0
  } catch (err) {
    if (err instanceof RestoreRefused) {
      ctx.io.stderr.write(`error: ${err.message}\n`)
      return 1
    }
    throw err
  }
}
