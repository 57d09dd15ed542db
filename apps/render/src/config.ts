import { busSettings, commonSettings, loadConfig } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

export const RenderConfigSchema = Type.Object({
  ...commonSettings,
  ...busSettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4003 }),
  PROMPTS_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:4002' }),
  /** Published snapshots never change: how many compiled ones to keep. */
  SNAPSHOT_CACHE_SIZE: Type.Integer({ minimum: 1, default: 5_000 }),
  /** What moves (current version, pins, visibility) is kept this long unless an event drops it first. */
  RESOLVE_CACHE_TTL_MS: Type.Integer({ minimum: 0, default: 5_000 }),
  RESOLVE_CACHE_SIZE: Type.Integer({ minimum: 1, default: 20_000 }),
})
export type RenderConfig = Static<typeof RenderConfigSchema>

export function loadRenderConfig(env?: Record<string, string | undefined>): RenderConfig {
  return loadConfig(RenderConfigSchema, env)
}
