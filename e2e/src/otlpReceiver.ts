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

/** One protobuf field: a length-delimited or fixed field's bytes, or a varint's number. */
interface ProtoField {
  bytes?: Buffer
  number?: number
}
/**
 * A protobuf message read once into its fields by number: enough of the wire format to read an
 * OTLP trace export (opentelemetry-proto's trace.proto, common.proto) as its JSON mapping, which
 * the checks below share with JSON exports.
 */
function protoMessage(buf: Buffer): Map<number, ProtoField[]> {
  const fields = new Map<number, ProtoField[]>()
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
  const take = (length: number): ProtoField => {
    const bytes = buf.subarray(at, at + length)
    at += length
    return { bytes }
  }
  while (at < buf.length) {
    const key = varint()
    const wire = key % 8
    let field: ProtoField
    if (wire === 0) field = { number: varint() }
    else if (wire === 1) field = take(8)
    else if (wire === 2) field = take(varint())
    else if (wire === 5) field = take(4)
    else throw new Error(`protobuf: wire type ${wire} not expected in OTLP traces`)
    const number = Math.floor(key / 8)
    const seen = fields.get(number)
    if (seen) seen.push(field)
    else fields.set(number, [field])
  }
  return fields
}
const EMPTY = Buffer.alloc(0)
/** The messages of a message field (each, where it repeats), read. */
const messages = (m: Map<number, ProtoField[]>, n: number) =>
  (m.get(n) ?? []).map((f) => protoMessage(f.bytes ?? EMPTY))
const bytesOf = (m: Map<number, ProtoField[]>, n: number) => m.get(n)?.[0]?.bytes ?? EMPTY

function protoAnyValue(m: Map<number, ProtoField[]>): AnyValue {
  if (m.has(1)) return { stringValue: bytesOf(m, 1).toString('utf8') }
  if (m.has(2)) return { boolValue: m.get(2)?.[0]?.number === 1 }
  if (m.has(3)) return { intValue: m.get(3)?.[0]?.number ?? 0 }
  if (m.has(4)) return { doubleValue: bytesOf(m, 4).readDoubleLE(0) }
  return {}
}
const protoKeyValues = (list: Map<number, ProtoField[]>[]): KeyValue[] =>
  list.map((kv) => ({
    key: bytesOf(kv, 1).toString('utf8'),
    value: protoAnyValue(messages(kv, 2)[0] ?? new Map()),
  }))

/** An OTLP/HTTP protobuf trace export, as the JSON encoding would carry it. */
function fromProtobuf(body: Buffer): ExportRequest {
  return {
    resourceSpans: messages(protoMessage(body), 1).map((rs) => ({
      resource: { attributes: protoKeyValues(messages(messages(rs, 1)[0] ?? new Map(), 1)) },
      scopeSpans: messages(rs, 2).map((ss) => ({
        spans: messages(ss, 2).map((span) => ({
          traceId: bytesOf(span, 1).toString('hex'),
          spanId: bytesOf(span, 2).toString('hex'),
          parentSpanId: bytesOf(span, 4).toString('hex'),
          name: bytesOf(span, 5).toString('utf8'),
          kind: span.get(6)?.[0]?.number ?? 0,
          attributes: protoKeyValues(messages(span, 9)),
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
