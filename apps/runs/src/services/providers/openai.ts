import type { ToolCall } from '@pm/contracts'
import OpenAI from 'openai'
import { invalidAnswer, listOf, optionalText, tokenCount } from '../../domain/answer.ts'
import { streamEndedEarly } from '../../domain/failure.ts'
import type { Completion, ModelCall, OnDelta, ProviderAdapter, ProviderTarget } from './types.ts'
import { TOOL_CALL_BYTES } from './types.ts'

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
    // Checked as it is read: the SDK does not (domain/answer.ts).
    const choice = listOf(answer?.choices)[0]
    // A 200 with no choice (an HTML page, a stream's text, another API's JSON) is no answer: it
    // was logged as a success with empty content.
    if (!choice) throw invalidAnswer('it has no choices')
    const toolCalls: ToolCall[] = []
    for (const t of listOf(choice?.message?.tool_calls)) {
      if (t.type === 'function')
        toolCalls.push({
          id: optionalText(t.id, "a tool call's id") ?? '',
          name: optionalText(t.function?.name, "a tool call's name") ?? '',
          arguments: optionalText(t.function?.arguments, "a tool call's arguments") ?? '',
        })
    }
    return {
      content: optionalText(choice?.message?.content, 'content') ?? '',
      toolCalls,
      finishReason: optionalText(choice?.finish_reason, 'finish_reason') ?? 'stop',
      usage: {
        inputTokens: tokenCount(answer.usage?.prompt_tokens),
        outputTokens: tokenCount(answer.usage?.completion_tokens),
      },
    }
  }

  async stream(call: ModelCall, onDelta: OnDelta): Promise<Completion> {
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
        usage = {
          inputTokens: tokenCount(chunk.usage.prompt_tokens),
          outputTokens: tokenCount(chunk.usage.completion_tokens),
        }
      const choice = listOf(chunk.choices)[0]
      if (!choice) continue
      const piece = optionalText(choice.delta?.content, 'content')
      if (piece) {
        content += piece
        await onDelta(piece)
      }
      for (const t of listOf(choice.delta?.tool_calls)) {
        let known = calls.get(t.index)
        if (!known) {
          // A new call counts as it comes, even one that never holds anything.
          call.onToolCallPiece?.(TOOL_CALL_BYTES)
          known = { id: '', name: '', arguments: '' }
        }
        const id = optionalText(t.id, "a tool call's id")
        const name = optionalText(t.function?.name, "a tool call's name")
        const args = optionalText(t.function?.arguments, "a tool call's arguments")
        // Counted as they come: a name sent in pieces, or a new id for each index, held too.
        if (id && id !== known.id) {
          call.onToolCallPiece?.(id)
          known.id = id
        }
        if (name) {
          call.onToolCallPiece?.(name)
          known.name += name
        }
        if (args) {
          call.onToolCallPiece?.(args)
          known.arguments += args
        }
        calls.set(t.index, known)
      }
      const reason = optionalText(choice.finish_reason, 'finish_reason')
      if (reason) {
        finishReason = reason
        ended = true
      }
    }
    // An aborted stream also ends without one: that is the caller's to tell (runs.ts).
    if (!ended && !call.signal.aborted) throw streamEndedEarly('a finish_reason')
    return { content, toolCalls: [...calls.values()], finishReason, usage }
  }
}
