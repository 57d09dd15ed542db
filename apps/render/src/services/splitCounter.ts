import { CONTEXT_HEADER } from '@pm/contracts'
import { callInternal, closePool, signContext } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { Pool } from 'undici'

/**
 * Invocations per split variant (DESIGN section 15), counted in memory on the render path (one
 * Map increment) and sent to the prompts service every `flushMs` and at shutdown. Approximate:
 * counts of a replica that dies between two flushes are lost, and a flush that fails is retried
 * once with the next one, then dropped.
 */
export class SplitCounter {
  private counts = new Map<string, number>()
  private readonly pool: Pool
  private timer: NodeJS.Timeout | undefined
  private flushing: Promise<void> | undefined
  private retry: Map<string, number> | undefined

  private readonly secret: string
  private readonly log: FastifyBaseLogger
  private readonly flushMs: number

  constructor(promptsUrl: string, secret: string, log: FastifyBaseLogger, flushMs: number) {
    this.pool = new Pool(promptsUrl, { connections: 1, keepAliveTimeout: 30_000 })
    this.secret = secret
    this.log = log
    this.flushMs = flushMs
  }

  count(splitId: string, variant: number): void {
    const key = `${splitId}:${variant}`
    this.counts.set(key, (this.counts.get(key) ?? 0) + 1)
  }

  start(): void {
    this.timer = setInterval(() => void this.flush(), this.flushMs)
    this.timer.unref()
  }

  /** Sends what was counted since the last flush. */
  async flush(): Promise<void> {
    if (this.flushing) return this.flushing
    this.flushing = this.send().finally(() => {
      this.flushing = undefined
    })
    return this.flushing
  }

  private async send(): Promise<void> {
    const batch = this.counts
    this.counts = new Map()
    if (this.retry) {
      for (const [k, n] of this.retry) batch.set(k, (batch.get(k) ?? 0) + n)
      this.retry = undefined
    }
    if (batch.size === 0) return
    const counts = [...batch].map(([key, count]) => {
      const at = key.lastIndexOf(':')
      return { splitId: key.slice(0, at), variant: Number(key.slice(at + 1)), count }
    })
    let i = 0
    try {
      for (; i < counts.length; i += 500) {
        const res = await callInternal(this.pool, {
          method: 'POST',
          path: '/internal/splits/counts',
          headers: {
            [CONTEXT_HEADER]: signContext(
              { kind: 'service', scopes: [], requestId: 'split-counts' },
              this.secret,
            ),
            'content-type': 'application/json',
          },
          body: JSON.stringify({ counts: counts.slice(i, i + 500) }),
          timeoutMs: 5_000,
        })
        if (res.statusCode !== 204 && res.statusCode !== 200)
          throw new Error(`prompts answered ${res.statusCode}`)
      }
    } catch (err) {
      this.log.warn({ err }, 'split counts not sent; retrying with the next flush')
      this.retry = new Map(counts.slice(i).map((c) => [`${c.splitId}:${c.variant}`, c.count]))
    }
  }

  async close(): Promise<void> {
    clearInterval(this.timer)
    await this.flush()
    await closePool(this.pool)
  }
}
