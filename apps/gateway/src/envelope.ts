import type { Readable } from 'node:stream'

/** What reply-from hands over of the upstream's answer. */
export interface UpstreamResponse {
  statusCode: number
  stream: Readable
}

const ENVELOPE_OPEN = Buffer.from('{"data":')
const ENVELOPE_NULL = Buffer.from('null')
const ENVELOPE_CLOSE = Buffer.from('}')

/** Successful JSON bodies become {"data": ...}; everything else passes through unchanged. */
export function envelope(
  reply: { getHeader(name: string): unknown; send(payload: unknown): unknown },
  res: UpstreamResponse,
): Promise<void> {
  const type = String(reply.getHeader('content-type') ?? '')
  if (
    res.statusCode < 200 ||
    res.statusCode >= 300 ||
    res.statusCode === 204 ||
    !type.includes('application/json')
  ) {
    reply.send(res.stream)
    return Promise.resolve()
  }
  // Events rather than an async iterator, and one copy: this runs on every invoke.
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [ENVELOPE_OPEN]
    let size = ENVELOPE_OPEN.length + ENVELOPE_CLOSE.length
    res.stream.on('data', (chunk: Buffer | string) => {
      const buf = typeof chunk === 'string' ? Buffer.from(chunk) : chunk
      chunks.push(buf)
      size += buf.length
    })
    res.stream.once('error', reject)
    res.stream.once('end', () => {
      if (chunks.length === 1) {
        chunks.push(ENVELOPE_NULL)
        size += ENVELOPE_NULL.length
      }
      chunks.push(ENVELOPE_CLOSE)
      reply.send(Buffer.concat(chunks, size))
      resolve()
    })
  })
}
