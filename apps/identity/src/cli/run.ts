import { parseArgs } from 'node:util'
import { AppError, type CreateApiKeyRequest, SCOPES, type Scope } from '@pm/contracts'
import { createBus, type EventBus } from '@pm/bus'
import { ConfigError, isId } from '@pm/kit'
import { type IdentityCliConfig, loadIdentityCliConfig } from '../config.ts'
import { publicOrganization } from '../domain/views.ts'
import { IdentityService, NO_BROADCAST } from '../services/identity.ts'
import { openIdentityStore } from '../store/open.ts'
import type { IdentityStore, OrganizationRecord } from '../store/types.ts'

export const USAGE = `usage: identity-cli <command> [options]

Works on identity's store directly (MONGO_URL, else DATA_DIR/identity.db); a revocation is
announced to the gateways over NATS when NATS_URL is set. Prints JSON on stdout.

commands:
  create-user  --email <e> --name <n> (--password-stdin | --password <p>) [--org <name>]
               creates a user; with --org also an organization the user OWNs
  bootstrap    --email <e> --org <name> [--name <n>] (--password-stdin | --password <p>)
               the first-install step: user + organization, unless the user exists
  create-org   --owner <email> --name <name>
  mint-key     --org <id|slug> --name <n> --scopes <s1,s2> [--expires-at <iso>]
               [--rate-limit <points>/<seconds>]
               prints the key once; store it now, it cannot be shown again
  list-keys    --org <id|slug>           (never shows a key's secret)
  revoke-key   --org <id|slug> --key-id <id>

scopes: ${SCOPES.join(', ')}`

export interface CliIo {
  /** Settings; the process environment when absent. */
  env?: Record<string, string | undefined>
  /** The whole of standard input (for --password-stdin). */
  readStdin(): Promise<string>
  out(text: string): void
  err(text: string): void
  /** Test seam: a bus to announce revocations on (default: from NATS_URL). */
  openBus?: (config: IdentityCliConfig) => Promise<EventBus>
}

class UsageError extends Error {}

const OPTIONS = {
  email: { type: 'string' },
  name: { type: 'string' },
  password: { type: 'string' },
  'password-stdin': { type: 'boolean' },
  org: { type: 'string' },
  owner: { type: 'string' },
  scopes: { type: 'string' },
  'expires-at': { type: 'string' },
  'rate-limit': { type: 'string' },
  'key-id': { type: 'string' },
  help: { type: 'boolean', short: 'h' },
} as const

type Values = ReturnType<typeof parseArgs<{ options: typeof OPTIONS; allowPositionals: true }>>['values']

function need(values: Values, name: keyof Values): string {
  const value = values[name]
  if (typeof value !== 'string' || value.trim() === '') throw new UsageError(`--${name} is required`)
  return value
}

async function password(values: Values, io: CliIo): Promise<string> {
  let value: string | undefined
  if (values['password-stdin']) value = (await io.readStdin()).replace(/\r?\n$/, '')
  else value = values.password
  if (value === undefined) throw new UsageError('--password-stdin (or --password) is required')
  if (value.length < 8) throw new UsageError('the password must have at least 8 characters')
  return value
}

async function findOrg(store: IdentityStore, ref: string): Promise<OrganizationRecord> {
  const org = isId(ref) ? await store.getOrganization(ref) : await store.findOrganizationBySlug(ref)
  if (!org) throw new AppError('NOT_FOUND', `no organization ${ref}`)
  return org
}

function parseScopes(raw: string): Scope[] {
  const scopes = raw
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
  for (const s of scopes) {
    if (!(SCOPES as readonly string[]).includes(s)) throw new UsageError(`unknown scope ${s}`)
  }
  if (scopes.length === 0) throw new UsageError('--scopes needs at least one scope')
  return scopes as Scope[]
}

function parseRateLimit(raw: string): NonNullable<CreateApiKeyRequest['rateLimit']> {
  const m = /^(\d+)\/(\d+)$/.exec(raw.trim())
  const points = Number(m?.[1])
  const durationSeconds = Number(m?.[2])
  if (!m || points < 1 || durationSeconds < 1 || durationSeconds > 86_400) {
    throw new UsageError('--rate-limit is <points>/<seconds>, e.g. 100/60')
  }
  return { points, durationSeconds }
}

/** The API keys' creator: the organization's first ACTIVE OWNER. */
async function ownerOf(store: IdentityStore, org: OrganizationRecord): Promise<string> {
  const owner = (await store.listMemberships(org._id)).find(
    (m) => m.role === 'OWNER' && m.status === 'ACTIVE',
  )
  if (!owner) throw new AppError('CONFLICT', `organization ${org.slug} has no ACTIVE OWNER`)
  return owner.userId
}

async function run(command: string, values: Values, io: CliIo, config: IdentityCliConfig): Promise<unknown> {
  const store = await openIdentityStore(config)
  // Only a revocation is announced (to the gateways, over the bus); nothing else the CLI does
  // changes what a gateway caches, so no bus is opened for it.
  const bus =
    command === 'revoke-key'
      ? await (io.openBus ?? ((c) => createBus(c.NATS_URL, 'identity-cli')))(config)
      : null
  const identity = new IdentityService(store, bus ?? NO_BROADCAST, undefined, {
    passwordCost: config.PASSWORD_HASH_COST,
    maxApiKeysPerOrganization: config.API_KEY_MAX_PER_ORG,
  })
  try {
    switch (command) {
      case 'create-user': {
        const email = need(values, 'email')
        if (!/^[^@\s]+@[^@\s]+$/.test(email)) throw new UsageError('--email is not an email address')
        const user = await identity.createUser({
          email,
          name: need(values, 'name'),
          password: await password(values, io),
        })
        const org = values.org ? await identity.createOrganization(values.org, user._id) : null
        return {
          user: { _id: user._id, email: user.email, name: user.name },
          organization: org ? publicOrganization(org) : null,
        }
      }
      case 'bootstrap': {
        const result = await identity.bootstrap({
          email: need(values, 'email'),
          orgName: need(values, 'org'),
          name: values.name,
          password: await password(values, io),
        })
        return {
          created: result.created,
          user: { _id: result.user._id, email: result.user.email, name: result.user.name },
          organization: result.organization ? publicOrganization(result.organization) : null,
        }
      }
      case 'create-org': {
        const owner = await store.findUserByEmail(need(values, 'owner').trim().toLowerCase())
        if (!owner) throw new AppError('NOT_FOUND', `no user ${values.owner}`)
        return publicOrganization(await identity.createOrganization(need(values, 'name'), owner._id))
      }
      case 'mint-key': {
        const org = await findOrg(store, need(values, 'org'))
        const expiresAt = values['expires-at']
        if (expiresAt !== undefined && Number.isNaN(Date.parse(expiresAt))) {
          throw new UsageError('--expires-at must be an ISO-8601 date')
        }
        return identity.createApiKey(org._id, await ownerOf(store, org), {
          name: need(values, 'name'),
          scopes: parseScopes(need(values, 'scopes')),
          ...(expiresAt ? { expiresAt: new Date(expiresAt).toISOString() } : {}),
          ...(values['rate-limit'] ? { rateLimit: parseRateLimit(values['rate-limit']) } : {}),
        })
      }
      case 'list-keys': {
        const org = await findOrg(store, need(values, 'org'))
        return { apiKeys: await identity.listApiKeys(org._id) }
      }
      case 'revoke-key': {
        const org = await findOrg(store, need(values, 'org'))
        const keyId = need(values, 'key-id')
        try {
          // Identity's own revocation, which announces it to the gateways.
          return await identity.revokeApiKey(org._id, keyId)
        } catch (err) {
          if (err instanceof AppError && err.code === 'NOT_FOUND')
            throw new AppError('NOT_FOUND', `no API key ${keyId} in ${org.slug}`)
          throw err
        }
      }
      default:
        throw new UsageError(`unknown command ${command}`)
    }
  } finally {
    await bus?.close() // drains: a broadcast is sent before the process exits
    await store.close()
  }
}

/** Runs one CLI command; resolves to the process exit code (0 ok, 1 failed, 2 usage). */
export async function runCli(argv: string[], io: CliIo): Promise<number> {
  let parsed: { values: Values; positionals: string[] }
  try {
    parsed = parseArgs({ args: argv, options: OPTIONS, allowPositionals: true, strict: true })
  } catch (err) {
    io.err(`${(err as Error).message}\n\n${USAGE}\n`)
    return 2
  }
  const [command] = parsed.positionals
  if (!command || parsed.values.help) {
    io.err(`${USAGE}\n`)
    return parsed.values.help ? 0 : 2
  }
  try {
    const config = loadIdentityCliConfig(io.env)
    const result = await run(command, parsed.values, io, config)
    io.out(`${JSON.stringify(result, null, 2)}\n`)
    return 0
  } catch (err) {
    if (err instanceof UsageError) {
      io.err(`${err.message}\n\n${USAGE}\n`)
      return 2
    }
    if (err instanceof AppError || err instanceof ConfigError) {
      io.err(`${err.message}\n`)
      return 1
    }
    io.err(`failed: ${(err as Error).stack ?? String(err)}\n`)
    return 1
  }
}
