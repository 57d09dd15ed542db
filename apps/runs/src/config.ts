import {
  auditRelaySettings,
  busSettings,
  commonSettings,
  loadConfig,
  secretsSettings,
  storeSettings,
} from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

export const RunsConfigSchema = Type.Object({
  ...commonSettings,
  ...storeSettings,
  // The bus carries one thing here: the audit entries of connection changes (DESIGN section 15).
  ...busSettings,
  ...secretsSettings,
  ...auditRelaySettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4005 }),
  /** The render service: runs render through its invoke and inject routes, as the gateway calls them. */
  RENDER_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:4003' }),
  /** The prompts service: only to find a draft's prompt by its slug. */
  PROMPTS_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:4002' }),
  /**
   * Hosts (names or IPs, comma-separated) a connection's base URL may name without the SSRF
   * guard: private addresses and plain http allowed (a local Ollama, an internal vLLM).
   */
  PROVIDER_ALLOWED_HOSTS: Type.String({ default: '', pattern: '^[A-Za-z0-9.:\\[\\]_,\\s-]*$' }),
  /** The whole model call's deadline (streamed or not). */
  RUN_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 3_600_000, default: 120_000 }),
  /** Deadline to connect to the provider. */
  RUN_CONNECT_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 120_000, default: 10_000 }),
  /** Model calls of one organization in flight at once, per runs replica (429 RUNS_BUSY beyond). */
  RUN_MAX_CONCURRENT: Type.Integer({ minimum: 1, maximum: 10_000, default: 10 }),
  /** Days a run stays in the log. */
  RUN_RETENTION_DAYS: Type.Integer({ minimum: 1, maximum: 3650, default: 30 }),
  /** Connections one organization may hold. */
  RUN_MAX_CONNECTIONS: Type.Integer({ minimum: 1, maximum: 1_000, default: 50 }),
  /**
   * The most a model's answer may hold (its text and tool-call arguments, UTF-8): a stream past
   * it is stopped, and the run fails (502 PROVIDER_ERROR), as does a longer answer not streamed.
   */
  RUN_MAX_OUTPUT_BYTES: Type.Integer({ minimum: 1024, maximum: 64 * 1024 * 1024, default: 4 * 1024 * 1024 }),
  /** A comment line sent on a silent stream this often, so that no proxy closes it as idle. */
  RUN_HEARTBEAT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: 15_000 }),
})
export type RunsConfig = Static<typeof RunsConfigSchema>

export function loadRunsConfig(env?: Record<string, string | undefined>): RunsConfig {
  return loadConfig(RunsConfigSchema, env)
}
