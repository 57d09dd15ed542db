import { busSettings, commonSettings, loadConfig, storeSettings } from '@pm/kit'
import { type Static, Type } from '@sinclair/typebox'

/** 16 MiB (BSON's largest document) less 64 KiB. */
export const CSV_MAX_BYTES_LIMIT = 16 * 1024 * 1024 - 64 * 1024

export const PromptsConfigSchema = Type.Object({
  ...commonSettings,
  ...storeSettings,
  ...busSettings,
  PORT: Type.Integer({ minimum: 1, maximum: 65535, default: 4002 }),
  /** Identity, asked on each promote which environments the organization protects (DESIGN section 15). */
  IDENTITY_URL: Type.String({ pattern: '^https?://', default: 'http://127.0.0.1:4001' }),
  /** How often the outbox relay looks for events not yet sent (it is also woken on publish). */
  OUTBOX_POLL_MS: Type.Integer({ minimum: 10, default: 1000 }),
  /**
   * How long a written event waits before the relay sends it. 0 in production; the crash
   * test raises it to kill the process between the write and the send.
   */
  OUTBOX_RELAY_DELAY_MS: Type.Integer({ minimum: 0, default: 0 }),
  /** Audit log entries are deleted after this many days (DESIGN section 15). */
  AUDIT_RETENTION_DAYS: Type.Integer({ minimum: 1, default: 365 }),
  /**
   * Durable JetStream consumer of the audit entries identity and webhooks relay
   * (SUBJECTS.auditEntry): every replica shares it, and each entry is stored once by its id.
   */
  AUDIT_CONSUMER: Type.String({
    minLength: 1,
    maxLength: 64,
    pattern: '^[A-Za-z0-9_-]+$',
    default: 'prompts-audit',
  }),
  /** Sent events are deleted from the outbox after this long (JetStream dedupes for one hour). */
  OUTBOX_RETAIN_MS: Type.Integer({ minimum: 60 * 60 * 1000, default: 24 * 60 * 60 * 1000 }),
  /**
   * The file is kept as one document in MongoDB (`import_files`) while its batch runs: BSON
   * refuses a document over 16 MiB, so the limit stays under it with room for the document's
   * other fields.
   */
  CSV_MAX_BYTES: Type.Integer({ minimum: 1024, maximum: CSV_MAX_BYTES_LIMIT, default: 10 * 1024 * 1024 }),
  CSV_MAX_ROWS: Type.Integer({ minimum: 1, default: 50_000 }),
  /**
   * How long a process holds an import batch without renewing it (it renews every third of
   * this): after a crash, another process (or the restarted one) resumes the batch this long
   * after the last renewal at most.
   */
  IMPORT_LEASE_MS: Type.Integer({ minimum: 1000, default: 5000 }),
  /** How often each process looks for import batches to resume. */
  IMPORT_POLL_MS: Type.Integer({ minimum: 100, default: 1000 }),
  /** How long after an import ends the same file (or Idempotency-Key) still answers that batch. */
  IMPORT_DEDUPE_MS: Type.Integer({ minimum: 0, default: 24 * 60 * 60 * 1000 }),
  /** A pause after each imported row: 0 in production; the crash tests slow an import with it. */
  IMPORT_ROW_DELAY_MS: Type.Integer({ minimum: 0, default: 0 }),
})
export type PromptsConfig = Static<typeof PromptsConfigSchema>

export function loadPromptsConfig(env?: Record<string, string | undefined>): PromptsConfig {
  return loadConfig(PromptsConfigSchema, env)
}
