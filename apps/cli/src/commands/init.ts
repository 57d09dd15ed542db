import { AppError, Email } from '@pm/contracts'
import { bootstrapIdentity } from '@pm/identity'
import { ConfigError, loadConfig } from '@pm/kit'
import { type Context, parse, parseScopes, readPassword, required, UsageError } from '../context.ts'

/**
 * The contract's Email in an object, as kit's validator takes it: the same Ajv and formats
 * (ajv-formats, full) the services check requests with. Written out as JSON Schema, since
 * TypeBox is no dependency of the CLI.
 */
const EmailInput = {
  type: 'object',
  properties: { email: Email },
  required: ['email'],
} as unknown as Parameters<typeof loadConfig>[0]

/** identity's register refuses an address that is not one (400); its bootstrap takes what it is given. */
function checkEmail(email: string): void {
  try {
    loadConfig(EmailInput, { email })
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    throw new UsageError(`--email "${email}" is not an email address (at most 254 characters)`)
  }
}

/**
 * First install, without the service running or with it: runs identity's own bootstrap (the
 * admin user and the organization, as the BOOTSTRAP_* settings do at start-up), which can
 * also mint the first API key.
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
  checkEmail(email)
  const orgName = required(values['org-name'], '--org-name')
  const password = await readPassword(ctx, values)
  if (password.length < 8) throw new UsageError('the password needs at least 8 characters')
  const scopes = parseScopes(values.scopes, ['prompts:read', 'prompts:write'])

  // Identity's own bootstrap, on the settings the identity service reads (DATA_DIR, MONGO_URL,
  // MONGO_DB): the CLI never opens identity's store itself.
  const result = await bootstrapIdentity(ctx.settings.env, {
    email,
    password,
    name: values.name,
    orgName,
    ...(values['key-name'] ? { apiKey: { name: values['key-name'], scopes } } : {}),
  }).catch((err: unknown) => {
    // A name the routes would refuse (blank, control characters, too long): the caller's input.
    if (err instanceof AppError && err.code === 'VALIDATION_ERROR') throw new UsageError(err.message)
    throw err
  })
  const { organization, apiKey: key } = result
  const keyName = values['key-name']
  const lines = [
    result.created
      ? `Created user ${result.user.email} (${result.user._id}) and organization "${organization?.name}" (${organization?._id}).`
      : `User ${result.user.email} already exists (organization ${organization?._id ?? 'none'}): left as it is.`,
  ]
  // Run again, init reports the key it made rather than minting a second one of that name.
  if (key?.created) lines.push(`Made API key "${keyName}" (${key._id}), shown once:`, key.key ?? '')
  else if (key) {
    lines.push(
      `API key "${keyName}" (${key._id}) already exists: no new key made. Its secret was shown when it was made; ` +
        `revoke it ("${ctx.prog} keys revoke ${key._id}") and run init again, or mint another with "${ctx.prog} keys create".`,
    )
  }
  ctx.print(lines.join('\n'), {
    created: result.created,
    user: result.user,
    organization: organization
      ? { _id: organization._id, name: organization.name, slug: organization.slug }
      : null,
    apiKey: key,
  })
  return 0
}
