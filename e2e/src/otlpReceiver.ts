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
 * Protobuf's wire format, read field by field: enough of it to read an OTLP trace export
 * (opentelemetry-proto's trace.proto, common.proto) as its JSON mapping, which the checks below
 * share with JSON exports. Length-delimited fields are their bytes; varints and fixed64s numbers.
 */
function protoFields(buf: Buffer): Array<{ field: number; bytes?: Buffer; number?: number }> {
  const out: Array<{ field: number; bytes?: Buffer; number?: number }> = []
  let at = 0
  const varint = (): number => {
    let value = 0
    let scale = 1
    for (;;) {
      const byte = buf[at++]
      if (byte === undefined) throw new Error('protobuf: truncated varint')
      value += (byte & 0x7f) * scale
      if (byte < 0x80) return value
      scale *= 128
    }
  }
  while (at < buf.length) {
    const key = varint()
    const field = Math.floor(key / 8)
    const wire = key % 8
    if (wire === 0) out.push({ field, number: varint() })
    else if (wire === 1) {
      out.push({ field, bytes: buf.subarray(at, at + 8) })
      at += 8
    } else if (wire === 2) {
      const length = varint()
      out.push({ field, bytes: buf.subarray(at, at + length) })
      at += length
    } else if (wire === 5) {
      out.push({ field, bytes: buf.subarray(at, at + 4) })
      at += 4
    } else throw new Error(`protobuf: wire type ${wire} not expected in OTLP traces`)
  }
  return out
}
const each = (buf: Buffer, field: number) =>
  protoFields(buf)
    .filter((f) => f.field === field && f.bytes !== undefined)
    .map((f) => f.bytes as Buffer)
const one = (buf: Buffer, field: number) => protoFields(buf).find((f) => f.field === field)

function protoAnyValue(buf: Buffer): AnyValue {
  const f = protoFields(buf)[0]
  if (!f) return {}
  if (f.field === 1) return { stringValue: f.bytes?.toString('utf8') ?? '' }
  if (f.field === 2) return { boolValue: f.number === 1 }
  if (f.field === 3) return { intValue: f.number ?? 0 }
  if (f.field === 4) return { doubleValue: f.bytes?.readDoubleLE(0) ?? 0 }
  return {}
}
const protoKeyValues = (list: Buffer[]): KeyValue[] =>
  list.map((kv) => ({
    key: one(kv, 1)?.bytes?.toString('utf8') ?? '',
    value: protoAnyValue(one(kv, 2)?.bytes ?? Buffer.alloc(0)),
  }))

/** An OTLP/HTTP protobuf trace export, as the JSON encoding would carry it. */
function fromProtobuf(body: Buffer): ExportRequest {
  return {
    resourceSpans: each(body, 1).map((rs) => ({
      resource: { attributes: protoKeyValues(each(one(rs, 1)?.bytes ?? Buffer.alloc(0), 1)) },
      scopeSpans: each(rs, 2).map((ss) => ({
        spans: each(ss, 2).map((span) => ({
          traceId: one(span, 1)?.bytes?.toString('hex') ?? '',
          spanId: one(span, 2)?.bytes?.toString('hex') ?? '',
          parentSpanId: one(span, 4)?.bytes?.toString('hex') ?? '',
          name: one(span, 5)?.bytes?.toString('utf8') ?? '',
          kind: one(span, 6)?.number ?? 0,
          attributes: protoKeyValues(each(span, 9)),
        })),
      })),
    })),
  }
}

/**
 * A plain HTTP server that takes OTLP/HTTP trace exports (POST /v1/traces, in the protobuf
 * encoding, the services' default, or JSON) and keeps the spans.
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
        const raw = Buffer.concat(chunks)
        let body: ExportRequest
        if (type.startsWith('application/x-protobuf')) body = fromProtobuf(raw)
        else if (type.startsWith('application/json')) body = JSON.parse(raw.toString('utf8')) as ExportRequest
        else {
          res.writeHead(415).end()
          return
        }
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
        // An empty ExportTraceServiceResponse, in the request's encoding.
        if (type.startsWith('application/x-protobuf'))
          res.writeHead(200, { 'content-type': 'application/x-protobuf' }).end()
        else res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
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
