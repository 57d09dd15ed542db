import {
  AppError,
  CONTEXT_HEADER,
  type ErrorCode,
  isErrorCode,
  type ResolvedPrompt,
  type Variable,
} from '@pm/contracts'
import { type CompiledTemplate, compileTemplate } from '@pm/template'
import { LRUCache } from 'lru-cache'
import { Pool } from 'undici'

export interface Snapshot {
  promptId: string
  versionId: string
  version: number
  compiled: CompiledTemplate
  variables: Variable[]
}

export interface ResolveRequest {
  promptId: string
  organizationId: string | undefined
  version?: number
  env?: 'preview' | 'production'
  publicOnly: boolean
  /** Forwarded to the prompts service as is (it was signed by the gateway). */
  contextHeader: string
  requestId: string
}

export interface ResolverOptions {
  promptsUrl: string
  snapshotCacheSize: number
  resolveCacheSize: number
  resolveTtlMs: number
}

/**
 * Finds the snapshot to render. Two caches: compiled snapshots by version id (a published
 * version never changes, so they are kept until evicted), and the short-lived answer to
 * "which version does this request mean" (current version, pins, visibility), which the
 * prompts service's change events drop at once.
 */
export class Resolver {
  private readonly pool: Pool
  private readonly snapshots: LRUCache<string, Snapshot>
  private readonly pointers: LRUCache<string, string>
  /** Bumped on every change event so a lookup that raced with the event is not cached. */
  private readonly generations = new Map<string, number>()

  constructor(opts: ResolverOptions) {
    this.pool = new Pool(opts.promptsUrl, { connections: 64, pipelining: 1, keepAliveTimeout: 30_000 })
    this.snapshots = new LRUCache({ max: opts.snapshotCacheSize })
    this.pointers = new LRUCache({ max: opts.resolveCacheSize, ttl: Math.max(opts.resolveTtlMs, 1) })
  }

  private key(r: ResolveRequest): string {
    return `${r.promptId}|${r.publicOnly ? 'public' : r.organizationId}|${r.version ?? ''}|${r.env ?? ''}`
  }

  /** Drops everything cached about which version of this prompt to render. */
  invalidate(promptId: string): void {
    this.generations.set(promptId, (this.generations.get(promptId) ?? 0) + 1)
    for (const key of this.pointers.keys()) if (key.startsWith(`${promptId}|`)) this.pointers.delete(key)
  }

  async resolve(r: ResolveRequest): Promise<Snapshot> {
    const key = this.key(r)
    const versionId = this.pointers.get(key)
    if (versionId) {
      const cached = this.snapshots.get(versionId)
      if (cached) return cached
    }
    const generation = this.generations.get(r.promptId) ?? 0
    const resolved = await this.fetch(r)
    let snapshot = this.snapshots.get(resolved.versionId)
    if (!snapshot) {
      snapshot = {
        promptId: resolved.promptId,
        versionId: resolved.versionId,
        version: resolved.version,
        compiled: compileTemplate(resolved.template),
        variables: resolved.variables,
      }
      this.snapshots.set(resolved.versionId, snapshot)
    }
    if ((this.generations.get(r.promptId) ?? 0) === generation) this.pointers.set(key, resolved.versionId)
    return snapshot
  }

  private async fetch(r: ResolveRequest): Promise<ResolvedPrompt> {
    const query = new URLSearchParams()
    if (r.version !== undefined) query.set('version', String(r.version))
    if (r.env !== undefined) query.set('env', r.env)
    if (r.publicOnly) query.set('public', 'true')
    const qs = query.toString()
    return this.getJson<ResolvedPrompt>(`/internal/prompts/${r.promptId}/resolve${qs ? `?${qs}` : ''}`, r)
  }

  async draft(r: ResolveRequest): Promise<{ template: string; variables: Variable[] }> {
    return this.getJson(`/internal/prompts/${r.promptId}/draft`, r)
  }

  private async getJson<T>(path: string, r: ResolveRequest): Promise<T> {
    let res: Awaited<ReturnType<Pool['request']>>
    try {
      res = await this.pool.request({
        method: 'GET',
        path,
        headers: { [CONTEXT_HEADER]: r.contextHeader, 'x-request-id': r.requestId },
        headersTimeout: 10_000,
        bodyTimeout: 10_000,
      })
    } catch {
      throw new AppError('SERVICE_UNAVAILABLE', 'the prompts service is not reachable')
    }
    const body = (await res.body.json().catch(() => null)) as
      | (T & { error?: { code?: string; message?: string; details?: unknown } })
      | null
    if (res.statusCode === 200 && body) return body
    const code = body?.error?.code
    if (isErrorCode(code) && res.statusCode < 500) {
      throw new AppError(code as ErrorCode, body?.error?.message ?? 'lookup failed', body?.error?.details)
    }
    throw new AppError('SERVICE_UNAVAILABLE', 'the prompts service failed')
  }

  async check(): Promise<void> {
    const res = await this.pool.request({ method: 'GET', path: '/health/live', headersTimeout: 2_000 })
    await res.body.dump()
    if (res.statusCode !== 200) throw new Error(`prompts service answered ${res.statusCode}`)
  }

  async close(): Promise<void> {
    await this.pool.close()
  }
}
