import { closeSync, openSync, rmSync, statSync } from 'node:fs'
import { type ParseArgsConfig, parseArgs } from 'node:util'
import { PromptClient, PromptServiceError } from '@pm/client'
import { SCOPES, type Scope } from '@pm/contracts'
import { type CliSettings, DEFAULT_URL, type Env } from './config.ts'
import { readSession, type Session, writeSession } from './session.ts'

export interface Output {
  write(text: string): unknown
  isTTY?: boolean
}

export interface Io {
  stdout: Output
  stderr: Output
  env: Env
  /** Reads all of standard input (for --password-stdin). */
  readStdin?: () => Promise<string>
  /** How this program was started, for hints ("pm", "npm run cli --"). Default "pm". */
  prog?: string
}

/** A mistake in how the command was called: exit code 2 with a hint. */
export class UsageError extends Error {
  override name = 'UsageError'
}

/** The command was right but could not be done (a version that does not exist): exit code 1. */
export class CommandError extends Error {
  override name = 'CommandError'
  readonly code: string
  constructor(code: string, message: string) {
    super(message)
    this.code = code
  }
}

/** Where the credential of this command came from: it decides what a refusal's hint says. */
export type CredentialSource = 'apiKey' | 'token' | 'session'

export type Options = NonNullable<ParseArgsConfig['options']>

/** Flags every command takes. */
export const GLOBAL_OPTIONS = {
  url: { type: 'string' },
  org: { type: 'string' },
  json: { type: 'boolean', default: false },
  help: { type: 'boolean', short: 'h', default: false },
} as const satisfies Options

export interface Context {
  settings: CliSettings
  io: Io
  json: boolean
  url: string | undefined
  org: string | undefined
  /** How to run this program again ("pm", "npm run cli --"), for hints. */
  prog: string
  /** Set by clientFor: where the credential in use came from. */
  credential?: CredentialSource
  /**
   * Set by clientFor's client: the attempts of the latest request (the first and its retries)
   * and when the first began, so that a failure can say how long it was tried in all.
   */
  attempts?: { count: number; startedAt: number }
  /** Prints `human` for people, or `data` as JSON with --json. */
  print(human: string, data: unknown): void
}

export function parse<const O extends Options>(args: string[], options: O) {
  try {
    return parseArgs({
      args,
      options: { ...GLOBAL_OPTIONS, ...options },
      allowPositionals: true,
      strict: true,
    })
  } catch (err) {
    throw new UsageError(
      describeParseError(err as Error & { code?: string }, { ...GLOBAL_OPTIONS, ...options }),
    )
  }
}

/** Node's parser messages quote oddly ('-- "--slug"'); say what was wrong and what is accepted. */
export function describeParseError(err: Error & { code?: string }, options: Options): string {
  const flag = /'(--?[^' ]+)/.exec(err.message)?.[1]
  const accepted = Object.entries(options)
    .filter(([name]) => name !== 'help')
    .map(([name, o]) => (o.type === 'string' ? `--${name} <value>` : `--${name}`))
    .join(', ')
  if (err.code === 'ERR_PARSE_ARGS_UNKNOWN_OPTION' && flag) {
    return `unknown option ${flag}; this command takes ${accepted}`
  }
  if (err.code === 'ERR_PARSE_ARGS_INVALID_OPTION_VALUE' && flag) {
    const name = flag.replace(/^-+/, '')
    return options[name]?.type === 'boolean'
      ? `${flag} takes no value`
      : `${flag} needs a value: ${flag} <value>`
  }
  return err.message
}

export function required(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`${flag} is required`)
  return value
}

/** An id or slug given as '' would reach the client as none at all: refused here, by its name. */
export function nonEmpty(value: string | undefined, name: string): string | undefined {
  if (value === '') throw new UsageError(`${name} is empty: give a value`)
  return value
}

/** Digits only: Number() would take 0x1, 1e0, 1.0 or " 1" as 1. */
export function positiveInt(text: string | undefined, flag: string): number | undefined {
  if (text === undefined) return undefined
  if (!/^\d+$/.test(text) || Number(text) < 1) throw new UsageError(`${flag} must be a positive integer`)
  return Number(text)
}

/** --password, else --password-stdin, else PM_PASSWORD. */
export async function readPassword(
  ctx: Context,
  values: { password?: string | boolean; 'password-stdin'?: string | boolean },
): Promise<string> {
  if (typeof values.password === 'string' && values.password) return values.password
  if (values['password-stdin'] === true) {
    if (!ctx.io.readStdin) throw new UsageError('--password-stdin needs standard input')
    const text = (await ctx.io.readStdin()).replace(/\r?\n$/, '')
    if (text) return text
  }
  if (ctx.settings.password) return ctx.settings.password
  throw new UsageError('a password is required: --password, --password-stdin or PM_PASSWORD')
}

export function session(ctx: Context): Session | null {
  return readSession(ctx.settings.sessionFile)
}

export function gatewayUrl(ctx: Context): string {
  return ctx.url ?? ctx.settings.url ?? session(ctx)?.url ?? DEFAULT_URL
}

function originOf(url: string): string | undefined {
  try {
    return new URL(url).origin
  } catch {
    return undefined
  }
}

/**
 * The saved session, when it was signed in to the gateway this command talks to. Its tokens go
 * only to the origin that issued them: a --url or PM_URL naming another host (a typo, a hostile
 * address) must not receive them. `other` is a session passed over for that reason.
 */
export function sessionFor(ctx: Context): { saved: Session | null; other?: Session } {
  const saved = session(ctx)
  if (!saved) return { saved: null }
  const origin = originOf(saved.url)
  return origin !== undefined && origin === originOf(gatewayUrl(ctx))
    ? { saved }
    : { saved: null, other: saved }
}

/** Refresh a little before the access token expires, so a command does not start with a dying one. */
const REFRESH_MARGIN_MS = 30_000

/**
 * Holds `${file}.lock` (created exclusively) while a refresh runs, so that two `pm` runs do not
 * spend the same refresh token: the service would take the second use for a stolen token and
 * end the session. Waits up to 10 s; a lock older than 30 s is left over from a crash.
 */
async function lockSession(file: string): Promise<() => void> {
  const lock = `${file}.lock`
  const deadline = Date.now() + 10_000
  for (;;) {
    try {
      closeSync(openSync(lock, 'wx', 0o600))
      return () => rmSync(lock, { force: true })
    } catch (err) {
      if ((err as { code?: unknown }).code !== 'EEXIST') return () => undefined
    }
    try {
      if (Date.now() - statSync(lock).mtimeMs > 30_000) rmSync(lock, { force: true })
    } catch {
      // gone meanwhile: try again
    }
    if (Date.now() > deadline) return () => undefined
    await new Promise((resolve) => setTimeout(resolve, 50))
  }
}

/**
 * Exchanges the session's refresh token for a new access token (and a new refresh token: the
 * service rotates them) and saves both. When another `pm` run rotated the session meanwhile,
 * its tokens are used instead. Answers undefined when the session cannot be renewed.
 */
export async function refreshSession(ctx: Context, saved: Session): Promise<Session | undefined> {
  if (!saved.refreshToken) return undefined
  const unlock = await lockSession(ctx.settings.sessionFile)
  try {
    const now = session(ctx)
    if (now?.refreshToken && now.refreshToken !== saved.refreshToken) return now
    const answer = await new PromptClient({ baseUrl: saved.url, userAgent: 'pm-cli' }).api.refreshToken({
      body: { refreshToken: saved.refreshToken },
    })
    const next: Session = {
      ...saved,
      accessToken: answer.accessToken,
      refreshToken: answer.refreshToken ?? saved.refreshToken,
      expiresAt: new Date(Date.now() + answer.expiresIn * 1000).toISOString(),
      ...(answer.refreshExpiresIn !== undefined
        ? { sessionExpiresAt: new Date(Date.now() + answer.refreshExpiresIn * 1000).toISOString() }
        : {}),
    }
    writeSession(ctx.settings.sessionFile, next)
    return next
  } catch (err) {
    if (err instanceof PromptServiceError && err.code === 'INVALID_CREDENTIALS') return undefined
    throw err
  } finally {
    unlock()
  }
}

/**
 * A client with the right credential: `user` commands need a user token (PM_TOKEN or the
 * login session); `any` commands take PM_API_KEY first, then a user token. A session's
 * access token is renewed with its refresh token when it has expired (before the command, or
 * on the service's 401).
 */
export async function clientFor(ctx: Context, need: 'any' | 'user'): Promise<PromptClient> {
  const found: { saved: Session | null; other?: Session } = ctx.settings.token
    ? { saved: null }
    : sessionFor(ctx)
  let saved = found.saved
  const apiKey = need === 'any' ? ctx.settings.apiKey : undefined
  if (!apiKey && !ctx.settings.token && !saved) {
    const url = gatewayUrl(ctx)
    // Signed in elsewhere: say so, and how to sign in here.
    const why = found.other
      ? `the saved session is for ${originOf(found.other.url) ?? found.other.url}, not ${originOf(url) ?? url}, and is sent nowhere else; `
      : ''
    const login = why ? `${ctx.prog} login --url ${url} --email <email>` : `${ctx.prog} login --email <email>`
    throw new UsageError(
      need === 'user'
        ? `${why}this command needs a user session: run "${login}" (or set PM_TOKEN)`
        : `${why}no credential: set PM_API_KEY, or run "${login}"`,
    )
  }
  ctx.credential = apiKey ? 'apiKey' : ctx.settings.token ? 'token' : 'session'
  if (ctx.credential === 'session' && saved && Date.parse(saved.expiresAt) - Date.now() < REFRESH_MARGIN_MS) {
    saved = (await refreshSession(ctx, saved)) ?? saved
  }
  const token = ctx.settings.token ?? saved?.accessToken
  let retrying = false
  return new PromptClient({
    baseUrl: gatewayUrl(ctx),
    ...(apiKey ? { apiKey } : { accessToken: token }),
    organizationId:
      ctx.org ?? ctx.settings.organizationId ?? (saved ?? sessionFor(ctx).saved)?.organizationId ?? undefined,
    // One-shot commands gain nothing from a cache; retries still help against a busy service.
    cacheTtlMs: 0,
    userAgent: 'pm-cli',
    // The client's timeout is per attempt: count them, for a failure's message (cli.ts).
    onRetry: () => {
      retrying = true
    },
    fetch: (input, init) => {
      if (!retrying || !ctx.attempts) ctx.attempts = { count: 0, startedAt: Date.now() }
      retrying = false
      ctx.attempts.count++
      return fetch(input, init)
    },
    ...(ctx.credential === 'session'
      ? {
          refreshAccessToken: async () => {
            const current = sessionFor(ctx).saved
            if (!current) return undefined
            saved = (await refreshSession(ctx, current)) ?? saved
            return saved?.accessToken
          },
        }
      : {}),
  })
}

/** The organization a command acts in: --org, PM_ORG, or the session's. */
export function organizationId(ctx: Context): string {
  const org = ctx.org ?? ctx.settings.organizationId ?? sessionFor(ctx).saved?.organizationId ?? undefined
  if (!org) throw new UsageError('no organization: pass --org <organizationId> or set PM_ORG')
  return org
}

/** A fixed-width text table. */
export function table(headers: string[], rows: string[][]): string {
  const widths = headers.map((h, i) => Math.max(h.length, ...rows.map((r) => (r[i] ?? '').length)))
  const line = (cells: string[]) =>
    cells
      .map((c, i) => c.padEnd(widths[i] ?? 0))
      .join('  ')
      .trimEnd()
  return [line(headers), ...rows.map(line)].join('\n')
}

export function parseScopes(text: string | undefined, fallback: Scope[]): Scope[] {
  if (!text) return fallback
  const scopes = text
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  const unknown = scopes.filter((s) => !(SCOPES as readonly string[]).includes(s))
  if (unknown.length > 0 || scopes.length === 0) {
    throw new UsageError(`unknown scope ${unknown.join(', ') || '(none)'}; scopes are ${SCOPES.join(', ')}`)
  }
  return [...new Set(scopes)] as Scope[]
}
