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
  /**
   * Bumped by every clear (an invalidation): a load that began before it answers what the
   * service held before this client's own write, so its result must not be stored (setIfCurrent).
   */
  private gen = 0

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

  /** Read before a load starts, and handed to setIfCurrent / deleteIfCurrent when it ends. */
  get generation(): number {
    return this.gen
  }

  /** `set`, unless the cache was cleared since `generation` was read (the value may predate a write). */
  setIfCurrent(key: string, value: T, generation: number): boolean {
    if (generation !== this.gen) return false
    this.set(key, value)
    return true
  }

  /** `delete`, unless the cache was cleared since (the entry may be a newer load's). */
  deleteIfCurrent(key: string, generation: number): void {
    if (generation === this.gen) this.entries.delete(key)
  }

  delete(key: string): void {
    this.entries.delete(key)
  }

  /** Drops every entry whose key starts with `prefix` (all of them without one). */
  clear(prefix = ''): void {
    // One counter for the whole cache: a write to one prompt also drops the loads of others in
    // flight (they are answered, just not stored), which costs a request, never a wrong answer.
    this.gen++
    this.evict(prefix)
  }

  /**
   * Drops the entries under `prefix` to make room (not an invalidation: loads in flight may
   * still store what they answer).
   */
  evict(prefix: string): void {
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

/**
 * A key that does not depend on the order of object fields. It is taken of the JSON the request
 * sends (a Date as its ISO string, anything with toJSON as what that answers, a Map as {}), so
 * two values are one key exactly when they are one request.
 */
export function stableKey(value: unknown): string {
  const json = JSON.stringify(value)
  return json === undefined ? 'undefined' : canonical(JSON.parse(json))
}

/** The key of a parsed JSON value: objects with their fields sorted. */
function canonical(value: unknown): string {
  if (value === null || typeof value !== 'object') return JSON.stringify(value) ?? 'undefined'
  if (Array.isArray(value)) return `[${value.map(canonical).join(',')}]`
  const obj = value as Record<string, unknown>
  return `{${Object.keys(obj)
    .sort()
    .map((k) => `${JSON.stringify(k)}:${canonical(obj[k])}`)
    .join(',')}}`
}
