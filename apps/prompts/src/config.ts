import { busSettings, commonSettings, loadConfig, storeSettings } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

export const PromptsConfigSchema = Type.Object({
  ...commonSettings,
  ...storeSettings,
  ...busSettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4002 }),
  /** How often the outbox relay looks for events not yet sent (it is also woken on publish). */
  OUTBOX_POLL_MS: Type.Integer({ minimum: 10, default: 1000 }),
  CSV_MAX_BYTES: Type.Integer({ minimum: 1024, default: 10 * 1024 * 1024 }),
  CSV_MAX_ROWS: Type.Integer({ minimum: 1, default: 50_000 }),
})
export type PromptsConfig = Static<typeof PromptsConfigSchema>

export function loadPromptsConfig(env?: Record<string, string | undefined>): PromptsConfig {
  return loadConfig(PromptsConfigSchema, env)
}
