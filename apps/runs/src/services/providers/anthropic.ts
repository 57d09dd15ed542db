import Anthropic from '@anthropic-ai/sdk'
import type { RunParams, ToolCall } from '@pm/contracts'
import { streamEndedEarly } from '../../domain/failure.ts'
import type { Completion, ModelCall, ProviderAdapter, ProviderTarget } from './types.ts'

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
    let content = ''
    const toolCalls: ToolCall[] = []
    for (const block of answer.content) {
      if (block.type === 'text') content += block.text
      else if (block.type === 'tool_use')
        toolCalls.push({ id: block.id, name: block.name, arguments: JSON.stringify(block.input) })
    }
    return {
      content,
      toolCalls,
      finishReason: FINISH[answer.stop_reason ?? 'end_turn'] ?? String(answer.stop_reason),
      usage: { inputTokens: answer.usage.input_tokens, outputTokens: answer.usage.output_tokens },
    }
  }

  async stream(call: ModelCall, onDelta: (content: string) => void): Promise<Completion> {
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
          usage.inputTokens = event.message.usage.input_tokens
          usage.outputTokens = event.message.usage.output_tokens
          break
        case 'content_block_start':
          if (event.content_block.type === 'tool_use')
            calls.set(event.index, {
              id: event.content_block.id,
              name: event.content_block.name,
              arguments: '',
            })
          break
        case 'content_block_delta':
          if (event.delta.type === 'text_delta') {
            content += event.delta.text
            onDelta(event.delta.text)
          } else if (event.delta.type === 'input_json_delta') {
            const known = calls.get(event.index)
            if (known) known.arguments += event.delta.partial_json
          }
          break
        case 'message_delta':
          if (event.delta.stop_reason) {
            finishReason = FINISH[event.delta.stop_reason] ?? event.delta.stop_reason
            ended = true
          }
          usage.outputTokens = event.usage.output_tokens
          break
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
