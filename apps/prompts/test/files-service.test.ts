import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import type { CallerContext, ExportManifest } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { readArchive, writeArchive } from '../src/domain/archive.ts'
import { PromptFiles, type Upload } from '../src/services/files.ts'
import { StaticOrgSettings } from '../src/services/orgSettings.ts'
import { PromptsService } from '../src/services/prompts.ts'
import { SqlitePromptStore } from '../src/store/sqlite.ts'

/** Prompts as code at the service layer (DESIGN section 16), on a SQLite store. */
let dir: string
let store: SqlitePromptStore
let bus: MemoryBus
let service: PromptsService
let files: PromptFiles
const orgSettings = new StaticOrgSettings()
const user = newId()

beforeAll(() => {
  dir = mkdtempSync(join(tmpdir(), 'pm-files-'))
  store = new SqlitePromptStore(join(dir, 'prompts.db'))
  bus = new MemoryBus(10)
  service = new PromptsService(store, bus, () => {}, orgSettings)
  files = new PromptFiles(service, store, orgSettings)
})
afterAll(async () => {
  await bus.close()
  await store.close()
  rmSync(dir, { recursive: true, force: true })
})

function caller(org: string, role: 'OWNER' | 'ADMIN' | 'MEMBER'): CallerContext {
  return {
    kind: 'user',
    userId: user,
    organizationId: org,
    role,
    scopes: ['prompts:read', 'prompts:write'],
    requestId: newId(),
  }
}

function run(org: string, uploads: Upload[], opts: { dryRun?: boolean; role?: 'ADMIN' | 'MEMBER' } = {}) {
  return files.importFiles(org, { _id: user }, uploads, {
    dryRun: opts.dryRun ?? false,
    publish: false,
    expect: {},
    caller: caller(org, opts.role ?? 'ADMIN'),
  })
}

const langfuse = (entries: unknown[]): Upload => ({
  name: 'langfuse.json',
  bytes: Buffer.from(JSON.stringify(entries)),
})

async function toBuffer(stream: NodeJS.ReadableStream): Promise<Buffer> {
  const chunks: Buffer[] = []
  for await (const chunk of stream) chunks.push(Buffer.from(chunk as Buffer))
  return Buffer.concat(chunks)
}

describe('import with Langfuse labels and protected environments', () => {
  const entries = [
    { name: 'first', type: 'text', prompt: 'One {{a}}', labels: ['staging'] },
    { name: 'second', type: 'text', prompt: 'Two {{b}}', labels: ['production'] },
    { name: 'third', type: 'text', prompt: 'Three' },
  ]

  it('a pin the caller may not make is an error item of the plan; dry run and run agree, nothing of it written', async () => {
    const org = newId()
    orgSettings.set(org, ['production'])
    const dry = await run(org, [langfuse(entries)], { dryRun: true, role: 'MEMBER' })
    expect(dry.items.map((i) => i.action)).toEqual(['create', 'error', 'create'])
    expect(dry.items[1]?.message).toMatch(/production is a protected environment/)

    const real = await run(org, [langfuse(entries)], { role: 'MEMBER' })
    expect(real.items.map((i) => i.action)).toEqual(['create', 'error', 'create'])
    expect(real.items[1]?.message).toBe(dry.items[1]?.message)
    expect(real.summary).toEqual({ create: 2, update: 0, unchanged: 0, error: 1 })
    expect(await store.getPromptBySlug(org, 'second')).toBeNull()
    const first = await store.getPromptBySlug(org, 'first')
    expect(first?.environments.preview?.version).toBe(1)
    expect(await store.getPromptBySlug(org, 'third')).not.toBeNull()
  })

  it('a promote refused after the plan is an error item, not a failed request', async () => {
    // The plan sees no protection; one switched on before the promote is reported on the item.
    const other = newId()
    const step = { name: 'late', type: 'text', prompt: 'Late', labels: ['production'] }
    let asked = 0
    const flipping = new StaticOrgSettings()
    flipping.protectedEnvironments = async () => (asked++ === 0 ? [] : ['production'])
    const late = new PromptFiles(new PromptsService(store, bus, () => {}, flipping), store, flipping)
    const result = await late.importFiles(other, { _id: user }, [langfuse([step])], {
      dryRun: false,
      publish: false,
      expect: {},
      caller: caller(other, 'MEMBER'),
    })
    expect(result.items[0]).toMatchObject({ action: 'error', publishedVersion: 1 })
    expect(result.items[0]?.message).toMatch(
      /^saved, but not pinned to production: production is a protected/,
    )
  })

  it('a re-import of an unchanged prompt makes the pins it lacks, publishing the draft only when needed', async () => {
    const org = newId()
    orgSettings.set(org, ['production'])
    // Created by hand, published, nothing pinned: the same content with a label pins v1.
    const created = await service.create(org, user, { name: 'second', slug: 'second', template: 'Two {{b}}' })
    await service.publish(org, created._id, { _id: user }, 'v1')
    const member = await run(org, [langfuse([entries[1]])], { dryRun: true, role: 'MEMBER' })
    expect(member.items[0]).toMatchObject({ action: 'error' })
    expect(member.items[0]?.message).toMatch(/protected environment/)

    const dry = await run(org, [langfuse([entries[1]])], { dryRun: true })
    expect(dry.items[0]).toMatchObject({ action: 'unchanged', pinned: ['production'] })
    const real = await run(org, [langfuse([entries[1]])])
    expect(real.items[0]).toMatchObject({ action: 'unchanged', pinned: ['production'] })
    expect(real.items[0]?.publishedVersion).toBeUndefined()
    let after = await store.getPromptBySlug(org, 'second')
    expect(after?.environments.production?.version).toBe(1)
    expect(after?.versionCount).toBe(1)

    // Pinned already: plain unchanged, and a member may re-import it.
    const again = await run(org, [langfuse([entries[1]])], { role: 'MEMBER' })
    expect(again.items[0]).toEqual(expect.objectContaining({ action: 'unchanged' }))
    expect(again.items[0]?.pinned).toBeUndefined()

    // A draft saved since its last publish (then saved back): no version holds it, so it is published.
    await service.update(org, created._id, { template: 'Two {{b}}!' })
    await service.publish(org, created._id, { _id: user }, 'v2')
    await service.update(org, created._id, { template: 'Two {{b}}' })
    const republish = await run(org, [langfuse([entries[1]])])
    expect(republish.items[0]).toMatchObject({
      action: 'unchanged',
      pinned: ['production'],
      publishedVersion: 3,
    })
    after = await store.getPromptBySlug(org, 'second')
    expect(after?.environments.production?.version).toBe(3)
  })
})

describe('workspace export and import', () => {
  it('keeps a prompt slugged "manifest" in a JSON export, and reads it back', async () => {
    const org = newId()
    for (const slug of ['manifest', 'other'])
      await service.create(org, user, { name: slug, slug, template: `I am ${slug} {{x}}` })
    const archive = await toBuffer(files.exportWorkspace(org, 'json', undefined))
    const entries = await readArchive(archive)
    const names = entries.map((e) => e.name).sort()
    expect(names).toEqual(['manifest.json', 'manifest.prompt.json', 'other.json'])
    const manifest = JSON.parse(
      entries.find((e) => e.name === 'manifest.json')?.bytes.toString() ?? '{}',
    ) as ExportManifest
    expect(manifest.prompts.map((p) => [p.slug, p.file]).sort()).toEqual([
      ['manifest', 'manifest.prompt.json'],
      ['other', 'other.json'],
    ])

    const empty = newId()
    const plan = await run(empty, [{ name: 'export.tar.gz', bytes: archive }])
    expect(plan.items.map((i) => [i.slug, i.action]).sort()).toEqual([
      ['manifest', 'create'],
      ['other', 'create'],
    ])
    expect((await store.getPromptBySlug(empty, 'manifest'))?.template).toBe('I am manifest {{x}}')
  })

  it('reads archives written before: manifest.json is skipped when it is the manifest, read when it is a prompt', async () => {
    const org = newId()
    const manifest: ExportManifest = {
      format: 'json',
      exportedAt: new Date().toISOString(),
      organizationId: org,
      env: null,
      prompts: [],
    }
    const prompt = { slug: 'manifest', name: 'Manifest', type: 'text', template: 'Old {{y}}', variables: [] }
    async function* old() {
      yield { name: 'manifest.json', text: JSON.stringify(prompt) }
      yield { name: 'manifest.json', text: JSON.stringify(manifest) }
    }
    const archive = await toBuffer(writeArchive(old()))
    const plan = await run(org, [{ name: 'old.tar.gz', bytes: archive }], { dryRun: true })
    expect(plan.items).toEqual([
      expect.objectContaining({ file: 'old.tar.gz/manifest.json', slug: 'manifest', action: 'create' }),
    ])
  })
})

describe('push with the revisions pulled (expect): a save made after the check is not overwritten', () => {
  /** Pulls a prompt, then pushes its file with a new template, `between` landing in the store call named. */
  async function pushWith(method: 'getPrompt' | 'updatePrompt') {
    const org = newId()
    const created = await service.create(org, user, {
      name: 'pushed',
      slug: 'pushed',
      template: 'Hello {{name}}',
    })
    const pulled = await files.exportOne(org, created._id, {})
    const original = store[method].bind(store) as (...args: unknown[]) => Promise<unknown>
    let pending = true
    // getPrompt: before the push's write reads the draft (after its plan checked the revision);
    // updatePrompt: between that read and the write.
    const between = async (...args: unknown[]) => {
      if (pending) {
        pending = false
        await service.update(org, created._id, { description: 'saved meanwhile' })
      }
      return original(...args)
    }
    const spy = vi.spyOn(store, method).mockImplementation(between as never)
    const plan = await files.importFiles(
      org,
      { _id: user },
      [{ name: pulled.filename, bytes: Buffer.from(pulled.text.replace('Hello', 'Hi')) }],
      { dryRun: false, publish: false, expect: { pushed: pulled.revision }, caller: caller(org, 'ADMIN') },
    )
    spy.mockRestore()
    return { plan, after: await service.get(org, created._id) }
  }

  for (const method of ['getPrompt', 'updatePrompt'] as const) {
    it(`refuses the file when the save lands ${method === 'getPrompt' ? 'before the write reads the draft' : 'between that read and the write'}`, async () => {
      const { plan, after } = await pushWith(method)
      expect(plan.items[0]).toMatchObject({ slug: 'pushed', action: 'error' })
      expect(plan.items[0]?.message).toMatch(/changed on the server since it was pulled/)
      expect(after).toMatchObject({ description: 'saved meanwhile', template: 'Hello {{name}}' })
    })
  }
})
