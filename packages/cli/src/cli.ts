import { parseArgs } from 'node:util'
import { PromptServiceError } from '@pm/client'
import { loadSettings } from './config.ts'
import { type Context, GLOBAL_OPTIONS, type Io, UsageError } from './context.ts'

export const USAGE = `pm: operate a prompt service from the command line

  pm init --email <email> --org-name <name> [--password <p> | --password-stdin] [--name <name>]
          [--key-name <name> [--scopes <s,s>]]
      Create the first user and organization directly in the identity store (the same DATA_DIR
      or MONGO_URL as the service), and optionally mint an API key. Running it again changes nothing.
  pm login --email <email> [--password <p> | --password-stdin] [--url <gateway>]
  pm logout
  pm keys list
  pm keys create --name <name> --scopes <prompts:read,prompts:write,...> [--expires <ISO date>] [--rate <points>/<seconds>]
  pm keys revoke <keyId>
  pm prompts list [--search <text>] [--tags <a,b>] [--visibility all|public|private] [--page <n>] [--limit <n>]
  pm prompts get <promptId>
  pm prompts create --name <name> (--template <text> | --template-file <path>) [--description <text>] [--tags <a,b>]
  pm publish <promptId> [--changelog <text>]
  pm promote <promptId> <preview|production> (--version <n> | --version-id <id>)
  pm import <file.csv> [--no-wait]
  pm invoke <promptId> [--var name=value ...] [--vars-json <json>] [--version <n> | --env preview|production]

Every command takes --url <gateway>, --org <organizationId> and --json (machine-readable output).
Settings: PM_URL (default http://localhost:8080), PM_API_KEY or PM_TOKEN (else the session saved by
login), PM_ORG, PM_PASSWORD, PM_CONFIG (session file, default ~/.config/prompt-service/session.json).
`

function describeError(err: PromptServiceError): string {
  const details =
    err.details === undefined
      ? ''
      : `\n  ${(Array.isArray(err.details) ? err.details : [err.details])
          .map((d) => (typeof d === 'object' && d ? JSON.stringify(d) : String(d)))
          .join('\n  ')}`
  const request = err.requestId ? ` (request ${err.requestId})` : ''
  return `error: ${err.code}: ${err.message}${request}${details}\n`
}

/** Runs one command line; answers the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  const settings = loadSettings(io.env)
  const [command, ...rest] = argv
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    io.stdout.write(USAGE)
    return command ? 0 : 2
  }
  // Loaded on demand: `init` opens the identity store (and its drivers), the rest need only the client.
  const prompts = () => import('./commands/prompts.ts')
  const session = () => import('./commands/session.ts')
  const commands: Record<string, (ctx: Context, args: string[]) => Promise<number | undefined>> = {
    init: async (ctx, args) => (await import('./commands/init.ts')).initCommand(ctx, args),
    login: async (ctx, args) => (await session()).loginCommand(ctx, args),
    logout: async (ctx, args) => (await session()).logoutCommand(ctx, args),
    keys: async (ctx, args) => (await session()).keysCommand(ctx, args),
    prompts: async (ctx, args) => (await prompts()).promptsCommand(ctx, args),
    publish: async (ctx, args) => (await prompts()).publishCommand(ctx, args),
    promote: async (ctx, args) => (await prompts()).promoteCommand(ctx, args),
    import: async (ctx, args) => (await prompts()).importCommand(ctx, args),
    invoke: async (ctx, args) => (await prompts()).invokeCommand(ctx, args),
  }
  const handler = commands[command]
  try {
    if (!handler) throw new UsageError(`unknown command "${command}"`)
    // The global flags are read by each command's parse; peek at them for the context here.
    const peek = parseArgs({ args: rest, options: GLOBAL_OPTIONS, allowPositionals: true, strict: false })
    if (peek.values.help === true) {
      io.stdout.write(USAGE)
      return 0
    }
    const json = peek.values.json === true
    const ctx: Context = {
      settings,
      io,
      json,
      url: typeof peek.values.url === 'string' ? peek.values.url : undefined,
      org: typeof peek.values.org === 'string' ? peek.values.org : undefined,
      print: (human, data) => {
        io.stdout.write(
          json ? `${JSON.stringify(data, null, 2)}\n` : human.endsWith('\n') ? human : `${human}\n`,
        )
      },
    }
    return (await handler(ctx, rest)) ?? 0
  } catch (err) {
    if (err instanceof UsageError) {
      io.stderr.write(`error: ${err.message}\nRun "pm help" for usage.\n`)
      return 2
    }
    if (err instanceof PromptServiceError) {
      io.stderr.write(describeError(err))
      if (err.code === 'INVALID_CREDENTIALS') io.stderr.write('hint: sign in again with "pm login".\n')
      return 1
    }
    io.stderr.write(`error: ${(err as Error).message ?? String(err)}\n`)
    return 1
  }
}
