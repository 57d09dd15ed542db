import type { RenderedMessage, RunParams, RunUsage, ToolCall } from '@pm/contracts'

/** What an adapter is asked: one model call. */
export interface ModelCall {
  model: string
  messages: RenderedMessage[]
  params: RunParams
  /** Aborts the call: the client left, or the deadline passed. */
  signal: AbortSignal
  /**
   * Told each piece of a streamed tool call as it comes, before it is kept: a new call itself
   * (TOOL_CALL_BYTES), its id and its name (a new one), and its arguments; what it throws ends
   * the call (RUN_MAX_OUTPUT_BYTES counts them with the text).
   */
  onToolCallPiece?: (piece: string | number) => void
}

/**
 * What one tool call counts against RUN_MAX_OUTPUT_BYTES besides its id, name and arguments: the
 * place it takes in a run's record. Without it, a stream of new calls with nothing in them was
 * never counted, and grew the record without bound.
 */
export const TOOL_CALL_BYTES = 64

/** What an adapter answers, the same for every provider. */
export interface Completion {
  content: string
  toolCalls: ToolCall[]
  /** stop, length, tool_calls, content_filter, or the provider's own word. */
  finishReason: string
  usage: RunUsage
}

/**
 * Told each piece of a streamed answer's text as it comes. A promise answered holds the read of
 * the provider's stream until it settles: a slow reader on the other side slows the provider's
 * read instead of filling this process's memory (backpressure).
 */
export type OnDelta = (content: string) => Promise<void> | undefined

/**
 * One provider behind the same two calls (STYLE: "Provider SDKs sit behind one small interface
 * with one adapter per provider"). `stream` calls `onDelta` with each piece of text as it comes,
 * and reads no further before the promise it answers has settled.
 */
export interface ProviderAdapter {
  complete(call: ModelCall): Promise<Completion>
  stream(call: ModelCall, onDelta: OnDelta): Promise<Completion>
}

/** How an adapter reaches its provider. */
export interface ProviderTarget {
  apiKey: string
  /** null: the provider's own API. */
  baseUrl: string | null
  headers: Record<string, string>
  /** The SDK's fetch and its options (a dispatcher pinned to checked addresses, the connect timeout). */
  fetch: typeof globalThis.fetch
  fetchOptions: Record<string, unknown>
  /** Beyond our own deadline: the SDK's is only a backstop. */
  timeoutMs: number
}
