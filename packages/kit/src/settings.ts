import { Type } from '@sinclair/typebox'

/** OpenTelemetry's standard sampler names (OTEL_TRACES_SAMPLER), those that need no plugin. */
export const TRACES_SAMPLERS = [
  'always_on',
  'always_off',
  'traceidratio',
  'parentbased_always_on',
  'parentbased_always_off',
  'parentbased_traceidratio',
] as const
export type TracesSampler = (typeof TRACES_SAMPLERS)[number]
/** OTLP's encodings over HTTP (OTEL_EXPORTER_OTLP_PROTOCOL); gRPC is not offered. */
export const OTLP_PROTOCOLS = ['http/protobuf', 'http/json'] as const
export type OtlpProtocol = (typeof OTLP_PROTOCOLS)[number]

/** Settings every service shares; each service's config schema spreads these in. */
export const commonSettings = {
  NODE_ENV: Type.Union([Type.Literal('development'), Type.Literal('production'), Type.Literal('test')], {
    default: 'production',
  }),
  LOG_LEVEL: Type.Union(
    ['fatal', 'error', 'warn', 'info', 'debug', 'trace', 'silent'].map((l) => Type.Literal(l)),
    { default: 'info' },
  ),
  HOST: Type.String({ default: '0.0.0.0' }),
  /**
   * When the routes' request and response schemas compile: lazy (the default), on each route's
   * first request; eager, all before the service is ready (a slower start, no first-request cost).
   */
  SCHEMA_COMPILE: Type.Union([Type.Literal('lazy'), Type.Literal('eager')], { default: 'lazy' }),
  /** Serves Prometheus metrics at GET /metrics on this port (never the API's); off when unset. */
  METRICS_PORT: Type.Optional(Type.Integer({ minimum: 1, maximum: 65535 })),
  /**
   * After SIGTERM, how long the requests in flight may finish before the process exits anyway.
   * A streamed run lasts up to RUN_TIMEOUT_MS: the runs service and the gateway in front of it
   * need longer than the default (infra/: 135 s, with a grace period to match).
   */
  SHUTDOWN_TIMEOUT_MS: Type.Integer({ minimum: 1_000, maximum: 3_600_000, default: 10_000 }),
  /** OTLP/HTTP collector (e.g. http://otel-collector:4318): traces are sent to <it>/v1/traces; off when unset. */
  OTEL_EXPORTER_OTLP_ENDPOINT: Type.Optional(Type.String({ pattern: '^https?://' })),
  /**
   * OpenTelemetry's standard OTEL_EXPORTER_OTLP_PROTOCOL: http/protobuf (the default, OTLP's own)
   * or http/json.
   */
  OTEL_EXPORTER_OTLP_PROTOCOL: Type.Optional(Type.Union(OTLP_PROTOCOLS.map((p) => Type.Literal(p)))),
  /** service.name of the traces (default: the service's own name; the embedded default: prompt-service). */
  OTEL_SERVICE_NAME: Type.Optional(Type.String({ minLength: 1 })),
  /**
   * Which requests are traced, by OpenTelemetry's standard names (default parentbased_always_on:
   * every request, or as the caller's traceparent says). With a ratio, OTEL_TRACES_SAMPLER_ARG.
   */
  OTEL_TRACES_SAMPLER: Type.Optional(Type.Union(TRACES_SAMPLERS.map((s) => Type.Literal(s)))),
  /** The share of traces kept by the traceidratio samplers, 0 to 1 (default 1). */
  OTEL_TRACES_SAMPLER_ARG: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
  /**
   * OpenTelemetry's standard OTEL_BSP_SCHEDULE_DELAY: the most milliseconds an ended span waits
   * in its batch before the batch is sent (default 1000; a full batch, 512 spans, goes at once).
   */
  OTEL_BSP_SCHEDULE_DELAY: Type.Optional(Type.Integer({ minimum: 1, maximum: 600_000 })),
  /** OpenTelemetry's standard OTEL_BSP_MAX_EXPORT_BATCH_SIZE: the most spans a batch sends (default 512). */
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: Type.Optional(Type.Integer({ minimum: 1, maximum: 2048 })),
  /** Signs the caller context between the gateway and the services. */
  INTERNAL_AUTH_SECRET: Type.String({ minLength: 32 }),
}

/** Where a service keeps its data: MongoDB when MONGO_URL is set, else a SQLite file. */
export const storeSettings = {
  MONGO_URL: Type.Optional(Type.String({ pattern: '^mongodb(\\+srv)?://' })),
  MONGO_DB: Type.Optional(Type.String({ minLength: 1 })),
  DATA_DIR: Type.String({ default: './data' }),
}

export const busSettings = {
  NATS_URL: Type.Optional(Type.String({ pattern: '^(nats|tls|wss?)://' })),
}

/** Services that relay audit entries to the log's owner (identity, webhooks, runs, experiments): kit/audit.ts. */
export const auditRelaySettings = {
  /** How often the audit relay looks for entries not yet sent (a write also wakes it). */
  AUDIT_RELAY_POLL_MS: Type.Integer({ minimum: 10, default: 1000 }),
  /** Holds each entry back this long before relaying it (the crash test uses it). */
  AUDIT_RELAY_DELAY_MS: Type.Integer({ minimum: 0, maximum: 3_600_000, default: 0 }),
}
