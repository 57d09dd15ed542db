import { auditRelaySettings, busSettings, commonSettings, loadConfig, storeSettings } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

export const ExperimentsConfigSchema = Type.Object({
  ...commonSettings,
  ...storeSettings,
  ...busSettings,
  ...auditRelaySettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4006 }),
  /** The prompts service: variants are checked against it when an experiment is created. */
  PROMPTS_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:4002' }),
  /** The runs service: each unit is one run (rendering and the model call stay there). */
  RUNS_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:4005' }),
  /** Units in flight at once per organization, in this process. */
  EXPERIMENT_ORG_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 256, default: 8 }),
  /** Units in flight at once per experiment when the request names none. */
  EXPERIMENT_DEFAULT_CONCURRENCY: Type.Integer({ minimum: 1, maximum: 16, default: 4 }),
  /**
   * How long a claimed unit is this process's: renewed while the unit runs, so after a crash its
   * units are taken again once this has passed since the last renewal.
   */
  EXPERIMENT_LEASE_MS: Type.Integer({ minimum: 500, maximum: 3_600_000, default: 150_000 }),
  /** How often a running experiment's status is read again (cancel from another replica). */
  EXPERIMENT_POLL_MS: Type.Integer({ minimum: 10, maximum: 60_000, default: 500 }),
  /** The deadline of one call to the runs service. */
  EXPERIMENT_CALL_TIMEOUT_MS: Type.Integer({ minimum: 100, maximum: 600_000, default: 130_000 }),
  /**
   * How long one `regex` or `json-schema` evaluation of one output may take (it runs in a worker
   * thread, which is stopped past this): the unit's evaluator then gets an error, not a score.
   */
  EXPERIMENT_EVALUATOR_TIMEOUT_MS: Type.Integer({ minimum: 10, maximum: 600_000, default: 2_000 }),
  /** The longest wait a provider's Retry-After is honoured for (a longer one waits this long). */
  EXPERIMENT_MAX_BACKOFF_MS: Type.Integer({ minimum: 0, maximum: 600_000, default: 60_000 }),
  /**
   * How many 429s one unit may be answered: the last one records the unit as failed ("the provider
   * kept answering 429"), so a provider that always answers 429 ends the experiment.
   */
  EXPERIMENT_MAX_RATE_LIMITED_ATTEMPTS: Type.Integer({ minimum: 1, maximum: 1_000, default: 20 }),
  /** Durable JetStream consumer of queued experiments, shared by every replica. */
  EXPERIMENT_CONSUMER: Type.String({
    minLength: 1,
    maxLength: 64,
    pattern: '^[A-Za-z0-9_-]+$',
    default: 'experiments',
  }),
})
export type ExperimentsConfig = Static<typeof ExperimentsConfigSchema>

export function loadExperimentsConfig(env?: Record<string, string | undefined>): ExperimentsConfig {
  return loadConfig(ExperimentsConfigSchema, env)
}
