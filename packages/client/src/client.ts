import {
  API_ROUTES,
  type EnvironmentName,
  type InjectResult,
  type InvokeResult,
  type LoginResponse,
  type OperationId,
  type Prompt,
  type ResolvedPrompt,
  type Split,
  type Variable,
  type VariableInput,
} from '@pm/contracts'
import { syncVariables } from '@pm/template'
import { type CacheSource, stableKey, TtlCache } from './cache.ts'
import { PromptServiceError } from './errors.ts'
import {
  DEFAULT_MAX_OUTPUT_BYTES,
  hasReferences,
  type LocalRendering,
  renderLocally,
  type RenderSource,
} from './local.ts'
import { abortableSleep, DEFAULT_RETRY, type RetryInfo, type RetryOptions, Transport } from './transport.ts'
import type { ApiMethods, RawInput } from './types.ts'

/** A template to render locally when the service cannot be reached and nothing is cached. */
export interface FallbackTemplate {
  template: string
  /** Declared variables (defaults, required). Without them every placeholder is optional. */
  variables?: VariableInput[]
}

export interface PromptClientOptions {
  /** The gateway, e.g. `https://prompts.example.com`. */
  baseUrl: string
  /** An API key (`pk_...`): for backends and scripts. */
  apiKey?: string
  /** A user access token (JWT from login): for operator tasks such as publish. */
  accessToken?: string
  /** The workspace a user token acts in (API keys have exactly one). */
  organizationId?: string
  /** How long a rendered or fetched prompt is served from memory without asking. Default 60 s. */
  cacheTtlMs?: number
  /**
   * After the TTL, serve the cached value at once and refresh it in the background
   * (default true). When false, an expired entry is refetched first and only served when the
   * service is unavailable.
   */
  staleWhileRevalidate?: boolean
  /** How long past its TTL an entry may still be served while the service is down. Default: no limit. */
  maxStaleMs?: number
  cacheMaxEntries?: number
  /** Per prompt id: what `invoke` renders locally when the service is down and nothing is cached. */
  fallbackTemplates?: Record<string, string | FallbackTemplate>
  /**
   * The largest text a local rendering may produce, in UTF-8 bytes: the render service's
   * `RENDER_MAX_OUTPUT_BYTES` (default 1 MiB, the service's default). Past it a local render is
   * refused with 422 RENDER_TOO_LARGE, as invoke would be.
   */
  maxOutputBytes?: number
  /** Retries on 429 and 5xx (a number, or the full options). Default 3. */
  retries?: number | Partial<RetryOptions>
  /** Per attempt. Default 10 s. */
  timeoutMs?: number
  onRetry?: (info: RetryInfo) => void
  /**
   * Called when the service answers 401 to the user access token (it expired): answer a new
   * one (from your refresh token) and the request is sent once more with it; answer undefined
   * to let the 401 stand.
   */
  refreshAccessToken?: () => Promise<string | undefined>
  /** A background refresh failed (the stale value keeps being served). */
  onBackgroundError?: (error: unknown) => void
  fetch?: typeof fetch
  userAgent?: string
  /** Time, sleeping and randomness: replaced in tests. */
  clock?: {
    now?: () => number
    sleep?: (ms: number, signal?: AbortSignal) => Promise<void>
    random?: () => number
  }
}

export interface InvokeOptions {
  version?: number
  env?: EnvironmentName
  organizationId?: string
  /**
   * Who the request is for: with an `env` under a split (DESIGN section 15) the same subject
   * always gets the same version. Part of the cache key.
   */
  subject?: string
  /** false: always ask the service (no cache read or write); fallback still applies. */
  cache?: boolean
  signal?: AbortSignal
}

/** What `invoke` answers: the rendering, and where it came from. */
export interface RenderedPrompt {
  renderedContent: string
  variables: Record<string, unknown>
  /** The prompt id (for a fallback of a lookup by slug: the slug). */
  promptId: string
  /** null for a fallback rendered locally. */
  versionId: string | null
  version: number | null
  /** Chat prompts: the messages, placeholders spliced in. */
  renderedMessages?: InvokeResult['renderedMessages']
  /** The version's model settings, when it has them. */
  config?: InvokeResult['config']
  /** When the template has references: the prompts it included (`{{> slug}}`), in order of first use. */
  references?: InvokeResult['references']
  /** With an environment under a split: which variant served. */
  variant?: number
  source: CacheSource
}

export type FetchedPrompt = Prompt & { source: CacheSource }

/** Which published content to fetch for local rendering (as invoke's query: not both). */
export interface RenderableOptions {
  version?: number
  env?: EnvironmentName
  organizationId?: string
  /**
   * renderLocally only: who the request is for, sent as invoke's `subject` when the `env` is
   * under a split (which the service renders: see `RenderablePrompt.split`).
   */
  subject?: string
  signal?: AbortSignal
}

/**
 * A published version fetched for rendering in this process (`getRenderable`): its content,
 * variables and config, and `render(values)`, which renders it exactly as invoke does. From a
 * fallback template (`source: 'fallback'`) the ids and version are null.
 */
export interface RenderablePrompt extends RenderSource {
  promptId: string
  versionId: string | null
  version: number | null
  variables: Variable[]
  config?: ResolvedPrompt['config']
  source: CacheSource
  /**
   * The version includes other prompts (`{{> slug}}`), which only the service resolves:
   * `render` refuses it (400 REFERENCES_NOT_LOCAL) and the client's `renderLocally` asks
   * invoke instead (cached per variables, as invoke is).
   */
  references: boolean
  /**
   * The environment is under a split (DESIGN section 15): its variants. The content above is the
   * first variant's, so `render` renders that one; which variant a request gets is the service's
   * pick per subject, and the client's `renderLocally` asks invoke for it instead.
   */
  split?: Split
  /**
   * Renders with these values; throws PromptServiceError as invoke would refuse them (400, or
   * 422 RENDER_TOO_LARGE past the client's `maxOutputBytes`).
   */
  render(values?: Record<string, unknown>): LocalRendering
}

const DEFAULT_MAX_ENTRIES = 1000

/** Operations that change a prompt: a successful one drops what this client cached of it. */
const PROMPT_WRITES = new Set<OperationId>([
  'updatePrompt',
  'deletePrompt',
  'updateVariable',
  'publishPrompt',
  'unpublishPrompt',
  'saveAndPublish',
  'restoreVersion',
  'promoteVersion',
])

export class PromptClient {
  /** One typed method per route of the service (`client.api.listPrompts({ query })`). */
  readonly api: ApiMethods
  private readonly opts: PromptClientOptions
  private readonly transport: Transport
  private readonly rendered: TtlCache<InvokeResult>
  private readonly prompts: TtlCache<Prompt>
  private readonly resolved: TtlCache<ResolvedPrompt>
  private readonly fallbacks: Map<string, FallbackTemplate>
  private readonly slugs = new Map<string, Set<string>>()
  private accessToken: string | undefined
  private organizationId: string | undefined
  /** The output cap of local renderings (the service's RENDER_MAX_OUTPUT_BYTES). */
  private readonly localOptions: { maxOutputBytes: number }

  constructor(options: PromptClientOptions) {
    if (!/^https?:\/\//.test(options.baseUrl)) throw new TypeError('baseUrl must be an http(s) URL')
    this.opts = options
    this.localOptions = { maxOutputBytes: options.maxOutputBytes ?? DEFAULT_MAX_OUTPUT_BYTES }
    this.accessToken = options.accessToken
    this.organizationId = options.organizationId
    const now = options.clock?.now ?? Date.now
    const retry: RetryOptions =
      typeof options.retries === 'number'
        ? { ...DEFAULT_RETRY, retries: options.retries }
        : { ...DEFAULT_RETRY, ...options.retries }
    this.transport = new Transport({
      baseUrl: options.baseUrl,
      credential: () => {
        if (this.accessToken) return { token: this.accessToken, kind: 'user' }
        if (options.apiKey) return { token: options.apiKey, kind: 'apiKey' }
        return undefined
      },
      organizationId: () => this.organizationId,
      retry,
      timeoutMs: options.timeoutMs ?? 10_000,
      fetch: options.fetch ?? globalThis.fetch,
      sleep: options.clock?.sleep ?? abortableSleep,
      random: options.clock?.random ?? Math.random,
      now,
      onRetry: options.onRetry,
      refreshAccessToken: options.refreshAccessToken
        ? async () => {
            const token = await options.refreshAccessToken?.()
            if (token) this.accessToken = token
            return token
          }
        : undefined,
      userAgent: options.userAgent,
    })
    const cacheOptions = {
      ttlMs: options.cacheTtlMs ?? 60_000,
      maxStaleMs: options.maxStaleMs ?? Number.POSITIVE_INFINITY,
      maxEntries: options.cacheMaxEntries ?? DEFAULT_MAX_ENTRIES,
      now,
    }
    this.rendered = new TtlCache(cacheOptions)
    this.prompts = new TtlCache(cacheOptions)
    this.resolved = new TtlCache(cacheOptions)
    this.fallbacks = new Map(
      Object.entries(options.fallbackTemplates ?? {}).map(([id, t]) => [
        id,
        typeof t === 'string' ? { template: t } : t,
      ]),
    )

    const api: Record<string, (input?: RawInput) => Promise<unknown>> = {}
    for (const operationId of Object.keys(API_ROUTES) as OperationId[]) {
      api[operationId] = async (input?: RawInput) => {
        const result = await this.transport.call(operationId, input)
        const promptId = input?.params?.id
        if (PROMPT_WRITES.has(operationId) && typeof promptId === 'string') this.invalidate(promptId)
        return result
      }
    }
    this.api = api as unknown as ApiMethods
  }

  /** Use a user token from now on (login, refresh). */
  setAccessToken(token: string | undefined, organizationId?: string | null): void {
    this.accessToken = token
    if (organizationId !== undefined) this.organizationId = organizationId ?? undefined
  }

  /** Signs in and uses the token (and the user's first organization) for what follows. */
  async login(email: string, password: string): Promise<LoginResponse> {
    const session = await this.api.login({ body: { email, password } })
    this.setAccessToken(session.accessToken, this.organizationId ?? session.organizationId)
    return session
  }

  /**
   * Renders a prompt's published content (or `version`, or the `env` pin). Cached by prompt,
   * version or environment and variables; served stale while refreshing; rendered from the
   * fallback template when the service cannot be reached and nothing is cached.
   */
  async invoke(
    promptId: string,
    variables: Record<string, unknown> = {},
    options: InvokeOptions = {},
  ): Promise<RenderedPrompt> {
    return this.render({ id: promptId }, variables, options)
  }

  /**
   * `invoke` of the prompt with this slug in the workspace (slugs survive renames). Cached the
   * same way; a write to the prompt through this client drops these entries too. A fallback
   * template may be registered under the slug.
   */
  async invokeBySlug(
    slug: string,
    variables: Record<string, unknown> = {},
    options: InvokeOptions = {},
  ): Promise<RenderedPrompt> {
    return this.render({ slug }, variables, options)
  }

  private async render(
    ref: { id: string } | { slug: string },
    variables: Record<string, unknown>,
    options: InvokeOptions,
  ): Promise<RenderedPrompt> {
    const org = options.organizationId ?? this.organizationId ?? ''
    const name = 'id' in ref ? ref.id : `slug:${ref.slug}`
    const key = `${name}|invoke|${org}|${options.version ?? ''}|${options.env ?? ''}|${options.subject ?? ''}|${stableKey(variables)}`
    const input = {
      query: {
        ...(options.env ? { env: options.env } : {}),
        ...(options.organizationId ? { organizationId: options.organizationId } : {}),
      },
      body: {
        variables,
        ...(options.version ? { version: options.version } : {}),
        ...(options.subject !== undefined ? { subject: options.subject } : {}),
      },
    }
    const load = async (signal: AbortSignal | undefined) => {
      const result = (
        'id' in ref
          ? await this.transport.call('invokePrompt', { ...input, signal, params: { id: ref.id } })
          : await this.transport.call('invokePromptBySlug', { ...input, signal, params: { slug: ref.slug } })
      ) as InvokeResult
      if ('slug' in ref) this.slugsOf(result.promptId).add(ref.slug)
      return result
    }
    try {
      const { value, source } = await this.cached(
        this.rendered,
        key,
        load,
        options.cache !== false,
        options.signal,
      )
      return { ...value, source }
    } catch (err) {
      const promptId = 'id' in ref ? ref.id : ref.slug
      const fallback = this.fallbackSource(promptId, err)
      if (!fallback) throw err
      const outcome = renderLocally(fallback, variables, this.localOptions)
      return {
        renderedContent: outcome.renderedContent,
        variables,
        promptId,
        versionId: null,
        version: null,
        source: 'fallback',
      }
    }
  }

  /**
   * The registered fallback template of `name` (a prompt id or slug) as something to render,
   * when `err` says the service is unavailable; undefined otherwise. Without declared variables
   * every placeholder is optional.
   */
  private fallbackSource(name: string, err: unknown): RenderSource | undefined {
    const fallback = this.fallbacks.get(name)
    if (!fallback || !(err instanceof PromptServiceError) || !err.isUnavailable) return undefined
    const declared = syncVariables(fallback.template, fallback.variables ?? []).variables
    return {
      template: fallback.template,
      variables: fallback.variables ? declared : declared.map((v) => ({ ...v, required: false })),
    }
  }

  /**
   * Fetches the published content invoke would render (the current version, `version`, or the
   * `env` pin) once per TTL, to render it here as often as you like: `(await
   * client.getRenderable(id)).render({ name })`. Served stale while it is refreshed in the
   * background (or while the service is down); with nothing cached and the service down, the
   * fallback template registered under the id stands in (`source: 'fallback'`).
   */
  async getRenderable(promptId: string, options: RenderableOptions = {}): Promise<RenderablePrompt> {
    return this.renderable({ id: promptId }, options)
  }

  /** `getRenderable` of the prompt with this slug (a fallback may be registered under the slug). */
  async getRenderableBySlug(slug: string, options: RenderableOptions = {}): Promise<RenderablePrompt> {
    return this.renderable({ slug }, options)
  }

  /**
   * Like `invoke`, rendered in this process from the content `getRenderable` caches: one
   * network call per prompt (and version or env) per TTL, whatever the variables.
   */
  async renderLocally(
    promptId: string,
    variables: Record<string, unknown> = {},
    options: RenderableOptions = {},
  ): Promise<RenderedPrompt> {
    const renderable = await this.getRenderable(promptId, options)
    // A prompt that includes others renders at the service, which resolves the references; an
    // environment under a split too, which picks the variant per subject.
    if (renderable.references || renderable.split)
      return this.render({ id: promptId }, variables, invokeOptions(options))
    return rendered(renderable, variables)
  }

  /** `renderLocally` of the prompt with this slug. */
  async renderLocallyBySlug(
    slug: string,
    variables: Record<string, unknown> = {},
    options: RenderableOptions = {},
  ): Promise<RenderedPrompt> {
    const renderable = await this.getRenderableBySlug(slug, options)
    if (renderable.references || renderable.split)
      return this.render({ slug }, variables, invokeOptions(options))
    return rendered(renderable, variables)
  }

  private async renderable(
    ref: { id: string } | { slug: string },
    options: RenderableOptions,
  ): Promise<RenderablePrompt> {
    const org = options.organizationId ?? this.organizationId ?? ''
    const name = 'id' in ref ? ref.id : `slug:${ref.slug}`
    const key = `${name}|resolve|${org}|${options.version ?? ''}|${options.env ?? ''}`
    const query = {
      ...(options.version !== undefined ? { version: options.version } : {}),
      ...(options.env ? { env: options.env } : {}),
      ...(options.organizationId ? { organizationId: options.organizationId } : {}),
    }
    const load = async (signal: AbortSignal | undefined) => {
      const result = (
        'id' in ref
          ? await this.transport.call('resolvePrompt', { params: { id: ref.id }, query, signal })
          : await this.transport.call('resolvePromptBySlug', { params: { slug: ref.slug }, query, signal })
      ) as ResolvedPrompt
      if ('slug' in ref) this.slugsOf(result.promptId).add(ref.slug)
      return result
    }
    try {
      const { value, source } = await this.cached(this.resolved, key, load, true, options.signal)
      return {
        promptId: value.promptId,
        versionId: value.versionId,
        version: value.version,
        template: value.template,
        variables: value.variables,
        ...(value.messages ? { messages: value.messages } : {}),
        ...(value.config ? { config: value.config } : {}),
        ...(value.split ? { split: value.split } : {}),
        source,
        references: hasReferences(value),
        // The cached object itself is rendered, so its parsed form is reused (see local.ts).
        render: (values = {}) => renderLocally(value, values, this.localOptions),
      }
    } catch (err) {
      const promptId = 'id' in ref ? ref.id : ref.slug
      const fallback = this.fallbackSource(promptId, err)
      if (!fallback) throw err
      return {
        promptId,
        versionId: null,
        version: null,
        template: fallback.template,
        variables: [...fallback.variables],
        source: 'fallback',
        references: hasReferences(fallback),
        render: (values = {}) => renderLocally(fallback, values, this.localOptions),
      }
    }
  }

  /** A prompt with its draft, cached like `invoke`. */
  async getPrompt(
    promptId: string,
    options: { organizationId?: string; cache?: boolean; signal?: AbortSignal } = {},
  ): Promise<FetchedPrompt> {
    const org = options.organizationId ?? this.organizationId ?? ''
    const load = (signal: AbortSignal | undefined) =>
      this.transport.call('getPrompt', {
        params: { id: promptId },
        query: options.organizationId ? { organizationId: options.organizationId } : {},
        signal,
      }) as Promise<Prompt>
    const { value, source } = await this.cached(
      this.prompts,
      `${promptId}|prompt|${org}`,
      load,
      options.cache !== false,
      options.signal,
    )
    return { ...value, source }
  }

  /** Draft preview (never cached: drafts change while you edit). */
  inject(promptId: string, variables: Record<string, unknown> = {}): Promise<InjectResult> {
    return this.api.injectPrompt({ params: { id: promptId }, body: { variables } })
  }

  /**
   * Slugs this client has invoked a prompt by, per prompt id (so that a write drops those entries
   * too). At most cacheMaxEntries prompts, least recently used first out: the entries of the one
   * that goes out are dropped with it, since a write could no longer find them.
   */
  private slugsOf(promptId: string): Set<string> {
    let slugs = this.slugs.get(promptId)
    if (slugs) this.slugs.delete(promptId)
    else slugs = new Set()
    this.slugs.set(promptId, slugs)
    const max = this.opts.cacheMaxEntries ?? DEFAULT_MAX_ENTRIES
    for (const [oldest, gone] of this.slugs) {
      if (this.slugs.size <= max) break
      this.slugs.delete(oldest)
      for (const slug of gone) {
        this.rendered.evict(`slug:${slug}|`)
        this.resolved.evict(`slug:${slug}|`)
      }
    }
    return slugs
  }

  /** Drops what is cached of one prompt (by id and by slug), or of all of them. */
  invalidate(promptId?: string): void {
    const prefix = promptId ? `${promptId}|` : ''
    this.rendered.clear(prefix)
    this.prompts.clear(prefix)
    this.resolved.clear(prefix)
    for (const slug of promptId ? (this.slugs.get(promptId) ?? []) : []) {
      this.rendered.clear(`slug:${slug}|`)
      this.resolved.clear(`slug:${slug}|`)
    }
    if (promptId === undefined) this.slugs.clear()
  }

  /** Resolves when background refreshes have finished. */
  async settled(): Promise<void> {
    await Promise.all([this.rendered.settled(), this.prompts.settled(), this.resolved.settled()])
  }

  /**
   * `load` is given the signal to send with: the caller's for a load that only it waits for, none
   * for a refresh, which is shared (stale-while-revalidate serves it to later callers too) and
   * bounded by the transport's timeout alone; a caller that aborts once it has its value must
   * not end the refresh.
   */
  private async cached<T>(
    cache: TtlCache<T>,
    key: string,
    load: (signal: AbortSignal | undefined) => Promise<T>,
    useCache: boolean,
    signal: AbortSignal | undefined,
  ): Promise<{ value: T; source: CacheSource }> {
    if (!useCache) return { value: await load(signal), source: 'network' }
    const found = cache.lookup(key)
    if (found.state === 'fresh') return { value: found.value, source: 'cache' }
    if (found.state === 'stale') {
      let refreshed: T | undefined
      const refresh = async () => {
        const generation = cache.generation
        try {
          refreshed = await load(undefined)
          cache.setIfCurrent(key, refreshed, generation)
        } catch (err) {
          // An authoritative answer (the prompt is gone, the key revoked) ends the entry;
          // unavailability keeps it, so the stale value carries on standing in.
          if (err instanceof PromptServiceError && !err.isUnavailable) cache.deleteIfCurrent(key, generation)
          throw err
        }
      }
      const running = cache.revalidate(key, refresh)
      if (this.opts.staleWhileRevalidate !== false) {
        running.catch((err: unknown) => this.opts.onBackgroundError?.(err))
        return { value: found.value, source: 'stale' }
      }
      try {
        await untilAborted(running, signal)
      } catch (err) {
        if (err instanceof PromptServiceError && err.isUnavailable)
          return { value: found.value, source: 'stale' }
        throw err
      }
      // This call's refresh: its answer; one it joined: what that one stored.
      if (refreshed !== undefined) return { value: refreshed, source: 'network' }
      const again = cache.lookup(key)
      if (again.state !== 'miss') return { value: again.value, source: 'network' }
    }
    const generation = cache.generation
    const value = await load(signal)
    // Not stored when this client wrote to the prompt meanwhile: the answer may predate the write.
    cache.setIfCurrent(key, value, generation)
    return { value, source: 'network' }
  }
}

/** `promise`, or the signal's reason as soon as it aborts (the promise carries on for others). */
function untilAborted<T>(promise: Promise<T>, signal: AbortSignal | undefined): Promise<T> {
  if (!signal) return promise
  if (signal.aborted) return Promise.reject(signal.reason)
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(signal.reason)
    signal.addEventListener('abort', onAbort, { once: true })
    promise.then(resolve, reject).finally(() => signal.removeEventListener('abort', onAbort))
  })
}

export function createClient(options: PromptClientOptions): PromptClient {
  return new PromptClient(options)
}

/** What invoke takes of renderLocally's options. */
function invokeOptions(options: RenderableOptions): InvokeOptions {
  return {
    ...(options.version !== undefined ? { version: options.version } : {}),
    ...(options.env ? { env: options.env } : {}),
    ...(options.organizationId ? { organizationId: options.organizationId } : {}),
    ...(options.subject !== undefined ? { subject: options.subject } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
  }
}

function rendered(prompt: RenderablePrompt, variables: Record<string, unknown>): RenderedPrompt {
  const outcome = prompt.render(variables)
  return {
    renderedContent: outcome.renderedContent,
    variables,
    promptId: prompt.promptId,
    versionId: prompt.versionId,
    version: prompt.version,
    ...(outcome.renderedMessages ? { renderedMessages: outcome.renderedMessages } : {}),
    ...(prompt.config ? { config: prompt.config } : {}),
    source: prompt.source,
  }
}
