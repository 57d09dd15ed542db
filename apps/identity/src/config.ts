import { CreateOrganizationRequest, Email, RegisterRequest } from '@pm/contracts'
import { auditRelaySettings, busSettings, commonSettings, loadConfig, storeSettings } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

/** The cost of new password hashes: log2 of scrypt's N (domain/passwords.ts). */
const passwordSettings = {
  PASSWORD_HASH_COST: Type.Integer({ minimum: 10, maximum: 20, default: 15 }),
}

/** Read by the service and by the CLI (mint-key, bootstrap): both create API keys. */
const apiKeySettings = {
  /** API keys neither revoked nor expired an organization may hold: past it, a create is 409. */
  API_KEY_MAX_PER_ORG: Type.Integer({ minimum: 1, maximum: 100_000, default: 200 }),
}

export const IdentityConfigSchema = Type.Object({
  ...commonSettings,
  ...storeSettings,
  ...busSettings,
  ...auditRelaySettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4001 }),
  JWT_ISSUER: Type.String({ default: 'prompt-service' }),
  JWT_AUDIENCE: Type.String({ default: 'prompt-service-api' }),
  /**
   * Lifetimes under a minute are for tests that watch a token expire (the CLI and the dashboard
   * then renew it before nearly every request): a deployment keeps minutes.
   */
  ACCESS_TOKEN_TTL_SECONDS: Type.Integer({ minimum: 5, maximum: 86_400, default: 900 }),
  REFRESH_TOKEN_TTL_SECONDS: Type.Integer({ minimum: 300, default: 30 * 86_400 }),
  AUTH_ALLOW_SIGNUP: Type.Boolean({ default: false }),
  ...apiKeySettings,
  ...passwordSettings,
  // The rules of the register and create-organization routes (the contract's schemas).
  BOOTSTRAP_ADMIN_EMAIL: Type.Optional(Email),
  BOOTSTRAP_ADMIN_PASSWORD: Type.Optional(RegisterRequest.properties.password),
  BOOTSTRAP_ADMIN_NAME: Type.Optional(RegisterRequest.properties.name),
  BOOTSTRAP_ORG_NAME: Type.Optional(CreateOrganizationRequest.properties.name),
})
export type IdentityConfig = Static<typeof IdentityConfigSchema>

/**
 * What the CLI needs: the store, the bus to announce a revocation to the gateways, and the
 * service's rules for what it creates (a password's cost, the API keys an organization holds).
 */
export const IdentityCliConfigSchema = Type.Object({
  ...storeSettings,
  ...busSettings,
  ...passwordSettings,
  ...apiKeySettings,
})
export type IdentityCliConfig = Static<typeof IdentityCliConfigSchema>

export function loadIdentityCliConfig(env?: Record<string, string | undefined>): IdentityCliConfig {
  return loadConfig(IdentityCliConfigSchema, env)
}

export function loadIdentityConfig(env?: Record<string, string | undefined>): IdentityConfig {
  return loadConfig(IdentityConfigSchema, env)
}
