import { connectMongo, newId } from '@pm/kit'
import { storeBackends } from '@pm/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import { MongoPromptStore } from '../src/store/mongo.ts'
import { SqlitePromptStore } from '../src/store/sqlite.ts'
import {
  DuplicateSlugError,
  type PromptRecord,
  type PromptStore,
  type VersionBuilder,
} from '../src/store/types.ts'

const backends = await storeBackends<PromptStore>({
  sqlite: (file) => new SqlitePromptStore(file),
  mongo: async (url, db) => {
    const store = new MongoPromptStore(await connectMongo(url), db)
    await store.init()
    return store
  },
})

const now = () => new Date().toISOString()

function prompt(organizationId: string, overrides: Partial<PromptRecord> = {}): PromptRecord {
  return {
    _id: newId(),
    organizationId,
    name: 'P',
    slug: `p-${newId()}`,
    description: '',
    tags: [],
    template: 'Hello {{name}}',
    variables: [{ name: 'name', required: true }],
    isPublic: false,
    versionCount: 0,
    currentVersionId: null,
    environments: { preview: null, production: null },
    createdBy: newId(),
    createdAt: now(),
    updatedAt: now(),
    ...overrides,
  }
}

const builder: VersionBuilder = (p, next) => {
  const id = newId()
  return {
    version: {
      _id: id,
      promptId: p._id,
      organizationId: p.organizationId,
      version: next,
      status: 'PUBLISHED',
      publishedAt: now(),
      template: p.template,
      variables: p.variables,
      createdBy: { _id: 'u'.repeat(24) },
      changeLog: `v${next}`,
    },
    outbox: {
      _id: newId(),
      subject: 's',
      msgId: id,
      payload: { version: next },
      createdAt: now(),
      sentAt: null,
    },
  }
}

for (const backend of backends) {
  describe.skipIf(!backend.available)(`PromptStore contract: ${backend.name}`, () => {
    let store: PromptStore
    const open = async () => {
      store = await backend.open()
      return store
    }
    afterEach(async () => {
      await store?.close()
    })

    it('keeps slugs unique per workspace, not across workspaces', async () => {
      const s = await open()
      const org = newId()
      await s.createPrompt(prompt(org, { slug: 'same' }))
      await expect(s.createPrompt(prompt(org, { slug: 'same' }))).rejects.toBeInstanceOf(DuplicateSlugError)
      await s.createPrompt(prompt(newId(), { slug: 'same' }))
      expect(await s.isSlugTaken(org, 'same')).toBe(true)
      expect(await s.isSlugTaken(org, 'other')).toBe(false)
    })

    it('scopes reads to the workspace', async () => {
      const s = await open()
      const p = prompt(newId())
      await s.createPrompt(p)
      expect(await s.getPrompt(p.organizationId, p._id)).toEqual(p)
      expect(await s.getPrompt(newId(), p._id)).toBeNull()
      expect(await s.getPromptById(p._id)).toEqual(p)
    })

    it('lists with search, tags, visibility and pages, and summarises', async () => {
      const s = await open()
      const org = newId()
      for (let i = 0; i < 5; i++) {
        await s.createPrompt(
          prompt(org, {
            name: `Alpha ${i}`,
            tags: i % 2 === 0 ? ['even'] : ['odd'],
            isPublic: i === 0,
            createdAt: new Date(Date.UTC(2026, 0, 1, 0, 0, i)).toISOString(),
          }),
        )
      }
      await s.createPrompt(
        prompt(org, { name: 'Beta 100%', createdAt: new Date(Date.UTC(2026, 0, 2)).toISOString() }),
      )
      const all = await s.listPrompts({ organizationId: org }, { page: 1, limit: 4 })
      expect(all.total).toBe(6)
      expect(all.prompts).toHaveLength(4)
      expect(all.prompts[0]?.name).toBe('Beta 100%')
      const page2 = await s.listPrompts({ organizationId: org }, { page: 2, limit: 4 })
      expect(page2.prompts).toHaveLength(2)
      expect(
        (await s.listPrompts({ organizationId: org, search: 'alpha' }, { page: 1, limit: 20 })).total,
      ).toBe(5)
      expect(
        (await s.listPrompts({ organizationId: org, search: '100%' }, { page: 1, limit: 20 })).total,
      ).toBe(1)
      expect((await s.listPrompts({ organizationId: org, search: '%' }, { page: 1, limit: 20 })).total).toBe(
        1,
      )
      expect(
        (await s.listPrompts({ organizationId: org, tags: ['even'] }, { page: 1, limit: 20 })).total,
      ).toBe(3)
      expect(
        (await s.listPrompts({ organizationId: org, visibility: 'public' }, { page: 1, limit: 20 })).total,
      ).toBe(1)
      expect(
        (await s.listPrompts({ organizationId: org, visibility: 'private' }, { page: 1, limit: 20 })).total,
      ).toBe(5)
      expect(await s.summary(org)).toEqual({ total: 6, public: 1, published: 0 })
    })

    it('publishes atomically: version, counter, current version and outbox event together', async () => {
      const s = await open()
      const p = prompt(newId())
      await s.createPrompt(p)
      const v1 = await s.publish(p.organizationId, p._id, builder)
      expect(v1?.version).toBe(1)
      const after = await s.getPrompt(p.organizationId, p._id)
      expect(after?.versionCount).toBe(1)
      expect(after?.currentVersionId).toBe(v1?._id)
      const pending = await s.pendingOutbox(10)
      expect(pending.map((o) => o.msgId)).toEqual([v1?._id])
      await s.markOutboxSent(pending[0]?._id ?? '', now())
      expect(await s.pendingOutbox(10)).toEqual([])
      expect(await s.publish(newId(), p._id, builder)).toBeNull()
    })

    it('gives twenty concurrent publishes the numbers 1 to 20, no gap, no duplicate, snapshots intact', async () => {
      const s = await open()
      const p = prompt(newId())
      await s.createPrompt(p)
      const results = await Promise.all(
        Array.from({ length: 20 }, () => s.publish(p.organizationId, p._id, builder)),
      )
      expect(results.map((v) => v?.version).sort((a, b) => (a ?? 0) - (b ?? 0))).toEqual(
        Array.from({ length: 20 }, (_, i) => i + 1),
      )
      const versions = await s.listVersions(p._id, 'version')
      expect(versions.map((v) => v.version)).toEqual(Array.from({ length: 20 }, (_, i) => 20 - i))
      for (const v of versions) {
        expect(v.template).toBe(p.template)
        expect(v.changeLog).toBe(`v${v.version}`)
      }
      const after = await s.getPrompt(p.organizationId, p._id)
      expect(after?.versionCount).toBe(20)
      expect(await s.getVersionByNumber(p._id, 20)).toMatchObject({ _id: after?.currentVersionId })
      expect(await s.pendingOutbox(100)).toHaveLength(20)
    })

    it('updates and deletes within the workspace only, deleting versions too', async () => {
      const s = await open()
      const p = prompt(newId())
      await s.createPrompt(p)
      await s.publish(p.organizationId, p._id, builder)
      expect(await s.updatePrompt(newId(), p._id, { name: 'X', updatedAt: now() })).toBeNull()
      const updated = await s.updatePrompt(p.organizationId, p._id, {
        name: 'X',
        tags: ['t'],
        updatedAt: now(),
      })
      expect(updated).toMatchObject({ name: 'X', tags: ['t'], versionCount: 1 })
      expect(await s.deletePrompt(newId(), p._id)).toBe(false)
      expect(await s.deletePrompt(p.organizationId, p._id)).toBe(true)
      expect(await s.getPromptById(p._id)).toBeNull()
      expect(await s.listVersions(p._id, 'version')).toEqual([])
    })

    it('sets one environment pin without touching the other', async () => {
      const s = await open()
      const p = prompt(newId())
      await s.createPrompt(p)
      const v1 = await s.publish(p.organizationId, p._id, builder)
      const pin = { versionId: v1?._id ?? '', version: 1, promotedAt: now(), promotedBy: newId() }
      await s.setPin(p.organizationId, p._id, 'production', pin, now())
      const after = await s.setPin(p.organizationId, p._id, 'preview', { ...pin, version: 1 }, now())
      expect(after?.environments).toEqual({ preview: pin, production: pin })
      expect(await s.setPin(newId(), p._id, 'preview', pin, now())).toBeNull()
    })

    it('reads versions by ids across prompts', async () => {
      const s = await open()
      const a = prompt(newId())
      const b = prompt(newId())
      await s.createPrompt(a)
      await s.createPrompt(b)
      const va = await s.publish(a.organizationId, a._id, builder)
      const vb = await s.publish(b.organizationId, b._id, builder)
      const found = await s.getVersionsByIds([va?._id ?? '', vb?._id ?? '', newId()])
      expect(found.map((v) => v._id).sort()).toEqual([va?._id, vb?._id].sort())
      expect(await s.getVersionsByIds([])).toEqual([])
    })

    it('prunes only events sent before the cut-off', async () => {
      const s = await open()
      const p = prompt(newId())
      await s.createPrompt(p)
      await s.publish(p.organizationId, p._id, builder)
      await s.publish(p.organizationId, p._id, builder)
      const [first, second] = await s.pendingOutbox(10)
      await s.markOutboxSent(first?._id ?? '', '2020-01-01T00:00:00.000Z')
      expect(await s.pruneOutbox('2021-01-01T00:00:00.000Z')).toBe(1)
      expect((await s.pendingOutbox(10)).map((o) => o._id)).toEqual([second?._id])
    })

    it('keeps import batches per workspace, with progress and appended errors', async () => {
      const s = await open()
      const org = newId()
      const batch = {
        _id: newId(),
        organizationId: org,
        createdBy: newId(),
        status: 'processing' as const,
        total: 5,
        created: 0,
        failed: 1,
        errors: [{ row: 3, message: 'name is required' }],
        createdAt: now(),
        updatedAt: now(),
        finishedAt: null,
      }
      await s.createBatch(batch)
      expect(await s.getBatch(org, batch._id)).toEqual(batch)
      expect(await s.getBatch(newId(), batch._id)).toBeNull()
      await s.updateBatch(batch._id, { created: 2, updatedAt: now() })
      await s.updateBatch(batch._id, {
        created: 3,
        failed: 2,
        appendErrors: [{ row: 6, message: 'x' }],
        status: 'completed',
        updatedAt: now(),
        finishedAt: now(),
      })
      const done = await s.getBatch(org, batch._id)
      expect(done).toMatchObject({
        status: 'completed',
        created: 3,
        failed: 2,
        errors: [
          { row: 3, message: 'name is required' },
          { row: 6, message: 'x' },
        ],
      })
      expect(done?.finishedAt).not.toBeNull()
    })
  })
}
