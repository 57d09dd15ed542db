import { newId } from '@pm/kit'
import { connectMongo } from '@pm/kit/mongo'
import { storeBackends } from '@pm/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import { MongoExperimentStore } from '../src/store/mongo.ts'
import { SqliteExperimentStore } from '../src/store/sqlite.ts'
import {
  type ExperimentRecord,
  type ExperimentStore,
  type UnitRecord,
  pendingUnit,
} from '../src/store/types.ts'

const backends = await storeBackends<ExperimentStore>({
  sqlite: (file) => new SqliteExperimentStore(file),
  mongo: async (url, db) => {
    const store = new MongoExperimentStore(await connectMongo(url), db)
    await store.init()
    return store
  },
})

const T0 = Date.parse('2030-01-01T00:00:00.000Z')
const at = (ms: number) => new Date(T0 + ms).toISOString()
const item = (org: string, datasetId: string, n: number) => ({
  _id: newId(),
  organizationId: org,
  datasetId,
  variables: { n },
  expected: `answer-${n}`,
  metadata: null,
  createdAt: at(0),
})
const done = (output: string) => ({
  output,
  scores: { exact: 1 },
  evaluatorErrors: {},
  passed: true,
  latencyMs: 5,
  inputTokens: 1,
  outputTokens: 2,
  error: null,
  finishedAt: at(5),
})

for (const backend of backends) {
  describe.skipIf(!backend.available)(`ExperimentStore contract: ${backend.name}`, () => {
    let store: ExperimentStore
    afterEach(async () => {
      await store?.close()
    })

    async function seed(items: number) {
      store = await backend.open()
      const org = newId()
      const datasetId = newId()
      await store.createDataset({
        _id: datasetId,
        organizationId: org,
        name: 'd',
        description: '',
        itemCount: 0,
        createdAt: at(0),
        updatedAt: at(0),
      })
      const added = await store.addItems(
        org,
        datasetId,
        Array.from({ length: items }, (_, i) => item(org, datasetId, i + 1)),
        10,
      )
      expect(added).toEqual({ itemCount: items })
      return { org, datasetId }
    }

    async function experiment(org: string, datasetId: string, variants = 2) {
      const all = await store.allItems(datasetId)
      const exp: ExperimentRecord = {
        _id: newId(),
        organizationId: org,
        name: 'e',
        datasetId,
        variants: Array.from({ length: variants }, () => ({ promptId: 'a'.repeat(24) })),
        connectionId: 'c'.repeat(24),
        model: null,
        params: null,
        evaluators: [{ type: 'exact' }],
        concurrency: 2,
        status: 'running',
        total: all.length * variants,
        caller: { kind: 'user', userId: newId(), organizationId: org, scopes: [] },
        error: null,
        summary: null,
        announced: false,
        createdAt: at(0),
        startedAt: at(0),
        finishedAt: null,
      }
      const units: UnitRecord[] = all.flatMap((it) =>
        Array.from({ length: variants }, (_, variant) => pendingUnit(exp._id, org, it, variant)),
      )
      expect(await store.createExperiment(exp, units)).toBe(true)
      return exp
    }

    it('adds items all or none within the bound, in order, and deletes them one by one', async () => {
      const { org, datasetId } = await seed(3)
      expect(
        await store.addItems(
          org,
          datasetId,
          Array.from({ length: 8 }, (_, i) => item(org, datasetId, i)),
          10,
        ),
      ).toBe('too-many')
      expect(await store.addItems(newId(), datasetId, [item(org, datasetId, 1)], 10)).toBe('not-found')
      const items = await store.allItems(datasetId)
      expect(items.map((i) => i.position)).toEqual([1, 2, 3])
      const first = items[0]
      if (!first) throw new Error('no item')
      expect(await store.deleteItem(newId(), datasetId, first._id)).toBe(false)
      expect(await store.deleteItem(org, datasetId, first._id)).toBe(true)
      expect((await store.getDataset(org, datasetId))?.itemCount).toBe(2)
      // Positions are not reused.
      await store.addItems(org, datasetId, [item(org, datasetId, 9)], 10)
      expect((await store.allItems(datasetId)).map((i) => i.position)).toEqual([2, 3, 4])
      expect(
        (await store.listItems(org, datasetId, { page: 2, limit: 2 })).rows.map((i) => i.position),
      ).toEqual([4])
    })

    it('a claimed unit is nobody else’s until its lease ends; a result is recorded once', async () => {
      const { org, datasetId } = await seed(2)
      const exp = await experiment(org, datasetId)
      const a = await store.claimUnits(exp._id, 3, at(0), at(1_000), 'a')
      expect(a.map((u) => [u.position, u.variant])).toEqual([
        [1, 0],
        [1, 1],
        [2, 0],
      ])
      expect(
        (await store.claimUnits(exp._id, 3, at(10), at(1_010), 'b')).map((u) => [u.position, u.variant]),
      ).toEqual([[2, 1]])
      // The lease of `a` ran out (a crash): another claims them.
      const again = await store.claimUnits(exp._id, 5, at(1_005), at(3_000), 'c')
      expect(again.map((u) => u._id).sort()).toEqual(a.map((u) => u._id).sort())
      const first = again[0]
      if (!first) throw new Error('no unit')
      expect(await store.completeUnit(first._id, done('x'))).toBe(true)
      expect(await store.completeUnit(first._id, done('y'))).toBe(false)
      expect(await store.countUnits(exp._id)).toEqual({ done: 1, pending: 3 })
      const results = await store.listResults(exp._id, { page: 1, limit: 10 }, {})
      expect(results.rows.map((r) => r.output)).toEqual(['x'])
      expect((await store.listResults(exp._id, { page: 1, limit: 10 }, { failed: true })).total).toBe(0)
    })

    it('renewing leases keeps only the holder’s pending units from others', async () => {
      const { org, datasetId } = await seed(2)
      const exp = await experiment(org, datasetId, 1)
      const [u1, u2] = await store.claimUnits(exp._id, 2, at(0), at(1_000), 'a')
      if (!u1 || !u2) throw new Error('no units')
      await store.renewLeases([u1._id, u2._id], 'someone-else', at(9_000))
      await store.renewLeases([u1._id], 'a', at(5_000))
      await store.renewLeases([], 'a', at(9_000))
      // u2's lease ran out at 1,000; u1's was renewed to 5,000.
      expect((await store.claimUnits(exp._id, 2, at(2_000), at(9_000), 'b')).map((u) => u._id)).toEqual([
        u2._id,
      ])
      expect(await store.claimUnits(exp._id, 2, at(4_000), at(9_000), 'b')).toEqual([])
      expect((await store.claimUnits(exp._id, 2, at(5_000), at(9_000), 'b')).map((u) => u._id)).toEqual([
        u1._id,
      ])
    })

    it('a released unit waits for its notBefore; transitions are conditional; ended ones are announced once', async () => {
      const { org, datasetId } = await seed(1)
      const exp = await experiment(org, datasetId, 1)
      const [u] = await store.claimUnits(exp._id, 1, at(0), at(60_000), 'a')
      if (!u) throw new Error('no unit')
      await store.releaseUnit(u._id, 'someone-else', null)
      expect(await store.claimUnits(exp._id, 1, at(1), at(2), 'b')).toHaveLength(0)
      await store.releaseUnit(u._id, 'a', at(1_000))
      expect(await store.claimUnits(exp._id, 1, at(500), at(600), 'b')).toHaveLength(0)
      expect(await store.claimUnits(exp._id, 1, at(1_000), at(2_000), 'b')).toHaveLength(1)
      expect((await store.activeExperiments()).map((e) => e._id)).toContain(exp._id)
      expect(await store.transition(exp._id, ['queued'], 'running')).toBe(false)
      expect(
        await store.transition(exp._id, ['running'], 'cancelled', { finishedAt: at(3), summary: [] }),
      ).toBe(true)
      expect((await store.getExperiment(org, exp._id))?.status).toBe('cancelled')
      expect(await store.getExperiment(newId(), exp._id)).toBeNull()
      expect((await store.unannounced()).map((e) => e._id)).toEqual([exp._id])
      await store.markAnnounced(exp._id)
      expect(await store.unannounced()).toEqual([])
      expect((await store.listExperiments(org, { page: 1, limit: 5 }, 'a'.repeat(24))).total).toBe(1)
      expect((await store.listExperiments(org, { page: 1, limit: 5 }, 'b'.repeat(24))).total).toBe(0)
    })

    it('a 429 is counted on the unit; a cancelled experiment’s pending units are never recorded', async () => {
      const { org, datasetId } = await seed(2)
      const exp = await experiment(org, datasetId, 1)
      const [u1, u2] = await store.claimUnits(exp._id, 2, at(0), at(60_000), 'a')
      if (!u1 || !u2) throw new Error('no units')
      await store.releaseUnit(u1._id, 'a', at(10), true)
      await store.releaseUnit(u1._id, 'someone-else', at(10), true)
      const [again] = await store.claimUnits(exp._id, 1, at(20), at(60_000), 'a')
      expect([again?._id, again?.rateLimited]).toEqual([u1._id, 1])
      expect(await store.completeUnit(u2._id, done('x'))).toBe(true)
      await store.cancelUnits(exp._id)
      expect(await store.completeUnit(u1._id, done('late'))).toBe(false)
      expect(await store.claimUnits(exp._id, 2, at(90_000), at(99_000), 'b')).toEqual([])
      expect(await store.countUnits(exp._id)).toEqual({ done: 1, pending: 0 })
    })

    it('a dataset with a queued or running experiment is not deleted; an experiment needs its dataset', async () => {
      const { org, datasetId } = await seed(1)
      const exp = await experiment(org, datasetId, 1)
      expect(await store.deleteDataset(newId(), datasetId)).toBe('not-found')
      expect(await store.deleteDataset(org, datasetId)).toBe('in-use')
      expect(await store.getDataset(org, datasetId)).not.toBeNull()
      await store.transition(exp._id, ['running'], 'cancelled')
      expect(await store.deleteDataset(org, datasetId)).toBe('deleted')
      expect(await store.deleteDataset(org, datasetId)).toBe('not-found')
      const late = { ...exp, _id: newId() }
      expect(await store.createExperiment(late, [])).toBe(false)
      expect(await store.getExperiment(org, late._id)).toBeNull()
    })
  })
}
