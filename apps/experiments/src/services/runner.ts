import { randomBytes } from 'node:crypto'
import type { Evaluator } from '@pm/contracts'
import type { FastifyBaseLogger } from 'fastify'
import {
  type CompiledEvaluator,
  compileEvaluators,
  EvaluatorConfigError,
  type HeavyRunner,
  type Judge,
  score,
} from '../domain/evaluators.ts'
import type { ExperimentRecord, ExperimentStore, UnitRecord, UnitResult } from '../store/types.ts'
import { RateLimitedError, type UnitExecutor } from './clients.ts'

export interface RunnerOptions {
  store: ExperimentStore
  executor: UnitExecutor
  log: FastifyBaseLogger
  /** Units in flight per organization, in this process. */
  orgConcurrency: number
  leaseMs: number
  pollMs: number
  maxBackoffMs: number
  /** Where `regex` and `json-schema` evaluators run (a worker with a deadline); inline without one. */
  sandbox?: HeavyRunner
  /**
   * A unit the provider answered 429 this many times is recorded with an error rather than given
   * back again: a provider that always answers 429 ends the experiment.
   */
  maxRateLimited: number
  /**
   * Called once an experiment has ended (completed, failed), or cannot run (`cannotRun` says why:
   * it fails): freezes and announces it.
   */
  onEnded: (experiment: ExperimentRecord, cannotRun?: string) => Promise<void>
}

interface Drive {
  inflight: Map<string, AbortController>
  backoffUntil: number
  wake: (() => void) | null
  organizationId: string
}

const iso = (ms: number) => new Date(ms).toISOString()

/**
 * Runs the units of running experiments. The units are the work queue, kept in the store: a
 * unit is claimed with a lease (so two replicas, or a process and its successor after a crash,
 * never run it at once) that is renewed at every tick while it runs here, run through the
 * executor, scored, and recorded with a write that only a pending unit takes (so a unit
 * repeated after a crash is counted once). A 429 gives the unit back, due after the provider's
 * Retry-After, and pauses the experiment that long: nothing is lost, up to `maxRateLimited` 429s
 * for one unit, after which it is recorded as failed. Each experiment has at most
 * its `concurrency` units in flight, each organization `orgConcurrency`; the experiment's status
 * is read again at every step, so a cancel stops new units within one poll (`pollMs`), at once
 * on the replica that took the cancel.
 */
export class Runner {
  private readonly opts: RunnerOptions
  private readonly token = randomBytes(12).toString('hex')
  private readonly drives = new Map<string, Drive>()
  private readonly running = new Set<Promise<void>>()
  private readonly orgInflight = new Map<string, number>()
  private stopped = false

  constructor(opts: RunnerOptions) {
    this.opts = opts
  }

  /** Starts driving an experiment in this process, unless it already is. */
  drive(experimentId: string, organizationId: string): void {
    if (this.stopped || this.drives.has(experimentId)) return
    const d: Drive = { inflight: new Map(), backoffUntil: 0, wake: null, organizationId }
    this.drives.set(experimentId, d)
    const work = this.loop(experimentId, d)
      .catch((err: unknown) =>
        this.opts.log.error({ err, experimentId }, 'experiment runner failed; it resumes at the next scan'),
      )
      .finally(() => {
        this.drives.delete(experimentId)
        this.running.delete(work)
      })
    this.running.add(work)
  }

  /** Aborts the units of an experiment in flight here (cancel): they are given back, not recorded. */
  stop(experimentId: string): void {
    const d = this.drives.get(experimentId)
    if (!d) return
    for (const c of d.inflight.values()) c.abort()
    d.wake?.()
  }

  isDriving(experimentId: string): boolean {
    return this.drives.has(experimentId)
  }

  private wakeAll(): void {
    for (const d of this.drives.values()) d.wake?.()
  }

  private orgFree(organizationId: string): number {
    return this.opts.orgConcurrency - (this.orgInflight.get(organizationId) ?? 0)
  }

  private async loop(id: string, d: Drive): Promise<void> {
    const { store } = this.opts
    let compiled: CompiledEvaluator[] | undefined
    while (!this.stopped) {
      const exp = await store.getExperiment(null, id)
      if (exp?.status !== 'running') {
        for (const c of d.inflight.values()) c.abort()
        break
      }
      try {
        compiled ??= compileEvaluators(exp.evaluators, this.opts.sandbox)
      } catch (err) {
        if (!(err instanceof EvaluatorConfigError)) throw err
        // Stored before a check that now refuses it (an `$async` schema): it fails, rather than
        // being taken up again at every scan.
        await this.opts.onEnded(exp, `evaluators[${err.index}]: ${err.message}`)
        break
      }
      const now = Date.now()
      // The units still in flight here stay ours: a call longer than one lease is not taken again.
      if (d.inflight.size > 0)
        await store.renewLeases([...d.inflight.keys()], this.token, iso(now + this.opts.leaseMs))
      let claimed = 0
      if (now >= d.backoffUntil) {
        const free = Math.min(exp.concurrency - d.inflight.size, this.orgFree(exp.organizationId))
        if (free > 0) {
          const units = await store.claimUnits(id, free, iso(now), iso(now + this.opts.leaseMs), this.token)
          for (const unit of units) {
            // One whose lease ran out while it was still running here (a stalled loop) runs on.
            if (d.inflight.has(unit._id)) continue
            this.start(exp, compiled, unit, d)
            claimed++
          }
        }
      }
      if (claimed === 0 && d.inflight.size === 0 && now >= d.backoffUntil) {
        const { pending } = await store.countUnits(id)
        if (pending === 0) {
          await this.opts.onEnded(exp)
          break
        }
      }
      // With units in flight, a tick comes well within a lease (to renew it) whatever the poll.
      const tickMs =
        d.inflight.size > 0 ? Math.min(this.opts.pollMs, this.opts.leaseMs / 3) : this.opts.pollMs
      const waitMs = d.backoffUntil > now ? Math.min(tickMs, d.backoffUntil - now) : tickMs
      await new Promise<void>((resolve) => {
        const timer = setTimeout(done, waitMs)
        function done() {
          clearTimeout(timer)
          d.wake = null
          resolve()
        }
        d.wake = done
      })
    }
    // Let the units in flight give themselves back before the drive ends.
    while (d.inflight.size > 0) await new Promise((r) => setTimeout(r, 10))
  }

  private start(exp: ExperimentRecord, compiled: CompiledEvaluator[], unit: UnitRecord, d: Drive): void {
    const controller = new AbortController()
    d.inflight.set(unit._id, controller)
    this.orgInflight.set(exp.organizationId, (this.orgInflight.get(exp.organizationId) ?? 0) + 1)
    void this.runUnit(exp, compiled, unit, d, controller.signal)
      .catch((err: unknown) => {
        // The store failed: the lease runs out and the unit is taken again.
        this.opts.log.error({ err, unit: unit._id }, 'experiment unit failed to record')
      })
      .finally(() => {
        d.inflight.delete(unit._id)
        this.orgInflight.set(exp.organizationId, (this.orgInflight.get(exp.organizationId) ?? 1) - 1)
        this.wakeAll()
      })
  }

  private async runUnit(
    exp: ExperimentRecord,
    compiled: CompiledEvaluator[],
    unit: UnitRecord,
    d: Drive,
    signal: AbortSignal,
  ): Promise<void> {
    const { store, executor } = this.opts
    const item = await store.getItem(exp.datasetId, unit.itemId)
    const blank = {
      output: null,
      scores: {},
      evaluatorErrors: {},
      passed: false,
      latencyMs: null,
      inputTokens: 0,
      outputTokens: 0,
    }
    if (!item) {
      await store.completeUnit(unit._id, {
        ...blank,
        error: 'the dataset item was deleted',
        finishedAt: new Date().toISOString(),
      })
      return
    }
    const variant = exp.variants[unit.variant]
    if (!variant) throw new Error(`experiment ${exp._id} has no variant ${unit.variant}`)
    const judge: Judge = async (ev: Extract<Evaluator, { type: 'llm-judge' }>, variables) => {
      const answer = await executor.run(
        exp.caller,
        {
          slug: ev.rubric,
          variables,
          connectionId: ev.connectionId ?? exp.connectionId,
          ...(ev.model ? { model: ev.model } : {}),
        },
        signal,
      )
      return answer.output
    }
    let result: UnitResult
    try {
      const answer = await executor.run(
        exp.caller,
        {
          promptId: variant.promptId,
          ...(variant.version !== undefined ? { version: variant.version } : {}),
          ...(variant.env !== undefined ? { env: variant.env } : {}),
          ...(variant.draft ? { draft: true as const } : {}),
          variables: item.variables,
          connectionId: exp.connectionId,
          ...(exp.model !== null ? { model: exp.model } : {}),
          ...(exp.params !== null ? { params: exp.params } : {}),
        },
        signal,
      )
      const scored = await score(
        compiled,
        { output: answer.output, expected: item.expected, variables: item.variables },
        judge,
      )
      result = {
        output: answer.output,
        ...scored,
        latencyMs: answer.latencyMs,
        inputTokens: answer.inputTokens,
        outputTokens: answer.outputTokens,
        error: null,
        finishedAt: new Date().toISOString(),
      }
    } catch (err) {
      const rateLimited = err instanceof RateLimitedError
      if (rateLimited && unit.rateLimited + 1 >= this.opts.maxRateLimited) {
        result = {
          ...blank,
          error: `the provider kept answering 429 (rate limited) after ${unit.rateLimited + 1} attempts`,
          finishedAt: new Date().toISOString(),
        }
      } else if (rateLimited) {
        const wait = Math.min(err.retryAfterMs, this.opts.maxBackoffMs)
        d.backoffUntil = Math.max(d.backoffUntil, Date.now() + wait)
        this.opts.log.info(
          { experimentId: exp._id, waitMs: wait },
          'provider rate limit: the experiment backs off',
        )
        await store.releaseUnit(unit._id, this.token, iso(Date.now() + wait), true)
        return
      } else if (signal.aborted) {
        await store.releaseUnit(unit._id, this.token, null)
        return
      } else {
        result = {
          ...blank,
          error: (err as Error).message.slice(0, 2_000),
          finishedAt: new Date().toISOString(),
        }
      }
    }
    // Cancelled while the call was made: the answer is dropped, as a cancel promises.
    if (signal.aborted) {
      await store.releaseUnit(unit._id, this.token, null)
      return
    }
    await store.completeUnit(unit._id, result)
  }

  /** Stops taking units, aborts those in flight (given back) and waits for the drives to end. */
  async close(): Promise<void> {
    this.stopped = true
    for (const d of this.drives.values()) {
      for (const c of d.inflight.values()) c.abort()
      d.wake?.()
    }
    await Promise.all([...this.running])
  }
}
