/**
 * An in-memory cache with a time to live and stale-while-revalidate: a fresh entry is
 * served as it is; an expired one is served at once while a single background request
 * refreshes it; when the service is unreachable the expired entry keeps being served (up to
 * `maxStaleMs`) until a refresh succeeds. Least recently used entries go first when full.
 */

export type CacheSource = 'network' | 'cache' | 'stale' | 'fallback'

interface Entry<T> {
  value: T
  storedAt: number
}

export interface CacheOptions {
  ttlMs: number
  maxStaleMs: number
  maxEntries: number
  now: () => number
}

export type Lookup<T> =
  | { state: 'fresh'; value: T }
  | { state: 'stale'; value: T; ageMs: number }
  | { state: 'miss' }

export class TtlCache<T> {
  private readonly entries = new Map<string, Entry<T>>()
  private readonly refreshing = new Map<string, Promise<void>>()
  private readonly opts: CacheOptions

  constructor(opts: CacheOptions) {
    this.opts = opts
  }

  get size(): number {
    return this.entries.size
  }

  lookup(key: string): Lookup<T> {
    const entry = this.entries.get(key)
    if (!entry) return { state: 'miss' }
    // Touch: most recently used moves to the end.
    this.entries.delete(key)
    this.entries.set(key, entry)
    const ageMs = this.opts.now() - entry.storedAt
    if (ageMs < this.opts.ttlMs) return { state: 'fresh', value: entry.value }
    if (ageMs - this.opts.ttlMs > this.opts.maxStaleMs) {
      this.entries.delete(key)
      return { state: 'miss' }
    }
    return { state: 'stale', value: entry.value, ageMs }
  }

  set(key: string, value: T): void {
    this.entries.delete(key)
    this.entries.set(key, { value, storedAt: this.opts.now() })
    while (this.entries.size > this.opts.maxEntries) {
      const oldest = this.entries.keys().next()
      if (oldest.done) break
      this.entries.delete(oldest.value)
    }
  }

  delete(key: string): void {
    this.entries.delete(key)
  }

  /** Drops every entry whose key starts with `prefix` (all of them without one). */
  clear(prefix = ''): void {
    for (const key of [...this.entries.keys()]) if (key.startsWith(prefix)) this.entries.delete(key)
  }

  /** Runs `refresh` for `key` unless one is already running; resolves when it settles. */
  revalidate(key: string, refresh: () => Promise<void>): Promise<void> {
    const running = this.refreshing.get(key)
    if (running) return running
    const run = refresh().finally(() => this.refreshing.delete(key))
    this.refreshing.set(key, run)
    return run
  }

  /** Resolves when every background refresh has settled (tests, graceful shutdown). */
  async settled(): Promise<void> {
    while (this.refreshing.size > 0) await Promise.allSettled([...this.refreshing.values()])
  }
}

/** A key that does not depend on the order of object fields. */
export function stableKey(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'undefined'
  if (Array.isArray(value)) return `[${value.map(stableKey).join(',')}]`
  const obj = value as Record<string, unknown>
  return `{${Object.keys(obj)
    .sort()
    .filter((k) => obj[k] !== undefined)
    .map((k) => `${JSON.stringify(k)}:${stableKey(obj[k])}`)
    .join(',')}}`
}
