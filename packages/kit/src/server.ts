import { Readable } from 'node:stream'
import type { FastifyInstance } from 'fastify'
import { Type } from '@sinclair/typebox'
import { ConfigError, loadConfig } from './config.ts'
import { holdContextFrame } from './contextFrame.ts'
import { Metrics, type MetricsServer, serveMetrics } from './metrics.ts'
import { commonSettings, type OtlpProtocol, type TracesSampler } from './settings.ts'
import { type Tracing, type TracingSettings, tracingFor } from './tracing.ts'

export interface ListenOptions {
  host: string
  port: number
  /** Hard limit for a graceful shutdown. */
  shutdownTimeoutMs?: number
  /** Serves these metrics at GET /metrics on `metricsPort` (METRICS_PORT), beside the app. */
  metrics?: Metrics
  metricsPort?: number
  /** Flushed and stopped after the app has closed. */
  tracing?: Tracing | undefined
}

/** A process's metrics when METRICS_PORT is set: nothing is made (or observed) otherwise. */
export function metricsFor(config: { METRICS_PORT?: number | undefined }): Metrics | undefined {
  return config.METRICS_PORT ? new Metrics() : undefined
}

/**
 * Listens, and on SIGTERM/SIGINT stops taking work, lets Fastify's onClose hooks drain
 * consumers and close stores, and exits; a shutdown that hangs is cut off.
 */
export async function runServer(app: FastifyInstance, opts: ListenOptions): Promise<void> {
  let closing = false
  let metricsServer: MetricsServer | undefined
  const shutdown = (signal: string) => {
    if (closing) return
    closing = true
    app.log.info({ signal }, 'shutting down')
    const timer = setTimeout(() => {
      app.log.error('shutdown timed out')
      process.exit(1)
    }, opts.shutdownTimeoutMs ?? 10_000)
    timer.unref()
    app.close().then(
      async () => {
        await metricsServer?.close()
        await opts.tracing?.shutdown().catch(() => {})
        process.exit(0)
      },
      (err: unknown) => {
        app.log.error({ err }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.once('SIGTERM', () => shutdown('SIGTERM'))
  process.once('SIGINT', () => shutdown('SIGINT'))
  await app.listen({ host: opts.host, port: opts.port })
  if (opts.metrics && opts.metricsPort) {
    metricsServer = await serveMetrics(opts.metrics, opts.host, opts.metricsPort)
    app.log.info({ port: metricsServer.port }, 'metrics at GET /metrics')
  }
}

/**
 * A service reads nothing from its standard input, so `process.stdin` is an empty stream, made
 * here before anything can ask for Node's. Node makes its own on first access: where fd 0 is
 * /dev/null (a container's default, `stdio: 'ignore'`) an `fs.ReadStream` on it, and every
 * process that made one was measured with `process.nextTick` about ten times dearer for the rest
 * of its life (50-110 ns a tick against 400-1,170). Nothing of ours reads it, but a namespace
 * import of `node:process` (OpenTelemetry's resources package has one, so tracing loaded it at
 * any ratio) makes Node read every property of `process` to fill the namespace, stdin included
 * (bench/README.md, "process.stdin and nextTick"; docs/decisions.md).
 */
export function emptyStdin(): void {
  const empty = new Readable({ read() {} })
  empty.push(null)
  Object.defineProperty(process, 'stdin', {
    value: empty,
    configurable: true,
    enumerable: true,
    writable: true,
  })
}

/**
 * Entry-point wrapper: the process's context frame is entered first (contextFrame.ts), its stdin
 * is an empty stream (emptyStdin), and a configuration error stops the process with its message.
 */
export async function main(start: () => Promise<void>): Promise<void> {
  holdContextFrame()
  emptyStdin()
  try {
    await start()
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`)
    } else {
      process.stderr.write(`failed to start: ${(err as Error).stack ?? String(err)}\n`)
    }
    process.exit(1)
  }
}

/** The settings a service's process reads for itself: where to listen, metrics and traces. */
export interface ProcessSettings extends TracingSettings {
  HOST: string
  PORT: number
  METRICS_PORT?: number | undefined
  SHUTDOWN_TIMEOUT_MS?: number | undefined
}

/**
 * A service's entry point (its `src/server.ts`): loads its config, builds its app with this
 * process's metrics and tracing, and runs it (runServer); a bad setting stops the process with
 * its message (main).
 */
export function runService<C extends ProcessSettings>(
  name: string,
  loadServiceConfig: () => C,
  buildApp: (options: {
    config: C
    metrics: Metrics | undefined
    tracing: Tracing | undefined
  }) => Promise<FastifyInstance>,
): Promise<void> {
  return main(async () => {
    const config = loadServiceConfig()
    const metrics = metricsFor(config)
    const tracing = await tracingFor(config, name)
    const app = await buildApp({ config, metrics, tracing })
    await runServer(app, {
      host: config.HOST,
      port: config.PORT,
      metrics,
      metricsPort: config.METRICS_PORT,
      tracing,
      ...(config.SHUTDOWN_TIMEOUT_MS !== undefined ? { shutdownTimeoutMs: config.SHUTDOWN_TIMEOUT_MS } : {}),
    })
  })
}

/** The operating settings' schema (a constant: loadConfig compiles each schema once). */
const OperatingSettingsSchema = Type.Object({
  METRICS_PORT: commonSettings.METRICS_PORT,
  SHUTDOWN_TIMEOUT_MS: commonSettings.SHUTDOWN_TIMEOUT_MS,
  HOST: commonSettings.HOST,
  OTEL_EXPORTER_OTLP_ENDPOINT: commonSettings.OTEL_EXPORTER_OTLP_ENDPOINT,
  OTEL_EXPORTER_OTLP_PROTOCOL: commonSettings.OTEL_EXPORTER_OTLP_PROTOCOL,
  OTEL_SERVICE_NAME: commonSettings.OTEL_SERVICE_NAME,
  OTEL_TRACES_SAMPLER: commonSettings.OTEL_TRACES_SAMPLER,
  OTEL_TRACES_SAMPLER_ARG: commonSettings.OTEL_TRACES_SAMPLER_ARG,
  OTEL_BSP_SCHEDULE_DELAY: commonSettings.OTEL_BSP_SCHEDULE_DELAY,
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE: commonSettings.OTEL_BSP_MAX_EXPORT_BATCH_SIZE,
})

/** METRICS_PORT, HOST and the OTEL settings alone, for a launcher that runs several services (the embedded default). */
export function loadOperatingSettings(env?: Record<string, string | undefined>): {
  METRICS_PORT?: number | undefined
  SHUTDOWN_TIMEOUT_MS: number
  HOST: string
  OTEL_EXPORTER_OTLP_ENDPOINT?: string | undefined
  OTEL_EXPORTER_OTLP_PROTOCOL?: OtlpProtocol | undefined
  OTEL_SERVICE_NAME?: string | undefined
  OTEL_TRACES_SAMPLER?: TracesSampler | undefined
  OTEL_TRACES_SAMPLER_ARG?: number | undefined
  OTEL_BSP_SCHEDULE_DELAY?: number | undefined
  OTEL_BSP_MAX_EXPORT_BATCH_SIZE?: number | undefined
} {
  return loadConfig(OperatingSettingsSchema, env)
}
