import { busSettings, commonSettings, loadConfig } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

export const RenderConfigSchema = Type.Object({
  ...commonSettings,
  ...busSettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4003 }),
  PROMPTS_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:4002' }),
  /** Published snapshots never change: how many compiled ones to keep... */
  SNAPSHOT_CACHE_SIZE: Type.Integer({ minimum: 1, default: 5_000 }),
  /** ...and how many bytes they may take in all (approximately; a template may be 100,000 characters). */
  SNAPSHOT_CACHE_MAX_BYTES: Type.Integer({ minimum: 1_000_000, default: 64 * 1024 * 1024 }),
  /**
   * What moves (current version, pins, visibility, existence) is kept this long unless a change
   * event drops it first; it bounds staleness if an event is lost. 0 turns the cache off.
   */
  RESOLVE_CACHE_TTL_MS: Type.Integer({ minimum: 0, default: 5_000 }),
  RESOLVE_CACHE_SIZE: Type.Integer({ minimum: 1, default: 20_000 }),
  /**
   * Largest rendered text, in UTF-8 bytes (invoke, inject, public invoke): a bigger one is
   * refused with 422 RENDER_TOO_LARGE before it is built.
   */
  RENDER_MAX_OUTPUT_BYTES: Type.Integer({ minimum: 1024, default: 1024 * 1024 }),
  /** How often the invocations per split variant are sent to the prompts service (at most 10 s, DESIGN section 15). */
  SPLIT_COUNTS_FLUSH_MS: Type.Integer({ minimum: 100, maximum: 10_000, default: 5_000 }),
  /** Keep-alive connections to the prompts service. */
  PROMPTS_CONNECTIONS: Type.Integer({ minimum: 1, default: 32 }),
  /**
   * The most one lookup at the prompts service may take, connect to last byte; then 504
   * UPSTREAM_TIMEOUT. Below the gateway's UPSTREAM_TIMEOUT_MS (30 s), so that the caller gets
   * this answer rather than the gateway's.
   */
  PROMPTS_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 120_000, default: 10_000 }),
})
export type RenderConfig = Static<typeof RenderConfigSchema>

export function loadRenderConfig(env?: Record<string, string | undefined>): RenderConfig {
  return loadConfig(RenderConfigSchema, env)
}
