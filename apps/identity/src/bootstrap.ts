import {
  AppError,
  CreateApiKeyRequest,
  CreateOrganizationRequest,
  type Organization,
  RegisterRequest,
  type Scope,
} from '@pm/contracts'
import { ConfigError, loadConfig } from '@pm/kit'
import { Type } from '@sinclair/typebox'
import { loadIdentityCliConfig } from './config.ts'
import { publicOrganization } from './domain/views.ts'
import { IdentityService, NO_BROADCAST } from './services/identity.ts'
import { openIdentityStore } from './store/open.ts'

export interface BootstrapInput {
  email: string
  password: string
  name?: string
  orgName: string
  /** Also mint an API key in the organization (shown once, in the outcome). */
  apiKey?: { name: string; scopes: Scope[] }
}

export interface BootstrapOutcome {
  /** false: the user existed already and was left as it is. */
  created: boolean
  user: { _id: string; email: string; name: string }
  organization: Organization | null
  /**
   * The key asked for: `created` with its secret (shown once), or, when the organization
   * already has an active key of that name (init run again), that key without a secret.
   */
  apiKey: { _id: string; key?: string; scopes: Scope[]; created: boolean } | null
}

/** The rules of the register, create-organization and create-key routes, for bootstrap's input. */
const BootstrapInputSchema = Type.Object({
  email: RegisterRequest.properties.email,
  password: RegisterRequest.properties.password,
  name: Type.Optional(RegisterRequest.properties.name),
  orgName: CreateOrganizationRequest.properties.name,
  keyName: Type.Optional(CreateApiKeyRequest.properties.name),
})

/** 400 VALIDATION_ERROR naming the first input a route would refuse (the password never shown). */
function checkInput(input: BootstrapInput): void {
  const { email, password, name, orgName, apiKey } = input
  const values = { email, password, name, orgName, keyName: apiKey?.name }
  // loadConfig reads an empty value as a setting not given, and `name` and `keyName` are optional:
  // an empty one given here would pass it (a user named "", which register refuses).
  const empty = Object.entries(values).find(([, v]) => v === '')
  if (empty) throw new AppError('VALIDATION_ERROR', `bootstrap: ${empty[0]}: must not be empty`)
  try {
    loadConfig(BootstrapInputSchema, values)
  } catch (err) {
    if (!(err instanceof ConfigError)) throw err
    throw new AppError('VALIDATION_ERROR', err.message.replace(/^invalid configuration: /, 'bootstrap: '))
  }
}

/**
 * Identity's first-install step, the one the BOOTSTRAP_* settings run at start-up: the admin
 * user and the organization (unless the user exists), and optionally the first API key. Reads
 * the store settings identity reads (MONGO_URL, MONGO_DB, DATA_DIR) from `env`, opens the
 * store and closes it again; other tools (the `pm init` command) call this, never the store.
 */
export async function bootstrapIdentity(
  env: Record<string, string | undefined>,
  input: BootstrapInput,
): Promise<BootstrapOutcome> {
  checkInput(input)
  const config = loadIdentityCliConfig(env)
  const store = await openIdentityStore(config)
  try {
    const identity = new IdentityService(store, NO_BROADCAST, undefined, {
      passwordCost: config.PASSWORD_HASH_COST,
      maxApiKeysPerOrganization: config.API_KEY_MAX_PER_ORG,
    })
    const result = await identity.bootstrap(input)
    const { organization, user } = result
    let apiKey: BootstrapOutcome['apiKey'] = null
    if (input.apiKey) {
      if (!organization) throw new Error(`${input.email} belongs to no organization: cannot mint a key`)
      const name = input.apiKey.name.trim()
      const now = Date.now()
      const existing = (await store.listApiKeys(organization._id)).find(
        (k) => k.name === name && !k.revokedAt && (!k.expiresAt || Date.parse(k.expiresAt) > now),
      )
      if (existing) {
        apiKey = { _id: existing._id, scopes: existing.scopes, created: false }
      } else {
        const created = await identity.createApiKey(organization._id, user._id, input.apiKey)
        apiKey = { _id: created.apiKey._id, key: created.key, scopes: created.apiKey.scopes, created: true }
      }
    }
    return {
      created: result.created,
      user: { _id: user._id, email: user.email, name: user.name },
      organization: organization ? publicOrganization(organization) : null,
      apiKey,
    }
  } finally {
    await store.close()
  }
}
