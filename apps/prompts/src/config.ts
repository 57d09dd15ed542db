import { busSettings, commonSettings, loadConfig, storeSettings } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

export const PromptsConfigSchema = Type.Object({
  ...commonSettings,
  ...storeSettings,
  ...busSettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4002 }),
  /** How often the outbox relay looks for events not yet sent (it is also woken on publish). */
  OUTBOX_POLL_MS: Type.Integer({ minimum: 10, default: 1000 }),
  /**
   * How long a written event waits before the relay sends it. 0 in production; the crash
   * test raises it to kill the process between the write and the send.
   */
  OUTBOX_RELAY_DELAY_MS: Type.Integer({ minimum: 0, default: 0 }),
  /** Sent events are deleted from the outbox after this long (JetStream dedupes for one hour). */
  OUTBOX_RETAIN_MS: Type.Integer({ minimum: 60 * 60 * 1000, default: 24 * 60 * 60 * 1000 }),
  CSV_MAX_BYTES: Type.Integer({ minimum: 1024, default: 10 * 1024 * 1024 }),
  CSV_MAX_ROWS: Type.Integer({ minimum: 1, default: 50_000 }),
  /** Rows written between two progress updates of an import batch. */
  IMPORT_PROGRESS_EVERY: Type.Integer({ minimum: 1, default: 100 }),
  /** An import whose progress has not moved for this long is reported as failed (its writer died). */
  IMPORT_STALE_MS: Type.Integer({ minimum: 1000, default: 120_000 }),
})
export type PromptsConfig = Static<typeof PromptsConfigSchema>

export function loadPromptsConfig(env?: Record<string, string | undefined>): PromptsConfig {
  return loadConfig(PromptsConfigSchema, env)
}
