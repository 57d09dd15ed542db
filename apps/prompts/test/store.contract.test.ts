import { newId } from '@pm/kit'
import { connectMongo } from '@pm/kit/mongo'
import { storeBackends } from '@pm/testkit'
import { afterEach, describe, expect, it } from 'vitest'
import { MongoPromptStore } from '../src/store/mongo.ts'
import { SqlitePromptStore } from '../src/store/sqlite.ts'
import {
  DuplicateImportError,
  DuplicateSlugError,
  type ImportBatchRecord,
  LeaseLostError,
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
    type: 'text',
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
      type: p.type,
      template: p.template,
      variables: p.variables,
      ...(p.messages ? { messages: p.messages } : {}),
      ...(p.config ? { config: p.config } : {}),
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

    it('lists the slugs under a prefix, in the workspace, literally', async () => {
      const s = await open()
      const org = newId()
      for (const slug of ['dup', 'dup-2', 'dup-x', 'dupe', 'du', 'a-dup', 'd*p', 'd.p-2', 'DUP-3'])
        await s.createPrompt(prompt(org, { slug }))
      await s.createPrompt(prompt(newId(), { slug: 'dup-4' }))
      expect((await s.slugsStartingWith(org, 'dup')).sort()).toEqual(['dup', 'dup-2', 'dup-x', 'dupe'])
      // Wildcards of GLOB or of a regex in the prefix are plain characters.
      expect(await s.slugsStartingWith(org, 'd*')).toEqual(['d*p'])
      expect(await s.slugsStartingWith(org, 'd.')).toEqual(['d.p-2'])
      expect(await s.slugsStartingWith(org, 'nothing')).toEqual([])
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
      expect(await s.deletePrompt(newId(), p._id)).toBeNull()
      expect(await s.deletePrompt(p.organizationId, p._id)).toMatchObject({ _id: p._id, name: 'X' })
      expect(await s.getPromptById(p._id)).toBeNull()
      expect(await s.listVersions(p._id, 'version')).toEqual([])
    })

    it('updates only the draft the caller read when it names its updatedAt, with or without events', async () => {
      const s = await open()
      const stale = {
        _id: newId(),
        subject: 'x',
        msgId: 'stale',
        payload: {},
        createdAt: now(),
        sentAt: null,
      }
      const p = prompt(newId())
      await s.createPrompt(p)
      const read = await s.getPrompt(p.organizationId, p._id)
      if (!read) throw new Error('not created')
      const first = await s.updatePrompt(
        p.organizationId,
        p._id,
        { name: 'A', updatedAt: '2030-01-01T00:00:00.001Z' },
        undefined,
        read.updatedAt,
      )
      expect(first).toMatchObject({ name: 'A' })
      // Read before that write: refused (null), nothing written, no event.
      for (const events of [undefined, () => [stale]]) {
        expect(
          await s.updatePrompt(
            p.organizationId,
            p._id,
            { name: 'B', updatedAt: '2030-01-01T00:00:00.002Z' },
            events,
            read.updatedAt,
          ),
        ).toBeNull()
      }
      expect(await s.getPrompt(p.organizationId, p._id)).toMatchObject({
        name: 'A',
        updatedAt: '2030-01-01T00:00:00.001Z',
      })
      expect((await s.pendingOutbox(100)).filter((o) => o.msgId === 'stale')).toEqual([])
      const second = await s.updatePrompt(
        p.organizationId,
        p._id,
        { name: 'C', updatedAt: '2030-01-01T00:00:00.003Z' },
        () => [],
        '2030-01-01T00:00:00.001Z',
      )
      expect(second).toMatchObject({ name: 'C' })
    })

    it('sets one environment pin without touching the other', async () => {
      const s = await open()
      const p = prompt(newId())
      await s.createPrompt(p)
      const v1 = await s.publish(p.organizationId, p._id, builder)
      const pin = { versionId: v1?._id ?? '', version: 1, promotedAt: now(), promotedBy: newId() }
      await s.setPin(p.organizationId, p._id, 'production', () => ({ pin }))
      const after = await s.setPin(p.organizationId, p._id, 'preview', (stored) => {
        // The builder sees the pins as stored in the transaction.
        expect(stored.environments).toEqual({ preview: null, production: pin })
        return { pin: { ...pin, version: 1 } }
      })
      expect(after?.environments).toEqual({ preview: pin, production: pin })
      expect(await s.setPin(newId(), p._id, 'preview', () => ({ pin }))).toBeNull()
    })

    it('keeps a chat prompt: type, messages and config, on the prompt and its versions', async () => {
      const s = await open()
      const messages = [
        { role: 'system' as const, content: 'You are {{persona}}' },
        { type: 'placeholder' as const, name: 'history' },
      ]
      const p = prompt(newId(), { type: 'chat', messages, config: { model: 'm', temperature: 0.2 } })
      await s.createPrompt(p)
      expect(await s.getPrompt(p.organizationId, p._id)).toEqual(p)
      expect(await s.getPromptBySlug(p.organizationId, p.slug)).toEqual(p)
      expect(await s.getPromptBySlug(newId(), p.slug)).toBeNull()
      const v1 = await s.publish(p.organizationId, p._id, builder)
      expect(await s.getVersion(p._id, v1?._id ?? '')).toMatchObject({
        type: 'chat',
        messages,
        config: { model: 'm', temperature: 0.2 },
      })
      // null removes the config; other fields stay.
      const cleared = await s.updatePrompt(p.organizationId, p._id, { config: null, updatedAt: now() })
      expect(cleared).not.toHaveProperty('config')
      expect(cleared).toMatchObject({ type: 'chat', messages })
      // A text prompt has neither messages nor config unless set.
      const t = prompt(newId())
      await s.createPrompt(t)
      const read = await s.getPrompt(t.organizationId, t._id)
      expect(read?.type).toBe('text')
      expect(read).not.toHaveProperty('messages')
      expect(read).not.toHaveProperty('config')
    })

    it('writes change events with the change, in one transaction', async () => {
      const s = await open()
      const p = prompt(newId())
      await s.createPrompt(p)
      const v1 = await s.publish(p.organizationId, p._id, builder)
      for (const o of await s.pendingOutbox(10)) await s.markOutboxSent(o._id, now())
      let n = 0
      // Distinct times, so the outbox's order (oldest first) is the order of the writes.
      const row = (msgId: string) => ({
        _id: newId(),
        subject: 'x',
        msgId,
        payload: { msgId },
        createdAt: new Date(Date.UTC(2030, 0, 1, 0, 0, n++)).toISOString(),
        sentAt: null,
      })
      const pin = { versionId: v1?._id ?? '', version: 1, promotedAt: now(), promotedBy: newId() }
      await s.setPin(p.organizationId, p._id, 'production', () => ({
        pin,
        events: (after) => [row(`promoted-${after.environments.production?.version}`)],
      }))
      // The builder sees the prompt before and after: no visibility change, no event.
      await s.updatePrompt(p.organizationId, p._id, { isPublic: false, updatedAt: now() }, (before, after) =>
        before.isPublic === after.isPublic ? [] : [row('unexpected')],
      )
      await s.updatePrompt(p.organizationId, p._id, { isPublic: true, updatedAt: now() }, (before, after) =>
        before.isPublic === after.isPublic ? [] : [row(`public-${after.isPublic}`)],
      )
      // A builder that throws rolls the change back: no half-written change.
      await expect(
        s.updatePrompt(p.organizationId, p._id, { isPublic: false, updatedAt: now() }, () => {
          throw new Error('boom')
        }),
      ).rejects.toThrow('boom')
      expect((await s.getPrompt(p.organizationId, p._id))?.isPublic).toBe(true)
      await s.deletePrompt(p.organizationId, p._id, (deleted) => row(`deleted-${deleted.slug}`))
      expect((await s.pendingOutbox(10)).map((o) => o.msgId)).toEqual([
        'promoted-1',
        'public-true',
        `deleted-${p.slug}`,
      ])
      expect(await s.deletePrompt(p.organizationId, p._id, () => row('again'))).toBeNull()
      expect(await s.pendingOutbox(10)).toHaveLength(3)
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

    it('counts the unsent events and dates the oldest (metrics)', async () => {
      const s = await open()
      expect(await s.outboxBacklog()).toEqual({ count: 0, oldestCreatedAt: null })
      const p = prompt(newId())
      await s.createPrompt(p)
      await s.publish(p.organizationId, p._id, builder)
      await s.publish(p.organizationId, p._id, builder)
      const [first, second] = await s.pendingOutbox(10)
      expect(await s.outboxBacklog()).toEqual({ count: 2, oldestCreatedAt: first?.createdAt })
      await s.markOutboxSent(first?._id ?? '', now())
      expect(await s.outboxBacklog()).toEqual({ count: 1, oldestCreatedAt: second?.createdAt })
    })

    function batch(organizationId: string, overrides: Partial<ImportBatchRecord> = {}): ImportBatchRecord {
      return {
        _id: newId(),
        organizationId,
        createdBy: newId(),
        status: 'processing',
        total: 5,
        created: 0,
        failed: 1,
        errors: [{ row: 3, message: 'name is required' }],
        createdAt: now(),
        updatedAt: now(),
        finishedAt: null,
        resumedAt: null,
        position: 0,
        contentHash: newId(),
        idempotencyKey: null,
        leaseOwner: 'owner-a',
        leaseUntil: new Date(Date.now() + 60_000).toISOString(),
        ...overrides,
      }
    }
    const step = (b: ImportBatchRecord, from: number, to: number, owner = 'owner-a') => ({
      batchId: b._id,
      owner,
      from,
      to,
      at: now(),
    })

    it('keeps import batches per workspace, with their file until they end', async () => {
      const s = await open()
      const org = newId()
      const b = batch(org)
      const file = Buffer.from('name,template\nA,a\n\u00e9,\u00e9\n')
      await s.createBatch(b, file)
      expect(await s.getBatch(org, b._id)).toEqual(b)
      expect(await s.getBatch(newId(), b._id)).toBeNull()
      expect(await s.getImportFile(b._id)).toEqual(file)
      await s.finishBatch(b._id, 'owner-a', 'completed', now())
      expect(await s.getImportFile(b._id)).toBeNull()
      expect(await s.getBatch(org, b._id)).toMatchObject({ status: 'completed', leaseOwner: null })
      // Ended: nobody holds it any more.
      await expect(s.finishBatch(b._id, 'owner-a', 'completed', now())).rejects.toBeInstanceOf(LeaseLostError)
    })

    it('writes a run of imported rows and their counts together, fenced by owner and position', async () => {
      const s = await open()
      const org = newId()
      const b = batch(org)
      await s.createBatch(b, Buffer.from('x'))
      const p1 = prompt(org, { slug: 'one' })
      await s.importRows(step(b, 0, 1), [p1], [])
      // A writer that lost the batch, or is behind its position, writes nothing.
      await expect(s.importRows(step(b, 1, 2, 'owner-b'), [prompt(org)], [])).rejects.toBeInstanceOf(
        LeaseLostError,
      )
      await expect(s.importRows(step(b, 0, 2), [prompt(org, { slug: 'stale' })], [])).rejects.toBeInstanceOf(
        LeaseLostError,
      )
      expect(await s.isSlugTaken(org, 'stale')).toBe(false)
      // A taken slug anywhere in the run writes none of it, and leaves the counts where they were.
      const run = [prompt(org, { slug: 'two' }), prompt(org, { slug: 'one' })]
      await expect(s.importRows(step(b, 1, 3), run, [{ row: 9, message: 'x' }])).rejects.toBeInstanceOf(
        DuplicateSlugError,
      )
      expect(await s.isSlugTaken(org, 'two')).toBe(false)
      expect(await s.getBatch(org, b._id)).toMatchObject({ created: 1, failed: 1, position: 1 })
      // Row 3 was refused at upload: the next run goes from 1 to 5 (two rows and an error).
      const two = prompt(org, { slug: 'two' })
      const four = prompt(org, { slug: 'four' })
      await s.importRows(step(b, 1, 5), [two, four], [{ row: 5, message: 'could not be saved' }])
      expect(await s.getBatch(org, b._id)).toMatchObject({
        created: 3,
        failed: 2,
        position: 5,
        errors: [
          { row: 3, message: 'name is required' },
          { row: 5, message: 'could not be saved' },
        ],
      })
      for (const p of [p1, two, four]) expect(await s.getPrompt(org, p._id)).toEqual(p)
    })

    it('lets one claimer at a time take a batch whose lease is free or ran out', async () => {
      const s = await open()
      const org = newId()
      const past = new Date(Date.now() - 1000).toISOString()
      const held = batch(org, { leaseOwner: 'alive' })
      const dead = batch(org, { leaseOwner: 'dead', leaseUntil: past, position: 2, created: 1 })
      const done = batch(org, { status: 'completed', leaseOwner: null, leaseUntil: null })
      for (const b of [held, dead, done]) await s.createBatch(b, null)
      const at = now()
      const until = new Date(Date.now() + 5000).toISOString()
      const claims = await Promise.all([s.claimBatch('x', at, until), s.claimBatch('y', at, until)])
      const won = claims.filter((c) => c !== null)
      expect(won).toHaveLength(1)
      expect(won[0]).toMatchObject({
        _id: dead._id,
        position: 2,
        created: 1,
        resumedAt: at,
        leaseUntil: until,
      })
      expect(await s.claimBatch('z', now(), until)).toBeNull()
      const owner = won[0]?.leaseOwner ?? ''
      // The dead writer can no longer write; the new owner renews, then releases it.
      await expect(s.importRows(step(dead, 2, 3, 'dead'), [prompt(org)], [])).rejects.toBeInstanceOf(
        LeaseLostError,
      )
      expect(await s.renewLease(dead._id, 'dead', until)).toBe(false)
      expect(await s.renewLease(dead._id, owner, until)).toBe(true)
      await s.releaseLease(dead._id, owner)
      expect(await s.claimBatch('z', now(), until)).toMatchObject({ _id: dead._id, leaseOwner: 'z' })
    })

    it('keeps one batch per file per workspace and per Idempotency-Key per user, until forgotten', async () => {
      const s = await open()
      const org = newId()
      const user = newId()
      const first = batch(org, { createdBy: user, contentHash: 'h1', idempotencyKey: 'k1' })
      await s.createBatch(first, null)
      await expect(s.createBatch(batch(org, { contentHash: 'h1' }), null)).rejects.toBeInstanceOf(
        DuplicateImportError,
      )
      await expect(
        s.createBatch(batch(org, { createdBy: user, contentHash: 'h2', idempotencyKey: 'k1' }), null),
      ).rejects.toBeInstanceOf(DuplicateImportError)
      // Another workspace, or another user's key, is another batch; no hash or key is no constraint.
      await s.createBatch(batch(newId(), { contentHash: 'h1' }), null)
      await s.createBatch(batch(org, { contentHash: 'h3', idempotencyKey: 'k1' }), null)
      await s.createBatch(batch(org, { contentHash: null }), null)
      await s.createBatch(batch(org, { contentHash: null }), null)
      expect((await s.findBatchByHash(org, 'h1'))?._id).toBe(first._id)
      expect((await s.findBatchByKey(org, user, 'k1'))?._id).toBe(first._id)
      expect(await s.findBatchByKey(org, newId(), 'k1')).toBeNull()
      await s.forgetBatchKeys(first._id)
      expect(await s.findBatchByHash(org, 'h1')).toBeNull()
      await s.createBatch(batch(org, { createdBy: user, contentHash: 'h1', idempotencyKey: 'k1' }), null)
    })
  })
}
