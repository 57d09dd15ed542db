import {
  AppError,
  CONTEXT_HEADER,
  type ErrorCode,
  type DraftPrompt,
  type EnvironmentName,
  isErrorCode,
  type PromptConfig,
  type ResolvedPrompt,
  type Split,
  type Variable,
} from '@pm/contracts'
import {
  callInternal,
  closePool,
  type InternalAnswer,
  InternalTimeoutError,
  internalPath,
  type Tracing,
} from '@pm/kit'
import {
  type CompiledChat,
  type CompiledTemplate,
  compileChat,
  compileLogicOrFlat,
  compileTemplate,
  type LogicTemplate,
} from '@pm/template'
import { LRUCache } from 'lru-cache'
import { Pool } from 'undici'
import { pickVariant } from '../domain/split.ts'

/** A published version, compiled once. Immutable, so it is shared by every request that names it. */
export interface Snapshot {
  promptId: string
  versionId: string
  version: number
  compiled: CompiledTemplate
  variables: Variable[]
  /** Chat prompts only: the messages, compiled once. */
  chat?: CompiledChat
  config?: PromptConfig
  /** Its workspace and slug (a reference chain names prompts by slug). */
  organizationId?: string
  slug?: string
  /** A text template with blocks or references, parsed once; absent: the flat path renders it. */
  logic?: LogicTemplate
}

export interface ResolveRequest {
  promptId: string
  organizationId: string | undefined
  version?: number
  env?: EnvironmentName
  publicOnly: boolean
  /** Who the request is for: picks a split's variant stably (DESIGN section 15). */
  subject?: string
  /** Forwarded to the prompts service as is (it was signed by the gateway). */
  contextHeader: string
  requestId: string
}

export interface ResolverOptions {
  promptsUrl: string
  /** Most compiled snapshots kept. */
  snapshotCacheSize: number
  /** Their approximate total size in bytes (a template may be 100,000 characters). */
  snapshotCacheMaxBytes: number
  /** Most pointer lookups kept. */
  resolveCacheSize: number
  /** How long a pointer lookup is trusted when no change event drops it first. 0: never cached. */
  resolveTtlMs: number
  /** Connections to the prompts service. */
  connections?: number
  /** This process's tracing: each call to the prompts service is a client span (render.prompts). */
  tracing?: Tracing
  /** Deadline of one lookup, connect to last byte (PROMPTS_TIMEOUT_MS; 10 s unless given). */
  timeoutMs?: number
}

/** What a request is served: the snapshot and, under a split, which variant it is. */
export interface Served {
  snapshot: Snapshot
  variant?: number
  splitId?: string
}

/** A cached answer to "which version": a version id, or a split to pick from per request. */
interface Pointer {
  versionId: string
  split?: Split
}

interface Looked {
  snapshot: Snapshot
  split?: Split
}

export interface ResolverStats {
  /** Lookups answered from the pointer cache. */
  hits: number
  /** Lookups that asked the prompts service. */
  fetches: number
  /** Change events received. */
  invalidations: number
}

/** A lookup on its way to the prompts service, shared by the requests that ask the same thing meanwhile. */
interface Flight {
  promptId: string
  key: string
  promise: Promise<Looked>
  /** stale: a change event for the prompt arrived while the lookup was in flight, so its answer is not cached. */
  state: { stale: boolean }
}

/** Rough retained size of a compiled snapshot, for the cache's byte bound. */
function snapshotBytes(s: Snapshot): number {
  let bytes = 256 + s.compiled.source.length * 2 + s.compiled.slots.length * 48
  for (const v of s.variables) bytes += 64 + (v.name.length + (v.defaultValue?.length ?? 0)) * 2
  // A chat prompt's messages hold about its template's text again, compiled; its config is small (16 KiB at most).
  if (s.chat) bytes += s.compiled.source.length * 2 + s.chat.length * 96
  if (s.config) bytes += 2 * 16 * 1024
  return bytes
}

/**
 * Finds the snapshot to render. Two caches:
 * - compiled snapshots by version id: a published version never changes, so one is kept until
 *   the bounded cache evicts it;
 * - "pointers", the answer to "which version does this request mean" (current version, an
 *   environment's pin, visibility, existence) per prompt, workspace, version and env. These move,
 *   so they live briefly (RESOLVE_CACHE_TTL_MS) and the prompts service's change events drop them
 *   at once. A lookup that was in flight when an event arrived is not cached, and later requests
 *   do not join it.
 * The prompts service decides access; a pointer is cached per workspace (or "public"), so a
 * cached answer is only ever reused for a caller the prompts service already said yes to.
 */
export class Resolver {
  private readonly pool: Pool
  private readonly timeoutMs: number
  private readonly snapshots: LRUCache<string, Snapshot>
  private readonly pointers: LRUCache<string, Pointer> | null
  /** Pointer keys by prompt id, so that an event drops exactly that prompt's entries. */
  private readonly keysByPrompt = new Map<string, Set<string>>()
  /** Which prompt a slug names, per workspace (`org|slug` → prompt id); dropped with the prompt's pointers. */
  private readonly slugs: LRUCache<string, string> | null
  private readonly slugKeysByPrompt = new Map<string, Set<string>>()
  /**
   * Counts change events. A lookup by slug does not know its prompt until it is answered, so
   * it is remembered only when no event at all arrived while it was in flight.
   */
  private generation = 0
  private readonly flights = new Map<string, Flight>()
  private readonly flightsByPrompt = new Map<string, Set<Flight>>()
  readonly stats: ResolverStats = { hits: 0, fetches: 0, invalidations: 0 }
  private readonly tracing: Tracing | undefined

  constructor(opts: ResolverOptions) {
    this.tracing = opts.tracing
    this.pool = new Pool(opts.promptsUrl, {
      connections: opts.connections ?? 32,
      pipelining: 1,
      keepAliveTimeout: 30_000,
    })
    this.timeoutMs = opts.timeoutMs ?? 10_000
    this.snapshots = new LRUCache({
      max: opts.snapshotCacheSize,
      maxSize: opts.snapshotCacheMaxBytes,
      sizeCalculation: snapshotBytes,
    })
    this.pointers =
      opts.resolveTtlMs > 0
        ? new LRUCache<string, Pointer>({
            max: opts.resolveCacheSize,
            ttl: opts.resolveTtlMs,
            dispose: (_pointer, key) => this.unindex(key),
          })
        : null
    this.slugs =
      opts.resolveTtlMs > 0
        ? new LRUCache<string, string>({
            max: opts.resolveCacheSize,
            ttl: opts.resolveTtlMs,
            dispose: (promptId, key) => {
              const keys = this.slugKeysByPrompt.get(promptId)
              keys?.delete(key)
              if (keys?.size === 0) this.slugKeysByPrompt.delete(promptId)
            },
          })
        : null
  }

  private static key(r: ResolveRequest): string {
    return `${r.promptId}|${r.publicOnly ? 'public' : (r.organizationId ?? '')}|${r.version ?? ''}|${r.env ?? ''}`
  }

  private unindex(key: string): void {
    const promptId = key.slice(0, key.indexOf('|'))
    const keys = this.keysByPrompt.get(promptId)
    if (!keys) return
    keys.delete(key)
    if (keys.size === 0) this.keysByPrompt.delete(promptId)
  }

  /** Drops everything cached about which version of this prompt to render (a change event). */
  invalidate(promptId: string): void {
    this.stats.invalidations++
    this.generation++
    const slugKeys = this.slugKeysByPrompt.get(promptId)
    if (slugKeys && this.slugs) for (const key of [...slugKeys]) this.slugs.delete(key)
    this.slugKeysByPrompt.delete(promptId)
    const keys = this.keysByPrompt.get(promptId)
    if (keys && this.pointers) for (const key of [...keys]) this.pointers.delete(key)
    this.keysByPrompt.delete(promptId)
    const flights = this.flightsByPrompt.get(promptId)
    if (flights) {
      for (const flight of flights) {
        flight.state.stale = true
        if (this.flights.get(flight.key) === flight) this.flights.delete(flight.key)
      }
      this.flightsByPrompt.delete(promptId)
    }
  }

  /** Drops every pointer (for instance after the event stream may have missed messages). */
  invalidateAll(): void {
    this.generation++
    this.slugs?.clear()
    this.slugKeysByPrompt.clear()
    this.pointers?.clear()
    this.keysByPrompt.clear()
    for (const flight of this.flights.values()) flight.state.stale = true
    this.flights.clear()
    this.flightsByPrompt.clear()
  }

  async resolve(r: ResolveRequest): Promise<Snapshot> {
    return (await this.resolveServed(r)).snapshot
  }

  /** The snapshot to render and, for an environment under a split, the variant picked for the subject. */
  async resolveServed(r: ResolveRequest): Promise<Served> {
    const key = Resolver.key(r)
    const pointer = this.pointers?.get(key)
    if (pointer !== undefined) {
      if (pointer.split) {
        this.stats.hits++
        return this.serveSplit(r, pointer.split, undefined)
      }
      const cached = this.snapshots.get(pointer.versionId)
      if (cached) {
        this.stats.hits++
        return { snapshot: cached }
      }
    }
    const pending = this.flights.get(key)
    const looked = await (pending ? pending.promise : this.fly(key, r))
    return looked.split ? this.serveSplit(r, looked.split, looked.snapshot) : { snapshot: looked.snapshot }
  }

  /**
   * One variant of a split: picked by the subject's stable hash (or at random without one), its
   * snapshot from the cache or asked for by version number (same access check, same caches).
   * `first` is the first variant's snapshot when the lookup that found the split has it.
   */
  private async serveSplit(r: ResolveRequest, split: Split, first: Snapshot | undefined): Promise<Served> {
    const variant = pickVariant(split, r.promptId, r.env ?? '', r.subject)
    const chosen = split.variants[variant]
    if (!chosen) throw new AppError('VERSION_NOT_FOUND', 'the split names no such variant')
    const snapshot =
      (variant === 0 ? first : undefined) ??
      this.snapshots.get(chosen.versionId) ??
      (await this.resolve({ ...r, env: undefined, version: chosen.version, subject: undefined }))
    return { snapshot, variant, splitId: split.id }
  }

  /**
   * The snapshot of the prompt with this slug in the caller's workspace. Once the slug is known
   * to name a prompt, the lookup is the one by id (same caches, same events).
   */
  async resolveBySlug(
    r: Omit<ResolveRequest, 'promptId' | 'publicOnly'> & { slug: string },
  ): Promise<Snapshot> {
    return (await this.resolveBySlugServed(r)).snapshot
  }

  async resolveBySlugServed(
    r: Omit<ResolveRequest, 'promptId' | 'publicOnly'> & { slug: string },
  ): Promise<Served> {
    const slugKey = `${r.organizationId ?? ''}|${r.slug}`
    const promptId = this.slugs?.get(slugKey)
    const { slug, ...rest } = r
    if (promptId !== undefined) return this.resolveServed({ ...rest, promptId, publicOnly: false })
    this.stats.fetches++
    const generation = this.generation
    const resolved = await this.getJson<ResolvedPrompt>(
      `${internalPath('internal', 'prompts', 'slug', slug, 'resolve')}${Resolver.selectorQuery(r)}`,
      rest,
    )
    const snapshot = this.snapshot(resolved)
    if (generation === this.generation && this.slugs) {
      this.slugs.set(slugKey, resolved.promptId)
      let keys = this.slugKeysByPrompt.get(resolved.promptId)
      if (!keys) {
        keys = new Set()
        this.slugKeysByPrompt.set(resolved.promptId, keys)
      }
      keys.add(slugKey)
      const request = { ...rest, promptId: resolved.promptId, publicOnly: false }
      this.remember(Resolver.key(request), resolved.promptId, Resolver.pointer(resolved))
    }
    if (resolved.split) {
      return this.serveSplit(
        { ...rest, promptId: resolved.promptId, publicOnly: false },
        resolved.split,
        snapshot,
      )
    }
    return { snapshot }
  }

  private static pointer(resolved: ResolvedPrompt): Pointer {
    return resolved.split
      ? { versionId: resolved.versionId, split: resolved.split }
      : { versionId: resolved.versionId }
  }

  private fly(key: string, r: ResolveRequest): Promise<Looked> {
    this.stats.fetches++
    const state = { stale: false }
    const promise = this.fetch(r)
      .then((resolved): Looked => {
        const snapshot = this.snapshot(resolved)
        if (!state.stale) this.remember(key, r.promptId, Resolver.pointer(resolved))
        return resolved.split ? { snapshot, split: resolved.split } : { snapshot }
      })
      .finally(() => {
        if (this.flights.get(key) === flight) this.flights.delete(key)
        const flights = this.flightsByPrompt.get(r.promptId)
        if (flights) {
          flights.delete(flight)
          if (flights.size === 0) this.flightsByPrompt.delete(r.promptId)
        }
      })
    const flight: Flight = { promptId: r.promptId, key, promise, state }
    this.flights.set(key, flight)
    let flights = this.flightsByPrompt.get(r.promptId)
    if (!flights) {
      flights = new Set()
      this.flightsByPrompt.set(r.promptId, flights)
    }
    flights.add(flight)
    return promise
  }

  private remember(key: string, promptId: string, pointer: Pointer): void {
    if (!this.pointers) return
    this.pointers.set(key, pointer)
    let keys = this.keysByPrompt.get(promptId)
    if (!keys) {
      keys = new Set()
      this.keysByPrompt.set(promptId, keys)
    }
    keys.add(key)
  }

  /** The compiled snapshot of a resolved version, compiled once per version id. */
  private snapshot(resolved: ResolvedPrompt): Snapshot {
    const cached = this.snapshots.get(resolved.versionId)
    if (cached) return cached
    const compiled = compileTemplate(resolved.template)
    const snapshot: Snapshot = {
      promptId: resolved.promptId,
      versionId: resolved.versionId,
      version: resolved.version,
      compiled,
      variables: resolved.variables,
      ...(resolved.messages ? { chat: compileChat(resolved.messages) } : {}),
      ...(resolved.config ? { config: resolved.config } : {}),
      organizationId: resolved.organizationId,
      ...(resolved.slug !== undefined ? { slug: resolved.slug } : {}),
    }
    if (!resolved.messages) {
      const logic = compileLogicOrFlat(resolved.template, compiled)
      // Flat nodes only: the template has no logic, and the flat path keeps rendering it.
      if (logic.occurrences.length > 0 || logic.nodes.some((n) => n.kind !== 'text' && n.kind !== 'var')) {
        snapshot.logic = logic
      }
    }
    this.snapshots.set(resolved.versionId, snapshot)
    return snapshot
  }

  private static selectorQuery(r: { version?: number; env?: EnvironmentName; publicOnly?: boolean }): string {
    let query = ''
    if (r.version !== undefined) query += `&version=${r.version}`
    if (r.env !== undefined) query += `&env=${r.env}`
    if (r.publicOnly) query += '&public=true'
    return query ? `?${query.slice(1)}` : ''
  }

  private fetch(r: ResolveRequest): Promise<ResolvedPrompt> {
    const path = `${internalPath('internal', 'prompts', r.promptId, 'resolve')}${Resolver.selectorQuery(r)}`
    return this.getJson<ResolvedPrompt>(path, r)
  }

  /**
   * A reference of a public prompt, for the public catalog: answered only when the included
   * prompt is public too, so a public prompt never shows a private one. Not cached (rare). Under
   * a split, the variant is picked as for any other include (the subject's, random without one)
   * and asked for by number through the same public lookup.
   */
  async resolvePublicReference(
    r: Pick<ResolveRequest, 'contextHeader' | 'requestId' | 'version' | 'env' | 'subject'> & {
      organizationId: string
      slug: string
    },
  ): Promise<Snapshot> {
    this.stats.fetches++
    let query = Resolver.selectorQuery({ ...r, publicOnly: true })
    query += `&org=${encodeURIComponent(r.organizationId)}`
    const resolved = await this.getJson<ResolvedPrompt>(
      `${internalPath('internal', 'prompts', 'slug', r.slug, 'resolve')}${query}`,
      r,
    )
    const snapshot = this.snapshot(resolved)
    if (!resolved.split) return snapshot
    const variant = pickVariant(resolved.split, resolved.promptId, r.env ?? '', r.subject)
    const chosen = resolved.split.variants[variant]
    if (!chosen) throw new AppError('VERSION_NOT_FOUND', 'the split names no such variant')
    if (chosen.versionId === resolved.versionId) return snapshot
    return (
      this.snapshots.get(chosen.versionId) ??
      (await this.resolvePublicReference({
        ...r,
        env: undefined,
        version: chosen.version,
        subject: undefined,
      }))
    )
  }

  /** The draft, for inject: never cached, since every save changes it. */
  draft(r: ResolveRequest): Promise<DraftPrompt> {
    return this.getJson(internalPath('internal', 'prompts', r.promptId, 'draft'), r)
  }

  private async getJson<T>(path: string, r: Pick<ResolveRequest, 'contextHeader' | 'requestId'>): Promise<T> {
    const { tracing } = this
    const call = () =>
      callInternal(this.pool, {
        method: 'GET',
        path,
        headers: {
          [CONTEXT_HEADER]: r.contextHeader,
          'x-request-id': r.requestId,
          // The client span's, when this call is one (prompts continues the trace from it).
          ...(tracing ? tracing.headers() : undefined),
        },
        timeoutMs: this.timeoutMs,
      })
    let answer: InternalAnswer
    try {
      // Only a call that leaves the process is a span: a lookup the caches answer is not.
      answer = tracing ? await tracing.span('render.prompts', call, { kind: 'client' }) : await call()
    } catch (err) {
      if (err instanceof AppError) throw err
      if (err instanceof InternalTimeoutError) {
        throw new AppError('UPSTREAM_TIMEOUT', 'the prompts service did not answer in time')
      }
      throw new AppError('SERVICE_UNAVAILABLE', 'the prompts service is not reachable')
    }
    const body = answer.body as
      | (T & { error?: { code?: string; message?: string; details?: unknown } })
      | null
    if (answer.statusCode === 200 && body) return body
    const code = body?.error?.code
    // The prompts service's own 4xx answers (not found, no published version, ...) are the
    // caller's answer too; anything else is this service's upstream failing.
    if (
      isErrorCode(code) &&
      answer.statusCode >= 400 &&
      answer.statusCode < 500 &&
      code !== 'INVALID_CREDENTIALS'
    ) {
      throw new AppError(code as ErrorCode, body?.error?.message ?? 'lookup failed', body?.error?.details)
    }
    throw new AppError('SERVICE_UNAVAILABLE', 'the prompts service failed')
  }

  async check(): Promise<void> {
    const res = await callInternal(this.pool, {
      method: 'GET',
      path: '/health/live',
      headers: {},
      timeoutMs: 2_000,
    })
    if (res.statusCode !== 200) throw new Error(`prompts service answered ${res.statusCode}`)
  }

  async close(): Promise<void> {
    await closePool(this.pool)
  }
}
