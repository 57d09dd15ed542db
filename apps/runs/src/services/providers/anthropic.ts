import Anthropic from '@anthropic-ai/sdk'
import type { RunParams, ToolCall } from '@pm/contracts'
import { invalidAnswer, optionalText, requiredText, tokenCount } from '../../domain/answer.ts'
import { streamEndedEarly } from '../../domain/failure.ts'
import type { Completion, ModelCall, OnDelta, ProviderAdapter, ProviderTarget } from './types.ts'
import { TOOL_CALL_BYTES } from './types.ts'

type MessageParams = Anthropic.Messages.MessageCreateParamsNonStreaming

/** Anthropic requires max_tokens; this is ours when neither the config nor the request sets it. */
export const ANTHROPIC_DEFAULT_MAX_TOKENS = 4096

const FINISH: Record<string, string> = {
  end_turn: 'stop',
  stop_sequence: 'stop',
  max_tokens: 'length',
  tool_use: 'tool_calls',
  refusal: 'content_filter',
}

/** OpenAI's word for a stop reason, else Anthropic's own (`hasOwn`: a `constructor` is not a key). */
const finish = (reason: string): string =>
  Object.hasOwn(FINISH, reason) ? (FINISH[reason] ?? reason) : reason

function toolChoice(choice: RunParams['tool_choice']): MessageParams['tool_choice'] {
  if (choice === undefined) return undefined
  if (choice === 'auto') return { type: 'auto' }
  if (choice === 'none') return { type: 'none' }
  if (choice === 'required') return { type: 'any' }
  return { type: 'tool', name: choice.function.name }
}

/**
 * The request body: system (and developer) messages become `system`, a tool message a user
 * message; OpenAI's parameter names are translated. Parameters Anthropic lacks (seed,
 * penalties, response_format) are not sent: docs/decisions.md, "Runs".
 */
export function anthropicBody(call: ModelCall): MessageParams {
  const { params } = call
  const system = call.messages
    .filter((m) => m.role === 'system' || m.role === 'developer')
    .map((m) => m.content)
    .join('\n\n')
  const messages = call.messages
    .filter((m) => m.role !== 'system' && m.role !== 'developer')
    .map((m) => ({
      role: m.role === 'assistant' ? ('assistant' as const) : ('user' as const),
      content: m.content,
    }))
  const stop =
    params.stop === undefined ? undefined : Array.isArray(params.stop) ? params.stop : [params.stop]
  const choice = toolChoice(params.tool_choice)
  return {
    model: call.model,
    max_tokens: params.max_tokens ?? ANTHROPIC_DEFAULT_MAX_TOKENS,
    messages,
    ...(system ? { system } : {}),
    ...(params.temperature !== undefined ? { temperature: params.temperature } : {}),
    ...(params.top_p !== undefined ? { top_p: params.top_p } : {}),
    ...(stop ? { stop_sequences: stop } : {}),
    ...(params.tools
      ? {
          tools: params.tools.map((t) => ({
            name: t.function.name,
            ...(t.function.description ? { description: t.function.description } : {}),
            input_schema: (t.function.parameters ?? {
              type: 'object',
            }) as Anthropic.Messages.Tool.InputSchema,
          })),
        }
      : {}),
    ...(choice ? { tool_choice: choice } : {}),
  }
}

export class AnthropicAdapter implements ProviderAdapter {
  private readonly client: Anthropic

  constructor(target: ProviderTarget) {
    this.client = new Anthropic({
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
    const answer = await this.client.messages.create(anthropicBody(call), { signal: call.signal })
    // Checked as it is read: the SDK does not (domain/answer.ts).
    if (!Array.isArray(answer.content)) throw invalidAnswer('content is not a list')
    let content = ''
    const toolCalls: ToolCall[] = []
    for (const block of answer.content) {
      if (block.type === 'text') content += requiredText(block.text, 'content')
      else if (block.type === 'tool_use')
        toolCalls.push({
          id: optionalText(block.id, "a tool call's id") ?? '',
          name: optionalText(block.name, "a tool call's name") ?? '',
          arguments: JSON.stringify(block.input ?? {}),
        })
    }
    return {
      content,
      toolCalls,
      finishReason: finish(optionalText(answer.stop_reason, 'stop_reason') ?? 'end_turn'),
      usage: {
        inputTokens: tokenCount(answer.usage?.input_tokens),
        outputTokens: tokenCount(answer.usage?.output_tokens),
      },
    }
  }

  async stream(call: ModelCall, onDelta: OnDelta): Promise<Completion> {
    const stream = await this.client.messages.create(
      { ...anthropicBody(call), stream: true },
      { signal: call.signal },
    )
    let content = ''
    let finishReason = 'stop'
    // message_stop, or a stop_reason: without either the answer was cut.
    let ended = false
    const usage = { inputTokens: 0, outputTokens: 0 }
    const calls = new Map<number, ToolCall>()
    for await (const event of stream) {
      switch (event.type) {
        case 'message_start':
          usage.inputTokens = tokenCount(event.message?.usage?.input_tokens)
          usage.outputTokens = tokenCount(event.message?.usage?.output_tokens)
          break
        case 'content_block_start':
          if (event.content_block?.type === 'tool_use') {
            const id = optionalText(event.content_block.id, "a tool call's id") ?? ''
            const name = optionalText(event.content_block.name, "a tool call's name") ?? ''
            // Counted as they come: a block for each new index holds its id and name.
            call.onToolCallPiece?.(TOOL_CALL_BYTES)
            call.onToolCallPiece?.(id)
            call.onToolCallPiece?.(name)
            calls.set(event.index, { id, name, arguments: '' })
          }
          break
        case 'content_block_delta':
          if (event.delta?.type === 'text_delta') {
            const text = requiredText(event.delta.text, 'content')
            content += text
            await onDelta(text)
          } else if (event.delta?.type === 'input_json_delta') {
            const known = calls.get(event.index)
            if (known) {
              const piece = optionalText(event.delta.partial_json, "a tool call's arguments") ?? ''
              call.onToolCallPiece?.(piece)
              known.arguments += piece
            }
          }
          break
        case 'message_delta': {
          const reason = optionalText(event.delta?.stop_reason, 'stop_reason')
          if (reason) {
            finishReason = finish(reason)
            ended = true
          }
          usage.outputTokens = tokenCount(event.usage?.output_tokens)
          break
        }
        case 'message_stop':
          ended = true
          break
        default:
          break
      }
    }
    // An aborted stream also ends without them: that is the caller's to tell (runs.ts).
    if (!ended && !call.signal.aborted) throw streamEndedEarly('message_stop')
    // A tool called with no arguments streams none: its input is `{}`.
    const toolCalls = [...calls.values()].map((t) => ({ ...t, arguments: t.arguments || '{}' }))
    return { content, toolCalls, finishReason, usage }
  }
}
