import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

/** One span as an OTLP/HTTP JSON export carries it, with its resource's service.name. */
export interface ReceivedSpan {
  service: string
  traceId: string
  spanId: string
  parentSpanId: string
  name: string
  kind: number
  attributes: Record<string, unknown>
}

interface AnyValue {
  stringValue?: string
  intValue?: string | number
  boolValue?: boolean
  doubleValue?: number
}
interface KeyValue {
  key: string
  value: AnyValue
}
interface ExportRequest {
  resourceSpans?: Array<{
    resource?: { attributes?: KeyValue[] }
    scopeSpans?: Array<{
      spans?: Array<{
        traceId: string
        spanId: string
        parentSpanId?: string
        name: string
        kind: number
        attributes?: KeyValue[]
      }>
    }>
  }>
}

const anyValue = (v: AnyValue): unknown => v.stringValue ?? v.intValue ?? v.boolValue ?? v.doubleValue
const attrs = (list: KeyValue[] | undefined) =>
  Object.fromEntries((list ?? []).map((kv) => [kv.key, anyValue(kv.value)]))

/**
 * A plain HTTP server that takes OTLP/HTTP trace exports (POST /v1/traces, JSON encoding, as
 * @opentelemetry/exporter-trace-otlp-http sends them) and keeps the spans.
 */
export class OtlpReceiver {
  readonly spans: ReceivedSpan[] = []
  readonly contentTypes = new Set<string>()
  private readonly server: Server
  readonly url: string

  private constructor(server: Server, url: string) {
    this.server = server
    this.url = url
  }

  static async start(): Promise<OtlpReceiver> {
    let receiver: OtlpReceiver | undefined
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        if (req.method !== 'POST' || req.url !== '/v1/traces') {
          res.writeHead(404).end()
          return
        }
        const type = String(req.headers['content-type'] ?? '')
        receiver?.contentTypes.add(type)
        if (!type.startsWith('application/json')) {
          res.writeHead(415).end()
          return
        }
        const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as ExportRequest
        for (const rs of body.resourceSpans ?? []) {
          const service = String(attrs(rs.resource?.attributes)['service.name'] ?? '')
          for (const ss of rs.scopeSpans ?? []) {
            for (const s of ss.spans ?? []) {
              receiver?.spans.push({
                service,
                traceId: s.traceId,
                spanId: s.spanId,
                parentSpanId: s.parentSpanId ?? '',
                name: s.name,
                kind: s.kind,
                attributes: attrs(s.attributes),
              })
            }
          }
        }
        res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    receiver = new OtlpReceiver(server, `http://127.0.0.1:${port}`)
    return receiver
  }

  /** The spans of one trace. */
  trace(traceId: string): ReceivedSpan[] {
    return this.spans.filter((s) => s.traceId === traceId)
  }

  /** The chain of spans from `span` up to its trace's root (as far as they were received). */
  ancestry(span: ReceivedSpan): ReceivedSpan[] {
    const byId = new Map(this.trace(span.traceId).map((s) => [s.spanId, s]))
    const chain = [span]
    let current = span
    while (current.parentSpanId && byId.has(current.parentSpanId)) {
      current = byId.get(current.parentSpanId) as ReceivedSpan
      chain.push(current)
    }
    return chain
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
