import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import type { CallerContext, CreateExperimentRequest } from '@pm/contracts'
import { newId } from '@pm/kit'
import type { FastifyBaseLogger } from 'fastify'
import { afterAll, afterEach, describe, expect, it } from 'vitest'
import type { PromptsClient } from '../src/services/clients.ts'
import { ExperimentsService } from '../src/services/experiments.ts'
import type { Runner } from '../src/services/runner.ts'
import { SqliteExperimentStore } from '../src/store/sqlite.ts'
import type { UnitResult } from '../src/store/types.ts'

/**
 * The experiment's lifecycle against races with another replica: the service with its SQLite
 * store; prompts and the runner stood in for (no unit runs here: the tests record them).
 */

const dir = mkdtempSync(join(tmpdir(), 'pm-experiments-service-'))
const store = new SqliteExperimentStore(join(dir, 'experiments.db'))
const bus = new MemoryBus(10)
const service = new ExperimentsService({
  store,
  bus,
  prompts: { checkVariant: async () => {} } as unknown as PromptsClient,
  runner: { drive: () => {}, stop: () => {}, isDriving: () => false } as unknown as Runner,
  log: { warn: () => {}, info: () => {}, error: () => {} } as unknown as FastifyBaseLogger,
  defaultConcurrency: 2,
})
const original = { transition: store.transition, allItems: store.allItems }
afterEach(() => {
  Object.assign(store, original)
})
afterAll(async () => {
  await bus.close()
  await store.close()
  rmSync(dir, { recursive: true, force: true })
})

const callerOf = (org: string): CallerContext => ({
  kind: 'user',
  userId: newId(),
  organizationId: org,
  role: 'OWNER',
  scopes: ['prompts:read', 'runs:write'],
  requestId: 'req-service-1',
})
const body = (datasetId: string): CreateExperimentRequest => ({
  name: 'race',
  datasetId,
  variants: [{ promptId: newId() }],
  connectionId: newId(),
  evaluators: [],
})
const answered = (output: string): UnitResult => ({
  output,
  scores: {},
  evaluatorErrors: {},
  passed: true,
  latencyMs: 3,
  inputTokens: 1,
  outputTokens: 1,
  error: null,
  finishedAt: new Date().toISOString(),
})

async function running(items: number) {
  const org = newId()
  const d = await service.createDataset(org, {
    name: 'd',
    items: Array.from({ length: items }, (_, n) => ({ variables: { n } })),
  })
  const { experimentId } = await service.createExperiment(callerOf(org), org, body(d._id))
  await service.take(experimentId)
  const units = await store.claimUnits(experimentId, items, new Date().toISOString(), '9999', 'other')
  return { org, datasetId: d._id, experimentId, units }
}

describe('cancel', () => {
  it('freezes a summary that counts the units progress counts, one recorded during the cancel too', async () => {
    const { org, experimentId, units } = await running(3)
    const [u1, u2] = units
    if (!u1 || !u2) throw new Error('no units')
    // Another replica records a unit just before the status changes.
    store.transition = async (...args) => {
      await store.completeUnit(u1._id, answered('a'))
      return original.transition.apply(store, args)
    }
    const cancelled = await service.cancel(org, experimentId)
    store.transition = original.transition
    // ...and tries to record one after: a cancelled experiment's units are no longer pending.
    expect(await store.completeUnit(u2._id, answered('b'))).toBe(false)
    const seen = await service.getExperiment(org, experimentId)
    for (const view of [cancelled, seen]) {
      expect(view.status).toBe('cancelled')
      expect(view.progress).toEqual({ done: 1, total: 3 })
      expect(view.summary.reduce((n, s) => n + s.done, 0)).toBe(1)
    }
  })
})

describe('names', () => {
  it('are stored trimmed, as prompts and identity store theirs (dataset create and update, experiment)', async () => {
    const org = newId()
    const d = await service.createDataset(org, { name: '  reviews  ', items: [{ variables: { q: 1 } }] })
    expect(d.name).toBe('reviews')
    expect((await service.updateDataset(org, d._id, { name: ' reviews v2\u00a0' })).name).toBe('reviews v2')
    const { experimentId } = await service.createExperiment(callerOf(org), org, {
      ...body(d._id),
      name: '  nightly ',
    })
    expect((await service.getExperiment(org, experimentId)).name).toBe('nightly')
  })
})

describe('a dataset deleted while an experiment on it is created', () => {
  it('answers NOT_FOUND and creates nothing', async () => {
    const org = newId()
    const d = await service.createDataset(org, { name: 'gone', items: [{ variables: { q: 1 } }] })
    // The delete lands between reading the items and writing the experiment.
    store.allItems = async (id) => {
      const items = await original.allItems.call(store, id)
      await service.deleteDataset(org, id)
      return items
    }
    await expect(service.createExperiment(callerOf(org), org, body(d._id))).rejects.toMatchObject({
      code: 'NOT_FOUND',
    })
    expect((await service.listExperiments(org, { page: 1, limit: 10 })).pagination.total).toBe(0)
  })

  it('answers NOT_FOUND, not an empty dataset, when it went while the variants were checked', async () => {
    const org = newId()
    const d = await service.createDataset(org, { name: 'gone', items: [{ variables: { q: 1 } }] })
    store.allItems = async (id) => {
      await service.deleteDataset(org, id)
      return original.allItems.call(store, id)
    }
    await expect(service.createExperiment(callerOf(org), org, body(d._id))).rejects.toMatchObject({
      code: 'NOT_FOUND',
    })
  })
})
