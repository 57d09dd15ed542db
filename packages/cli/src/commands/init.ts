import { randomBytes } from 'node:crypto'
import type { Scope } from '@pm/contracts'
import { IdentityService, loadIdentityConfig, openIdentityStore } from '@pm/identity'
import { type Context, parse, parseScopes, readPassword, required, UsageError } from '../context.ts'

/**
 * First install, without the service running or with it: writes the admin user and the
 * organization straight into the identity store, as the BOOTSTRAP_* settings do at start-up,
 * and can mint the first API key.
 */
export async function initCommand(ctx: Context, args: string[]): Promise<number> {
  const { values } = parse(args, {
    email: { type: 'string' },
    password: { type: 'string' },
    'password-stdin': { type: 'boolean' },
    name: { type: 'string' },
    'org-name': { type: 'string' },
    'key-name': { type: 'string' },
    scopes: { type: 'string' },
  })
  const email = required(values.email, '--email')
  const orgName = required(values['org-name'], '--org-name')
  const password = await readPassword(ctx, values)
  if (password.length < 8) throw new UsageError('the password needs at least 8 characters')
  const scopes = parseScopes(values.scopes, ['prompts:read', 'prompts:write'])

  // The same settings the identity service reads (DATA_DIR, MONGO_URL, MONGO_DB). The
  // internal secret signs nothing here, but the schema asks for one.
  const config = loadIdentityConfig({
    ...ctx.settings.env,
    INTERNAL_AUTH_SECRET: ctx.settings.env.INTERNAL_AUTH_SECRET ?? randomBytes(32).toString('hex'),
  })
  const store = await openIdentityStore(config)
  try {
    const identity = new IdentityService(store)
    const result = await identity.bootstrap({ email, password, name: values.name, orgName })
    const organization = result.organization
    let key: { _id: string; key: string; scopes: Scope[] } | null = null
    if (values['key-name']) {
      if (!organization) throw new Error(`${email} belongs to no organization: cannot mint a key`)
      const created = await identity.createApiKey(organization._id, result.user._id, {
        name: values['key-name'],
        scopes,
      })
      key = { _id: created.apiKey._id, key: created.key, scopes: created.apiKey.scopes }
    }
    const lines = [
      result.created
        ? `Created user ${result.user.email} (${result.user._id}) and organization "${organization?.name}" (${organization?._id}).`
        : `User ${result.user.email} already exists: nothing changed (organization ${organization?._id ?? 'none'}).`,
    ]
    if (key) lines.push(`API key "${values['key-name']}" (${key._id}), shown once:`, key.key)
    ctx.print(lines.join('\n'), {
      created: result.created,
      user: { _id: result.user._id, email: result.user.email, name: result.user.name },
      organization: organization
        ? { _id: organization._id, name: organization.name, slug: organization.slug }
        : null,
      apiKey: key,
    })
    return 0
  } finally {
    await store.close()
  }
}
