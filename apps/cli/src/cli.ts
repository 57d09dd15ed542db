import { parseArgs } from 'node:util'
import { PromptServiceError } from '@pm/client'
import { DEFAULT_URL, loadSettings } from './config.ts'
import { CommandError, type Context, GLOBAL_OPTIONS, gatewayUrl, type Io, UsageError } from './context.ts'

export const USAGE = `pm: operate a prompt service from the command line

  pm init --email <email> --org-name <name> [--password <p> | --password-stdin] [--name <name>]
          [--key-name <name> [--scopes <s,s>]]
      Create the first user and organization directly in the identity store (the same DATA_DIR
      or MONGO_URL as the service), and optionally mint an API key. Running it again changes nothing:
      the user is left as it is, and a key of that name is reported, not made again.
  pm login --email <email> [--password <p> | --password-stdin] [--url <gateway>]
  pm logout
  pm keys list
  pm keys create --name <name> --scopes <prompts:read,prompts:write,...> [--expires <ISO date>] [--rate <points>/<seconds>]
  pm keys rename <keyId> --name <name>
  pm keys revoke <keyId>
  pm prompts list [--search <text>] [--tags <a,b>] [--visibility all|public|private] [--page <n>] [--limit <n>]
  pm prompts get <promptId> | --slug <slug>
  pm prompts create --name <name> (--template <text> | --template-file <path>) [--slug <slug>] [--description <text>]
          [--tags <a,b>] [--config-json <json>]
  pm prompts create --name <name> --type chat (--message <role>:<content> ... | --messages-file <path>) [...]
      A chat prompt: one --message per message, in order (roles system, user, assistant, developer,
      tool); --message placeholder:<name> takes a list of messages at invoke.
  pm prompts update <promptId> [--name ...] [--slug ...] [--description ...] [--tags ...] [--template ... |
          --template-file ... | --message ... | --messages-file ...] [--config-json <json|null>] [--public true|false]
          [--force]   (--force: change the slug even though other prompts include this one)
  pm prompts delete <promptId> --yes [--force]   (--force: even though other prompts include it)
  pm publish <promptId> [--changelog <text>]
  pm promote <promptId> <preview|production> (--version <n> | --version-id <id>)
  pm history <promptId> <preview|production> [--page <n>] [--limit <n>]
  pm split <promptId> <preview|production> <version>=<weight> <version>=<weight> ...
      Serves 2 to 5 published versions by weight (summing to 100); a plain promote ends it.
  pm import <file.csv> [--no-wait]
  pm invoke <promptId> | --slug <slug> [--var name=value ...] [--vars-json <json>] [--version <n> | --env preview|production]
  pm pull [--dir prompts] [--env production|preview | --draft] [--format dotprompt|prompty|json]
      Write every prompt of the workspace as a file (default: the drafts, as Dotprompt .prompt files).
  pm diff [--dir prompts]
      What a push would do: each file to create, update or leave, with the diff of each update.
  pm push [--dir prompts] [--publish] [--dry-run]
      Apply the folder's files (matched by slug); --publish publishes each changed draft. Exits 1,
      writing nothing, when a file is bad or its prompt changed on the server since the pull.
  pm backup --out <file> [--data-dir <dir>]
      A consistent copy of the embedded default's SQLite stores (DATA_DIR), taken while it runs.
  pm restore <file> [--data-dir <dir>] [--force]
      Puts a backup into DATA_DIR; refused while the service runs on it, and over existing stores
      unless --force (which keeps the replaced files beside them).

Every command takes --url <gateway>, --org <organizationId> and --json (machine-readable output).
Settings: PM_URL (default http://localhost:8080), PM_API_KEY or PM_TOKEN (else the session saved by
login), PM_ORG, PM_PASSWORD, PM_CONFIG (session file, default ~/.config/prompt-service/session.json),
DATA_DIR (backup, restore; default ./data).
`

/**
 * The client's timeout is per attempt and it retries what is safe to send again: a failure to
 * reach the service says how often and how long it was tried, not only one attempt's limit.
 */
export function triedFor(err: PromptServiceError, attempts: Context['attempts'], now = Date.now()): string {
  if ((err.code !== 'TIMEOUT' && err.code !== 'NETWORK_ERROR') || !attempts || attempts.count < 2) return ''
  return ` (${attempts.count} attempts, ${((now - attempts.startedAt) / 1000).toFixed(1)} s in all)`
}

function describeError(err: PromptServiceError, tried = ''): string {
  const details =
    err.details === undefined
      ? ''
      : `\n  ${(Array.isArray(err.details) ? err.details : [err.details])
          .map((d) => (typeof d === 'object' && d ? JSON.stringify(d) : String(d)))
          .join('\n  ')}`
  const request = err.requestId ? ` (request ${err.requestId})` : ''
  return `error: ${err.code}: ${err.message}${tried}${request}${details}\n`
}

/** `init` opens the identity store itself, with node:sqlite (Node.js 22.5 and later). */
async function loadInit(): Promise<typeof import('./commands/init.ts')> {
  try {
    return await import('./commands/init.ts')
  } catch (err) {
    if ((err as { code?: unknown }).code !== 'ERR_UNKNOWN_BUILTIN_MODULE') throw err
    throw new CommandError(
      'UNSUPPORTED_RUNTIME',
      `init opens the identity store with node:sqlite, which this Node.js (${process.version}) lacks: ` +
        'run it with Node.js 22.5 or later (24 recommended), or let the service create the first user ' +
        'with BOOTSTRAP_ADMIN_EMAIL / BOOTSTRAP_ADMIN_PASSWORD / BOOTSTRAP_ORG_NAME',
    )
  }
}

/** What to do about a refusal: the remedy depends on the credential that was refused. */
function hintFor(err: PromptServiceError, ctx: Context | undefined, url: string): string | undefined {
  const prog = ctx?.prog ?? 'pm'
  switch (err.code) {
    case 'INVALID_CREDENTIALS':
      if (ctx?.credential === 'apiKey')
        return `the API key in PM_API_KEY was refused (revoked, expired or mistyped): use a valid one, or mint one with "${prog} keys create"`
      if (ctx?.credential === 'token')
        return 'the token in PM_TOKEN was refused (expired?): unset PM_TOKEN to use your login session, or get a new token'
      if (ctx?.credential === 'session')
        return `your session has ended: sign in again with "${prog} login --email <email>"`
      return undefined
    case 'INSUFFICIENT_SCOPE':
      return ctx?.credential === 'apiKey'
        ? `the API key lacks a scope this needs: mint one that has it with "${prog} keys create --scopes ..."`
        : undefined
    case 'CONFLICT': {
      const dependents = (err.details as { dependents?: unknown } | undefined)?.dependents
      return Array.isArray(dependents)
        ? 'other prompts include this one by its slug: add --force to go ahead (their references then fail until they are edited)'
        : undefined
    }
    case 'NETWORK_ERROR':
    case 'TIMEOUT':
      return `is the service running at ${url}? Point pm elsewhere with --url or PM_URL`
    default:
      return undefined
  }
}

/** Runs one command line; answers the exit code. */
export async function run(argv: string[], io: Io): Promise<number> {
  const settings = loadSettings(io.env)
  const prog = io.prog ?? 'pm'
  const [command, ...rest] = argv
  if (!command || command === 'help' || command === '--help' || command === '-h') {
    // Asked for: the help on stdout, exit 0; no command at all is a usage error: stderr, exit 2.
    ;(command ? io.stdout : io.stderr).write(USAGE)
    return command ? 0 : 2
  }
  // Loaded on demand: `init` opens the identity store (and its drivers), the rest need only the client.
  const prompts = () => import('./commands/prompts.ts')
  const session = () => import('./commands/session.ts')
  const commands: Record<string, (ctx: Context, args: string[]) => Promise<number | undefined>> = {
    init: async (ctx, args) => (await loadInit()).initCommand(ctx, args),
    login: async (ctx, args) => (await session()).loginCommand(ctx, args),
    logout: async (ctx, args) => (await session()).logoutCommand(ctx, args),
    keys: async (ctx, args) => (await session()).keysCommand(ctx, args),
    prompts: async (ctx, args) => (await prompts()).promptsCommand(ctx, args),
    publish: async (ctx, args) => (await prompts()).publishCommand(ctx, args),
    promote: async (ctx, args) => (await prompts()).promoteCommand(ctx, args),
    history: async (ctx, args) => (await import('./commands/release.ts')).historyCommand(ctx, args),
    split: async (ctx, args) => (await import('./commands/release.ts')).splitCommand(ctx, args),
    import: async (ctx, args) => (await prompts()).importCommand(ctx, args),
    invoke: async (ctx, args) => (await prompts()).invokeCommand(ctx, args),
    // Prompts as code (issue 30).
    pull: async (ctx, args) => (await import('./commands/files.ts')).pullCommand(ctx, args),
    diff: async (ctx, args) => (await import('./commands/files.ts')).diffCommand(ctx, args),
    push: async (ctx, args) => (await import('./commands/files.ts')).pushCommand(ctx, args),
    backup: async (ctx, args) => (await import('./commands/backup.ts')).backupCommand(ctx, args),
    restore: async (ctx, args) => (await import('./commands/backup.ts')).restoreCommand(ctx, args),
  }
  const handler = commands[command]
  let ctx: Context | undefined
  try {
    if (!handler) throw new UsageError(`unknown command "${command}"`)
    // The global flags are read by each command's parse; peek at them for the context here.
    const peek = parseArgs({ args: rest, options: GLOBAL_OPTIONS, allowPositionals: true, strict: false })
    if (peek.values.help === true) {
      io.stdout.write(USAGE)
      return 0
    }
    const json = peek.values.json === true
    ctx = {
      settings,
      io,
      json,
      prog,
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
      io.stderr.write(`error: ${err.message}\nRun "${prog} help" for usage.\n`)
      return 2
    }
    if (err instanceof PromptServiceError) {
      io.stderr.write(describeError(err, triedFor(err, ctx?.attempts)))
      const hint = hintFor(err, ctx, ctx ? gatewayUrl(ctx) : (settings.url ?? DEFAULT_URL))
      if (hint) io.stderr.write(`hint: ${hint}\n`)
      return 1
    }
    if (err instanceof CommandError) {
      io.stderr.write(`error: ${err.code}: ${err.message}\n`)
      return 1
    }
    io.stderr.write(`error: ${(err as Error).message ?? String(err)}\n`)
    return 1
  }
}
