import { answerTooLong } from '../domain/failure.ts'

const MiB = 1024 * 1024

/**
 * The most a provider may send for an answer of RUN_MAX_OUTPUT_BYTES: the body of an answer not
 * streamed, or one event of a stream. JSON escapes take up to 6 bytes for one (`\u0000`); the
 * envelope and the fields not counted as output (usage, logprobs, a reasoning text) take the rest.
 */
export function wireLimit(maxOutputBytes: number): number {
  return 8 * maxOutputBytes + MiB
}

const LF = 0x0a
const CR = 0x0d

/**
 * Errors the stream once one server-sent event (the bytes up to a blank line) passes `limit`.
 * The SDKs' decoders hold an event whole until its blank line: a line without end, or data lines
 * without a blank one, filled the memory until the deadline (4 GB in 13 s from a local server).
 * Lines end with CRLF, LF or CR, as the SSE specification has it.
 */
function eventBound(limit: number, error: () => Error): TransformStream<Uint8Array, Uint8Array> {
  let event = 0
  let line = 0
  let afterCr = false
  return new TransformStream({
    transform(chunk, controller) {
      for (let i = 0; i < chunk.length; i++) {
        const byte = chunk[i]
        if (byte === LF && afterCr) {
          afterCr = false
          continue
        }
        afterCr = byte === CR
        if (byte === LF || byte === CR) {
          if (line === 0) event = 0
          line = 0
        } else {
          line++
          event++
        }
      }
      if (event > limit) throw error()
      controller.enqueue(chunk)
    },
  })
}

/** Errors the stream once the body passes `limit` (the SDKs read an answer not streamed whole). */
function totalBound(limit: number, error: () => Error): TransformStream<Uint8Array, Uint8Array> {
  let total = 0
  return new TransformStream({
    transform(chunk, controller) {
      total += chunk.byteLength
      if (total > limit) throw error()
      controller.enqueue(chunk)
    },
  })
}

/**
 * The SDKs' fetch, with the provider's answer bounded as it is read (decoded: a gzip bomb counts
 * what it unpacks to): a stream's events, or a whole body, past `wireLimit(maxOutputBytes)` fail
 * the call with the error of an answer past RUN_MAX_OUTPUT_BYTES, and the connection is closed
 * (the stream's cancellation reaches fetch). Without it a provider could fill the memory before
 * the answer's own size was checked.
 */
export function boundedFetch(
  fetch: typeof globalThis.fetch,
  maxOutputBytes: number,
): typeof globalThis.fetch {
  const limit = wireLimit(maxOutputBytes)
  const error = () => answerTooLong(maxOutputBytes)
  return (async (input: Parameters<typeof fetch>[0], init?: Parameters<typeof fetch>[1]) => {
    const res = await fetch(input, init)
    if (!res.body) return res
    const sse = /^\s*text\/event-stream/i.test(res.headers.get('content-type') ?? '')
    const body = res.body.pipeThrough(sse ? eventBound(limit, error) : totalBound(limit, error))
    return new Response(body, { status: res.status, statusText: res.statusText, headers: res.headers })
  }) as typeof globalThis.fetch
}
