import type { ToolCall } from '@pm/contracts'
import OpenAI from 'openai'
import { streamEndedEarly } from '../../domain/failure.ts'
import type { Completion, ModelCall, ProviderAdapter, ProviderTarget } from './types.ts'

type ChatParams = OpenAI.Chat.Completions.ChatCompletionCreateParamsNonStreaming

/** The request body: the params are OpenAI's own names, passed as they are. */
function body(call: ModelCall): ChatParams {
  return {
    ...(call.params as Omit<ChatParams, 'model' | 'messages'>),
    model: call.model,
    messages: call.messages.map((m) => ({ role: m.role, content: m.content })) as ChatParams['messages'],
  }
}

/** OpenAI chat completions, and every server that speaks it (`openai-compatible`). */
export class OpenAIAdapter implements ProviderAdapter {
  private readonly client: OpenAI

  constructor(target: ProviderTarget) {
    this.client = new OpenAI({
      apiKey: target.apiKey,
      ...(target.baseUrl ? { baseURL: target.baseUrl } : {}),
      defaultHeaders: target.headers,
      maxRetries: 0,
      timeout: target.timeoutMs,
      fetch: target.fetch,
      fetchOptions: target.fetchOptions,
    })
  }

  async complete(call: ModelCall): Promise<Completion> {
    const answer = await this.client.chat.completions.create(body(call), { signal: call.signal })
    const choice = answer.choices[0]
    const toolCalls: ToolCall[] = []
    for (const t of choice?.message.tool_calls ?? []) {
      if (t.type === 'function')
        toolCalls.push({ id: t.id, name: t.function.name, arguments: t.function.arguments })
    }
    return {
      content: choice?.message.content ?? '',
      toolCalls,
      finishReason: choice?.finish_reason ?? 'stop',
      usage: {
        inputTokens: answer.usage?.prompt_tokens ?? 0,
        outputTokens: answer.usage?.completion_tokens ?? 0,
      },
    }
  }

  async stream(call: ModelCall, onDelta: (content: string) => void): Promise<Completion> {
    const stream = await this.client.chat.completions.create(
      { ...body(call), stream: true, stream_options: { include_usage: true } },
      { signal: call.signal },
    )
    let content = ''
    let finishReason = 'stop'
    // A choice's finish_reason: without one the answer was cut.
    let ended = false
    let usage = { inputTokens: 0, outputTokens: 0 }
    const calls = new Map<number, ToolCall>()
    for await (const chunk of stream) {
      if (chunk.usage)
        usage = { inputTokens: chunk.usage.prompt_tokens, outputTokens: chunk.usage.completion_tokens }
      const choice = chunk.choices[0]
      if (!choice) continue
      const piece = choice.delta.content
      if (piece) {
        content += piece
        onDelta(piece)
      }
      for (const t of choice.delta.tool_calls ?? []) {
        const known = calls.get(t.index) ?? { id: '', name: '', arguments: '' }
        if (t.id) known.id = t.id
        if (t.function?.name) known.name += t.function.name
        if (t.function?.arguments) known.arguments += t.function.arguments
        calls.set(t.index, known)
      }
      if (choice.finish_reason) {
        finishReason = choice.finish_reason
        ended = true
      }
    }
    // An aborted stream also ends without one: that is the caller's to tell (runs.ts).
    if (!ended && !call.signal.aborted) throw streamEndedEarly('a finish_reason')
    return { content, toolCalls: [...calls.values()], finishReason, usage }
  }
}
