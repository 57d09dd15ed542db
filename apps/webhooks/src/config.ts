import {
  auditRelaySettings,
  busSettings,
  commonSettings,
  loadConfig,
  secretsSettings,
  storeSettings,
} from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

export const WebhooksConfigSchema = Type.Object({
  ...commonSettings,
  ...storeSettings,
  ...busSettings,
  ...secretsSettings,
  ...auditRelaySettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4004 }),
  /** Lets deliveries reach private, loopback and link-local addresses (tests, closed networks). */
  WEBHOOK_ALLOW_PRIVATE_TARGETS: Type.Boolean({ default: false }),
  /** Multiplies the retry schedule (5 s, 5 m, 30 m, ... 24 h); tests shrink it, e.g. 0.001. */
  WEBHOOK_RETRY_SCALE: Type.Number({ minimum: 0, maximum: 100, default: 1 }),
  /** Deadline of one attempt: the host's lookup, connect, headers and the (capped) response body. */
  WEBHOOK_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 120_000, default: 15_000 }),
  /** How often the worker looks for due deliveries (it is also woken by new work and by its own timers). */
  WEBHOOK_POLL_MS: Type.Integer({ minimum: 10, maximum: 60_000, default: 1_000 }),
  /** Attempts in flight at once, per process. */
  WEBHOOK_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 512, default: 16 }),
  /**
   * Of those, the most one organization's deliveries may hold at once (receivers that never answer
   * hold a slot for WEBHOOK_TIMEOUT_MS each): another organization's deliveries are not held up.
   */
  WEBHOOK_MAX_IN_FLIGHT_PER_ORG: Type.Integer({ minimum: 1, maximum: 512, default: 8 }),
  /** Subscriptions one organization may hold. */
  WEBHOOK_MAX_PER_ORG: Type.Integer({ minimum: 1, maximum: 1_000, default: 25 }),
  /** Durable JetStream consumer name: every replica shares it, so each event is handled once. */
  WEBHOOK_CONSUMER: Type.String({
    minLength: 1,
    maxLength: 64,
    pattern: '^[A-Za-z0-9_-]+$',
    default: 'webhooks',
  }),
})
export type WebhooksConfig = Static<typeof WebhooksConfigSchema>

export function loadWebhooksConfig(env?: Record<string, string | undefined>): WebhooksConfig {
  return loadConfig(WebhooksConfigSchema, env)
}
