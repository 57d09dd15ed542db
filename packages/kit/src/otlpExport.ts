import { readFileSync } from 'node:fs'
import { resolve } from 'node:path'
import { promisify } from 'node:util'
import { gzip as gzipCallback } from 'node:zlib'
import { getStringFromEnv, parseKeyPairsIntoRecord } from '@opentelemetry/core'
import {
  ExporterMetrics,
  type ExportResponse,
  createOtlpNetworkExportDelegate,
  getSharedConfigurationDefaults,
  type IExporterTransport,
  mergeOtlpSharedConfigurationWithDefaults,
  OTLPExporterBase,
  OTLPExporterError,
} from '@opentelemetry/otlp-exporter-base'
import { getSharedConfigurationFromEnvironment } from '@opentelemetry/otlp-exporter-base/node-http'
import { JsonTraceSerializer, TraceExporterMetricsHelper } from '@opentelemetry/otlp-transformer'
import type { ReadableSpan, SpanExporter } from '@opentelemetry/sdk-trace'
import { Pool } from 'undici'
import { ConfigError } from './config.ts'
import { protobufTraceSerializer } from './otlpProtobuf.ts'
import type { OtlpProtocol } from './settings.ts'

/**
 * OTLP/HTTP trace export sent through undici, not Node's `http` client: OpenTelemetry's JSON
 * serializer (its protobuf one's bytes are written by otlpProtobuf.ts, in one pass), concurrency
 * limit and partial-success handling (`createOtlpNetworkExportDelegate`, its documented seam for
 * a transport of one's own), this file's transport. Node's HTTP client
 * runs through the same code as the server every request goes through (OutgoingMessage,
 * IncomingMessage, sockets, streams); the SDK's exporter calling it once a second left that
 * shared code's inline caches polymorphic and cost every request of a process traced at 0.1
 * several per cent, about half of what tracing at 0.1 cost in all (bench/README.md, "The export
 * through undici"). undici is what the services already call each other with.
 *
 * Read as the SDK's exporter reads them: OTEL_EXPORTER_OTLP_[TRACES_]TIMEOUT (default 10 s),
 * OTEL_EXPORTER_OTLP_[TRACES_]COMPRESSION (`gzip` or `none`) and OTEL_EXPORTER_OTLP_[TRACES_]HEADERS
 * (`key=value,...`, percent-encoded values), and for an https endpoint
 * OTEL_EXPORTER_OTLP_[TRACES_]CERTIFICATE (the PEM file of the CAs that sign the collector's
 * certificate, instead of the system's), OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_CERTIFICATE and
 * OTEL_EXPORTER_OTLP_[TRACES_]CLIENT_KEY (mutual TLS). Retried as the SDK retries: 429, 502, 503 and 504
 * and a refused or reset connection, with backoff (or the collector's Retry-After) within the
 * timeout.
 */

const RETRYABLE_STATUS = new Set([429, 502, 503, 504])
const RETRYABLE_NETWORK = new Set(['ECONNRESET', 'ECONNREFUSED', 'EPIPE', 'ETIMEDOUT', 'UND_ERR_SOCKET'])
/** The most of a collector's answer read (its partial-success message): what the SDK's transport reads. */
const MAX_RESPONSE_BYTES = 4 * 1024 * 1024
const ATTEMPTS = 5
const FIRST_BACKOFF_MS = 1_000
const MAX_BACKOFF_MS = 5_000
const gzip = promisify(gzipCallback)

/** A Retry-After header in milliseconds (delta-seconds or an HTTP date), as the SDK reads it. */
export function retryAfterMs(value: string | string[] | undefined): number | undefined {
  const header = Array.isArray(value) ? value[0] : value
  if (header === undefined) return undefined
  const seconds = Number.parseInt(header, 10)
  if (Number.isInteger(seconds)) return seconds > 0 ? seconds * 1_000 : 0
  const at = new Date(header).getTime()
  return Number.isNaN(at) ? undefined : Math.max(0, at - Date.now())
}

/** The headers OTEL_EXPORTER_OTLP_HEADERS and OTEL_EXPORTER_OTLP_TRACES_HEADERS name (the latter wins), names lower-cased. */
function headersFromEnvironment(): Record<string, string> {
  const headers: Record<string, string> = {}
  for (const name of ['OTEL_EXPORTER_OTLP_HEADERS', 'OTEL_EXPORTER_OTLP_TRACES_HEADERS']) {
    for (const [key, value] of Object.entries(parseKeyPairsIntoRecord(getStringFromEnv(name)))) {
      headers[key.toLowerCase()] = value
    }
  }
  return headers
}

export interface OtlpTls {
  ca?: Buffer
  cert?: Buffer
  key?: Buffer
}

/**
 * The TLS files the OTel variables name for an https endpoint, the TRACES_ one before the
 * general one, read now (a relative path from the working directory, as the SDK reads it).
 * Unlike the SDK, which warns
 * and sends without them, a file that cannot be read stops the start with its variable's name:
 * traces sent without the operator's CA or client certificate would only fail later, quietly.
 */
export function tlsFromEnvironment(env: NodeJS.ProcessEnv = process.env): OtlpTls {
  /** The variable that names `suffix`'s file (the TRACES_ one first), and the file read. */
  const read = (suffix: string): { name: string; bytes: Buffer } | undefined => {
    for (const name of [`OTEL_EXPORTER_OTLP_TRACES_${suffix}`, `OTEL_EXPORTER_OTLP_${suffix}`]) {
      const file = env[name]?.trim()
      if (!file) continue
      try {
        return { name, bytes: readFileSync(resolve(process.cwd(), file)) }
      } catch (err) {
        throw new ConfigError(
          `${name}: cannot read ${file} (${(err as NodeJS.ErrnoException).code ?? String(err)})`,
        )
      }
    }
    return undefined
  }
  const ca = read('CERTIFICATE')
  const cert = read('CLIENT_CERTIFICATE')
  const key = read('CLIENT_KEY')
  const half = cert ?? key
  if (half && !(cert && key))
    throw new ConfigError(
      `${half.name}: set with its ${cert ? 'CLIENT_KEY' : 'CLIENT_CERTIFICATE'} or not at all`,
    )
  return {
    ...(ca ? { ca: ca.bytes } : {}),
    ...(cert ? { cert: cert.bytes } : {}),
    ...(key ? { key: key.bytes } : {}),
  }
}

/** POSTs each serialized batch to `url` through one small undici pool, retrying what may be retried. */
export class UndiciOtlpTransport implements IExporterTransport {
  private readonly pool: Pool
  private readonly path: string
  private readonly headers: Record<string, string>
  private readonly compression: 'gzip' | 'none'

  /** `tls`: the CA and client pair of an https endpoint (tlsFromEnvironment); the system's CAs without. */
  constructor(url: string, contentType: string, compression: 'gzip' | 'none', tls: OtlpTls = {}) {
    const target = new URL(url)
    this.compression = compression
    this.pool = new Pool(target.origin, {
      connections: 2,
      keepAliveTimeout: 30_000,
      ...(Object.keys(tls).length > 0 ? { connect: tls } : {}),
    })
    this.path = `${target.pathname}${target.search}`
    this.headers = {
      ...headersFromEnvironment(),
      'content-type': contentType,
      'user-agent': 'prompt-service (OpenTelemetry OTLP/HTTP)',
      ...(compression === 'gzip' ? { 'content-encoding': 'gzip' } : {}),
    }
  }

  async send(data: Uint8Array, timeoutMillis: number): Promise<ExportResponse> {
    const deadline = Date.now() + timeoutMillis
    const body = this.compression === 'gzip' ? await gzip(data) : data
    let backoff = FIRST_BACKOFF_MS
    let result = await this.post(body, timeoutMillis)
    for (let attempt = 1; attempt < ATTEMPTS && result.status === 'retryable'; attempt++) {
      const jittered = Math.min(backoff * (0.8 + Math.random() * 0.4), MAX_BACKOFF_MS)
      backoff *= 1.5
      const wait = result.retryInMillis ?? jittered
      if (Date.now() + wait >= deadline) break
      await new Promise((resolve) => setTimeout(resolve, wait).unref())
      result = await this.post(body, deadline - Date.now())
    }
    return result
  }

  private async post(body: Uint8Array, timeoutMs: number): Promise<ExportResponse> {
    try {
      const res = await this.pool.request({
        method: 'POST',
        path: this.path,
        headers: this.headers,
        body,
        signal: AbortSignal.timeout(Math.max(1, timeoutMs)),
      })
      const chunks: Buffer[] = []
      let size = 0
      for await (const chunk of res.body as AsyncIterable<Buffer>) {
        size += chunk.length
        if (size > MAX_RESPONSE_BYTES) {
          res.body.destroy()
          return { status: 'failure', error: new Error('OTLP export: the collector answered over 4 MiB') }
        }
        chunks.push(chunk)
      }
      const answer = Buffer.concat(chunks)
      if (res.statusCode >= 200 && res.statusCode < 300) return { status: 'success', data: answer }
      if (RETRYABLE_STATUS.has(res.statusCode)) {
        const retryInMillis = retryAfterMs(res.headers['retry-after'])
        return { status: 'retryable', ...(retryInMillis !== undefined ? { retryInMillis } : {}) }
      }
      return {
        status: 'failure',
        error: new OTLPExporterError(`HTTP ${res.statusCode}`, res.statusCode, answer.toString('utf8')),
      }
    } catch (err) {
      const error = err instanceof Error ? err : new Error(String(err))
      const code = (err as { code?: unknown }).code
      const retryable =
        error.name === 'TimeoutError' || (typeof code === 'string' && RETRYABLE_NETWORK.has(code))
      return retryable ? { status: 'retryable', error } : { status: 'failure', error }
    }
  }

  shutdown(): void {
    void this.pool.close()
  }
}

/** The trace exporter to `url` (`<endpoint>/v1/traces`) in `protocol`'s encoding. */
export function otlpTraceExporter(url: string, protocol: OtlpProtocol = 'http/protobuf'): SpanExporter {
  const config = mergeOtlpSharedConfigurationWithDefaults(
    {},
    getSharedConfigurationFromEnvironment('TRACES'),
    getSharedConfigurationDefaults(),
  )
  const json = protocol === 'http/json'
  const transport = new UndiciOtlpTransport(
    url,
    json ? 'application/json' : 'application/x-protobuf',
    config.compression,
    // Only an https endpoint uses them (nor are the files read for an http one).
    url.startsWith('https:') ? tlsFromEnvironment() : {},
  )
  // No meter provider: the SDK's own exporter metrics go to the global one, a no-op here.
  const metrics = new ExporterMetrics<ReadableSpan[]>({
    componentType: 'otlp_http_span_exporter',
    metricsHelper: TraceExporterMetricsHelper,
    url,
    meterProvider: undefined,
    responseAttributesFromError: (error) =>
      error instanceof OTLPExporterError && error.code !== undefined
        ? { 'http.response.status_code': error.code }
        : {},
  })
  return new OTLPExporterBase(
    createOtlpNetworkExportDelegate(
      config,
      json ? JsonTraceSerializer : protobufTraceSerializer,
      metrics,
      transport,
    ),
  )
}
