import {
  AppError,
  CONTEXT_HEADER,
  type EnvironmentName,
  type ErrorCode,
  isErrorCode,
  type PromptConfig,
  type RenderedMessage,
} from '@pm/contracts'
import { InternalTimeoutError, type InternalTarget, callInternal, closePool, internalPath } from '@pm/kit'
import { Pool } from 'undici'

/** What a run renders: as invoke (published) or inject (draft) answered it. */
export interface Rendered {
  promptId: string
  versionId: string | null
  version: number | null
  draft: boolean
  renderedContent: string
  renderedMessages?: RenderedMessage[]
  config: PromptConfig
  references: unknown[]
}

/** Who asks: forwarded unchanged, so render applies the caller's own access (as from the gateway). */
export interface Caller {
  contextHeader: string
  requestId: string
}

export type PromptRef = { id: string } | { slug: string }

const RENDER_TIMEOUT_MS = 10_000

/**
 * Renders through the render service's own invoke and inject routes, called as the gateway
 * calls them (the signed caller context forwarded): what a run sends is what invoke answers,
 * whatever render learns later (template references, ...). Nothing of rendering is repeated here.
 */
export class RenderClient {
  private readonly renderPool: InternalTarget
  private readonly promptsPool: InternalTarget
  /** The pools made here (closed with this client); a service of this process is not. */
  private readonly own: Pool[] = []

  /** Each target a base URL, or a service of this process (`inProcess`, the embedded default). */
  constructor(render: string | InternalTarget, prompts: string | InternalTarget) {
    this.renderPool = this.target(render, 64)
    this.promptsPool = this.target(prompts, 16)
  }

  private target(to: string | InternalTarget, connections: number): InternalTarget {
    if (typeof to !== 'string') return to
    const pool = new Pool(to, { connections, keepAliveTimeout: 30_000 })
    this.own.push(pool)
    return pool
  }

  async render(
    caller: Caller,
    prompt: PromptRef,
    opts: { variables: Record<string, unknown>; version?: number; env?: EnvironmentName; draft: boolean },
  ): Promise<Rendered> {
    if (opts.draft) {
      const id = 'id' in prompt ? prompt.id : await this.idOfSlug(caller, prompt.slug)
      const answer = await this.call(
        this.renderPool,
        caller,
        'POST',
        internalPath('api', 'v1', 'prompts', id, 'inject'),
        {
          variables: opts.variables,
        },
      )
      return {
        promptId: id,
        versionId: null,
        version: null,
        draft: true,
        renderedContent: String(answer.renderedContent ?? ''),
        ...(Array.isArray(answer.renderedMessages)
          ? { renderedMessages: answer.renderedMessages as RenderedMessage[] }
          : {}),
        config: (answer.config as PromptConfig | undefined) ?? {},
        references: Array.isArray(answer.references) ? answer.references : [],
      }
    }
    const base =
      'id' in prompt
        ? internalPath('api', 'v1', 'prompts', prompt.id, 'invoke')
        : internalPath('api', 'v1', 'prompts', 'slug', prompt.slug, 'invoke')
    const path = opts.env ? `${base}?env=${encodeURIComponent(opts.env)}` : base
    const answer = await this.call(this.renderPool, caller, 'POST', path, {
      variables: opts.variables,
      ...(opts.version !== undefined ? { version: opts.version } : {}),
    })
    return {
      promptId: String(answer.promptId),
      versionId: String(answer.versionId),
      version: Number(answer.version),
      draft: false,
      renderedContent: String(answer.renderedContent ?? ''),
      ...(Array.isArray(answer.renderedMessages)
        ? { renderedMessages: answer.renderedMessages as RenderedMessage[] }
        : {}),
      config: (answer.config as PromptConfig | undefined) ?? {},
      references: Array.isArray(answer.references) ? answer.references : [],
    }
  }

  /** The id of the prompt with this slug in the caller's workspace (the prompts service's public route). */
  private async idOfSlug(caller: Caller, slug: string): Promise<string> {
    const answer = await this.call(
      this.promptsPool,
      caller,
      'GET',
      internalPath('api', 'v1', 'prompts', 'slug', slug),
    )
    if (typeof answer._id !== 'string')
      throw new AppError('SERVICE_UNAVAILABLE', 'the prompts service answered no id')
    return answer._id
  }

  private async call(
    pool: InternalTarget,
    caller: Caller,
    method: 'GET' | 'POST',
    path: string,
    body?: unknown,
  ): Promise<Record<string, unknown>> {
    let answer: Awaited<ReturnType<typeof callInternal>>
    try {
      answer = await callInternal(pool, {
        method,
        path,
        headers: {
          [CONTEXT_HEADER]: caller.contextHeader,
          'x-request-id': caller.requestId,
          ...(body !== undefined ? { 'content-type': 'application/json' } : {}),
        },
        ...(body !== undefined ? { body: JSON.stringify(body) } : {}),
        timeoutMs: RENDER_TIMEOUT_MS,
      })
    } catch (err) {
      if (err instanceof AppError) throw err
      if (err instanceof InternalTimeoutError)
        throw new AppError('UPSTREAM_TIMEOUT', 'the render service timed out')
      throw new AppError('SERVICE_UNAVAILABLE', 'the render service is unavailable')
    }
    const payload = (answer.body ?? {}) as Record<string, unknown>
    if (answer.statusCode >= 200 && answer.statusCode < 300) return payload
    // Render's own failure (missing variables, no published version, ...) is the run's, as it is.
    const error = payload.error as { code?: unknown; message?: unknown; details?: unknown } | undefined
    const code: ErrorCode = isErrorCode(error?.code) ? error.code : 'SERVICE_UNAVAILABLE'
    throw new AppError(
      code,
      typeof error?.message === 'string' ? error.message : 'rendering failed',
      error?.details,
    )
  }

  async close(): Promise<void> {
    await Promise.all(this.own.map((pool) => closePool(pool)))
  }
}
