import type { RateLimitSetting } from '@pm/contracts'
import {
  type Context,
  clientFor,
  gatewayUrl,
  organizationId,
  parse,
  parseScopes,
  readPassword,
  required,
  session,
  table,
  UsageError,
} from '../context.ts'
import { PromptClient } from '@pm/client'
import { clearSession, writeSession } from '../session.ts'

export async function loginCommand(ctx: Context, args: string[]): Promise<number> {
  const { values } = parse(args, {
    email: { type: 'string' },
    password: { type: 'string' },
    'password-stdin': { type: 'boolean' },
  })
  const email = required(values.email, '--email')
  const password = await readPassword(ctx, values)
  const url = gatewayUrl(ctx)
  const client = new PromptClient({ baseUrl: url, userAgent: 'pm-cli' })
  const login = await client.login(email, password)
  const organization = ctx.org ?? login.organizationId
  const expiresAt = new Date(Date.now() + login.expiresIn * 1000).toISOString()
  // The access token lasts minutes and is renewed on use; the session is the refresh token's life.
  const sessionExpiresAt =
    login.refreshExpiresIn !== undefined
      ? new Date(Date.now() + login.refreshExpiresIn * 1000).toISOString()
      : undefined
  writeSession(ctx.settings.sessionFile, {
    url,
    email,
    accessToken: login.accessToken,
    ...(login.refreshToken ? { refreshToken: login.refreshToken } : {}),
    organizationId: organization,
    expiresAt,
    ...(sessionExpiresAt ? { sessionExpiresAt } : {}),
  })
  const until = sessionExpiresAt
    ? `session until ${sessionExpiresAt} (each use renews it)`
    : 'the session is renewed automatically while the service accepts its refresh token'
  ctx.print(
    `Signed in to ${url} as ${login.user.email}; organization ${organization ?? '(none)'}; ${until}.`,
    {
      url,
      user: login.user,
      organizationId: organization,
      expiresAt,
      sessionExpiresAt: sessionExpiresAt ?? null,
    },
  )
  return 0
}

export async function logoutCommand(ctx: Context, args: string[]): Promise<number> {
  parse(args, {})
  const saved = session(ctx)
  if (saved?.refreshToken) {
    // Best effort: the session file goes whatever the service says.
    await new PromptClient({ baseUrl: saved.url }).api
      .logout({ body: { refreshToken: saved.refreshToken } })
      .catch(() => undefined)
  }
  clearSession(ctx.settings.sessionFile)
  ctx.print('Signed out.', { signedOut: true })
  return 0
}

function parseRate(text: string | undefined): RateLimitSetting | undefined {
  if (!text) return undefined
  const match = /^(\d+)\/(\d+)$/.exec(text)
  if (!match) throw new UsageError('--rate is <points>/<seconds>, e.g. 600/60')
  return { points: Number(match[1]), durationSeconds: Number(match[2]) }
}

/** An ISO 8601 date (midnight UTC) or date and time; `Date` alone would also take "1" or "May 5". */
const ISO_DATE = /^\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2}(?:\.\d+)?)?(?:Z|[+-]\d{2}:?\d{2})?)?$/i

/** --expires as the API takes it; anything else is a usage error that names the format. */
export function parseExpires(text: string | undefined): string | undefined {
  if (!text) return undefined
  const date = new Date(text)
  // Date rolls a day that the month lacks over (2027-02-30 is 2 March): the day must exist.
  const [y, m, d] = text.slice(0, 10).split('-').map(Number)
  const day = new Date(Date.UTC(Number(y), Number(m) - 1, Number(d)))
  if (
    !ISO_DATE.test(text) ||
    Number.isNaN(date.getTime()) ||
    day.getUTCMonth() !== Number(m) - 1 ||
    day.getUTCDate() !== d
  )
    throw new UsageError(
      `--expires is an ISO 8601 date or date and time, e.g. 2027-01-31 or 2027-01-31T12:00:00Z (got "${text}")`,
    )
  return date.toISOString()
}

/** `pm keys list|create|rename|revoke`: key management through the API, with a user session. */
export async function keysCommand(ctx: Context, args: string[]): Promise<number> {
  const [sub, ...rest] = args
  if (sub !== 'list' && sub !== 'create' && sub !== 'rename' && sub !== 'revoke')
    throw new UsageError('pm keys list|create|rename|revoke')
  const { values, positionals } = parse(rest, {
    name: { type: 'string' },
    scopes: { type: 'string' },
    expires: { type: 'string' },
    rate: { type: 'string' },
  })
  // Checked before anything is sent: a wrong value is a usage error (exit 2).
  const expiresAt = parseExpires(values.expires)
  const rateLimit = parseRate(values.rate)
  const client = await clientFor(ctx, 'user')
  const org = organizationId(ctx)
  if (sub === 'list') {
    const { apiKeys } = await client.api.listApiKeys({ params: { id: org } })
    ctx.print(
      table(
        ['ID', 'NAME', 'PREFIX', 'SCOPES', 'LAST USED', 'REVOKED'],
        apiKeys.map((k) => [
          k._id,
          k.name,
          k.prefix,
          k.scopes.join(','),
          k.lastUsedAt ?? '-',
          k.revokedAt ?? '-',
        ]),
      ),
      apiKeys,
    )
    return 0
  }
  if (sub === 'create') {
    const created = await client.api.createApiKey({
      params: { id: org },
      body: {
        name: required(values.name, '--name'),
        scopes: parseScopes(required(values.scopes, '--scopes'), []),
        ...(expiresAt ? { expiresAt } : {}),
        ...(rateLimit ? { rateLimit } : {}),
      },
    })
    ctx.print(
      `API key "${created.apiKey.name}" (${created.apiKey._id}) with ${created.apiKey.scopes.join(', ')}. Shown once:\n${created.key}`,
      created,
    )
    return 0
  }
  if (sub === 'rename') {
    const keyId = positionals[0]
    if (!keyId) throw new UsageError('pm keys rename <keyId> --name <name>')
    const name = required(values.name, '--name')
    const renamed = await client.api.renameApiKey({ params: { id: org, keyId }, body: { name } })
    ctx.print(`Renamed ${renamed._id} to "${renamed.name}".`, renamed)
    return 0
  }
  if (sub === 'revoke') {
    const keyId = positionals[0]
    if (!keyId) throw new UsageError('pm keys revoke <keyId>')
    const revoked = await client.api.revokeApiKey({ params: { id: org, keyId } })
    ctx.print(`Revoked ${revoked._id} ("${revoked.name}") at ${revoked.revokedAt}.`, revoked)
    return 0
  }
  return 2
}
