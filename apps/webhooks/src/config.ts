import { busSettings, commonSettings, loadConfig, storeSettings } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

export const WebhooksConfigSchema = Type.Object({
  ...commonSettings,
  ...storeSettings,
  ...busSettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4004 }),
  /** Lets deliveries reach private, loopback and link-local addresses (tests, closed networks). */
  WEBHOOK_ALLOW_PRIVATE_TARGETS: Type.Boolean({ default: false }),
})
export type WebhooksConfig = Static<typeof WebhooksConfigSchema>

export function loadWebhooksConfig(env?: Record<string, string | undefined>): WebhooksConfig {
  return loadConfig(WebhooksConfigSchema, env)
}
