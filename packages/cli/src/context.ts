import { type ParseArgsConfig, parseArgs } from 'node:util'
import { PromptClient } from '@pm/client'
import { SCOPES, type Scope } from '@pm/contracts'
import { type CliSettings, DEFAULT_URL, type Env } from './config.ts'
import { readSession, type Session } from './session.ts'

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
}

/** A mistake in how the command was called: exit code 2 with a hint. */
export class UsageError extends Error {
  override name = 'UsageError'
}

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
    throw new UsageError((err as Error).message)
  }
}

export function required(value: string | undefined, flag: string): string {
  if (value === undefined || value === '') throw new UsageError(`${flag} is required`)
  return value
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

/**
 * A client with the right credential: `user` commands need a user token (PM_TOKEN or the
 * login session); `any` commands take PM_API_KEY first, then a user token.
 */
export function clientFor(ctx: Context, need: 'any' | 'user'): PromptClient {
  const saved = session(ctx)
  const token = ctx.settings.token ?? saved?.accessToken
  const apiKey = need === 'any' ? ctx.settings.apiKey : undefined
  if (!apiKey && !token) {
    throw new UsageError(
      need === 'user'
        ? 'this command needs a user session: run "pm login --email <email>" (or set PM_TOKEN)'
        : 'no credential: set PM_API_KEY, or run "pm login --email <email>"',
    )
  }
  return new PromptClient({
    baseUrl: gatewayUrl(ctx),
    ...(apiKey ? { apiKey } : { accessToken: token }),
    organizationId: ctx.org ?? ctx.settings.organizationId ?? saved?.organizationId ?? undefined,
    // One-shot commands gain nothing from a cache; retries still help against a busy service.
    cacheTtlMs: 0,
    userAgent: 'pm-cli',
  })
}

/** The organization a command acts in: --org, PM_ORG, or the session's. */
export function organizationId(ctx: Context): string {
  const org = ctx.org ?? ctx.settings.organizationId ?? session(ctx)?.organizationId ?? undefined
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
