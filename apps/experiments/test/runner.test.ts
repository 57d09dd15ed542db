import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { newId } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { afterEach, describe, expect, it } from 'vitest'
import { RateLimitedError, type RunAnswer, type UnitExecutor } from '../src/services/clients.ts'
import { Runner } from '../src/services/runner.ts'
import { SqliteExperimentStore } from '../src/store/sqlite.ts'
import { type ExperimentRecord, pendingUnit } from '../src/store/types.ts'

const quiet = { info: () => {}, error: () => {} } as unknown as FastifyBaseLogger
const now = () => new Date().toISOString()

/** A running experiment of `items` items × one variant in a fresh SQLite store. */
async function seed(
  store: SqliteExperimentStore,
  items: number,
  evaluators: ExperimentRecord['evaluators'] = [{ type: 'contains', value: 'ok' }],
): Promise<ExperimentRecord> {
  const org = newId()
  const datasetId = newId()
  await store.createDataset({
    _id: datasetId,
    organizationId: org,
    name: 'd',
    description: '',
    itemCount: 0,
    createdAt: now(),
    updatedAt: now(),
  })
  await store.addItems(
    org,
    datasetId,
    Array.from({ length: items }, (_, n) => ({
      _id: newId(),
      organizationId: org,
      datasetId,
      variables: { n },
      expected: null,
      metadata: null,
      createdAt: now(),
    })),
    100,
  )
  const exp: ExperimentRecord = {
    _id: newId(),
    organizationId: org,
    name: 'e',
    datasetId,
    variants: [{ promptId: 'a'.repeat(24) }],
    connectionId: 'c'.repeat(24),
    model: null,
    params: null,
    evaluators,
    concurrency: 4,
    status: 'running',
    total: items,
    caller: { kind: 'user', userId: newId(), organizationId: org, scopes: [] },
    error: null,
    summary: null,
    announced: false,
    createdAt: now(),
    startedAt: now(),
    finishedAt: null,
  }
  const units = (await store.allItems(datasetId)).map((it) => pendingUnit(exp._id, org, it, 0))
  await store.createExperiment(exp, units)
  return exp
}

/** A model slower than several leases; counts its calls per item. */
function slowExecutor(ms: number): UnitExecutor & { calls: Map<unknown, number> } {
  const calls = new Map<unknown, number>()
  return {
    calls,
    async run(_caller, request): Promise<RunAnswer> {
      const n = request.variables.n
      calls.set(n, (calls.get(n) ?? 0) + 1)
      await new Promise((r) => setTimeout(r, ms))
      return { output: 'ok', latencyMs: ms, inputTokens: 1, outputTokens: 1 }
    },
    close: async () => {},
  }
}

describe('Runner', () => {
  const dirs: string[] = []
  afterEach(() => {
    for (const dir of dirs.splice(0)) rmSync(dir, { recursive: true, force: true })
  })

  /** Drives the experiment to its end; what `onEnded` was told (why it cannot run, if so). */
  async function runOnce(
    store: SqliteExperimentStore,
    exp: ExperimentRecord,
    executor: UnitExecutor,
    maxRateLimited = 20,
  ): Promise<string | undefined> {
    let ended: (cannotRun: string | undefined) => void = () => {}
    const finished = new Promise<string | undefined>((resolve) => {
      ended = resolve
    })
    const runner = new Runner({
      store,
      executor,
      log: quiet,
      orgConcurrency: 8,
      // A call takes several leases: only renewing them keeps the units this process's.
      leaseMs: 60,
      pollMs: 20,
      maxBackoffMs: 1_000,
      maxRateLimited,
      onEnded: async (_exp, cannotRun) => ended(cannotRun),
    })
    runner.drive(exp._id, exp.organizationId)
    const cannotRun = await finished
    await runner.close()
    return cannotRun
  }

  function open(): SqliteExperimentStore {
    const dir = mkdtempSync(join(tmpdir(), 'pm-runner-'))
    dirs.push(dir)
    return new SqliteExperimentStore(join(dir, 'experiments.db'))
  }

  it('a unit slower than its lease runs once (the leases of units in flight are renewed)', async () => {
    const store = open()
    const exp = await seed(store, 2)
    const executor = slowExecutor(400)
    await runOnce(store, exp, executor)
    expect([...executor.calls.values()]).toEqual([1, 1])
    expect(await store.countUnits(exp._id)).toEqual({ done: 2, pending: 0 })
    await store.close()
  })

  it('a unit still in flight whose lease ran out anyway (a stalled loop) is not started again', async () => {
    const store = open()
    // No renewal at all: the claims take this process's own units back.
    store.renewLeases = async () => {}
    const exp = await seed(store, 2)
    const executor = slowExecutor(400)
    await runOnce(store, exp, executor)
    expect([...executor.calls.values()]).toEqual([1, 1])
    expect(await store.countUnits(exp._id)).toEqual({ done: 2, pending: 0 })
    await store.close()
  })

  it('a provider that always answers 429 ends the experiment: each unit fails at the cap', async () => {
    const store = open()
    const exp = await seed(store, 2)
    const calls = new Map<unknown, number>()
    const limited: UnitExecutor = {
      async run(_caller, request) {
        calls.set(request.variables.n, (calls.get(request.variables.n) ?? 0) + 1)
        throw new RateLimitedError(1)
      },
      close: async () => {},
    }
    expect(await runOnce(store, exp, limited, 3)).toBeUndefined()
    // Below the cap the unit was given back (Retry-After); the third 429 recorded it.
    expect([...calls.values()]).toEqual([3, 3])
    expect(await store.countUnits(exp._id)).toEqual({ done: 2, pending: 0 })
    const units = await store.doneUnits(exp._id)
    expect(units.map((u) => [u.error, u.rateLimited])).toEqual([
      ['the provider kept answering 429 (rate limited) after 3 attempts', 2],
      ['the provider kept answering 429 (rate limited) after 3 attempts', 2],
    ])
    await store.close()
  })

  it('an experiment stored with evaluators now refused (an $async schema) ends, no unit run', async () => {
    const store = open()
    const exp = await seed(store, 1, [{ type: 'json-schema', schema: { $async: true, type: 'object' } }])
    const executor = slowExecutor(1)
    expect(await runOnce(store, exp, executor)).toMatch(/^evaluators\[0\]: .*\$async/)
    expect(executor.calls.size).toBe(0)
    await store.close()
  })
})
