import { readFileSync } from 'node:fs'
import { gunzipSync, gzipSync } from 'node:zlib'
import type { ImportPlan, Prompt, PromptVersion } from '@pm/contracts'
import { extract, pack } from 'tar-stream'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call, type Reply } from '../src/client.ts'
import { type InProcess, startInProcess, type Tenant } from '../src/inProcess.ts'

/**
 * Prompts as code through the gateway (DESIGN section 16, issue 30): export of one prompt in
 * each format and of a workspace as a tar.gz, import of files with a plan, publish, Langfuse
 * arrays, and bad files (errors of the plan, nothing written).
 */

type Upload = { name: string; content: string | Uint8Array }
const FIXTURES = new URL('../../apps/prompts/test/fixtures/', import.meta.url)

const CHAT = {
  name: 'Support bot',
  slug: 'support-bot',
  description: 'Answers support questions',
  tags: ['support', 'chat'],
  type: 'chat',
  messages: [
    { role: 'system', content: 'You are {{persona}}.\n{{#if vip}}Be extra kind.{{/if}}' },
    { type: 'placeholder', name: 'history' },
    { type: 'placeholder', name: 'examples' },
    { role: 'user', content: '{{question}}' },
  ],
  variables: [
    { name: 'persona', required: false, description: 'who answers', defaultValue: 'a librarian' },
    { name: 'history', required: true, description: 'the chat so far' },
  ],
  config: { model: 'gpt-4o-mini', temperature: 0.2, response_format: { type: 'json_object' } },
}
const TEXT = {
  name: 'Summary',
  description: 'Summarizes a text',
  tags: ['writing'],
  template: 'Summarize {{ text }} in {{words}} words.\n{{#each points}}- {{this}}\n{{/each}}',
  variables: [{ name: 'words', required: false, defaultValue: '50' }],
}
const TEXT_WITH_CONFIG = {
  name: 'Classifier',
  template: 'Classify: {{input}}',
  config: { model: 'claude-3-haiku', max_tokens: 10, stop: ['\n'] },
}

/** The fields a round trip keeps. */
const content = (p: Prompt) => ({
  slug: p.slug,
  name: p.name,
  description: p.description,
  tags: p.tags,
  type: p.type,
  template: p.template,
  messages: p.messages,
  variables: p.variables,
  config: p.config,
})

async function tarGz(
  entries: { name: string; content?: string; type?: 'symlink' | 'link'; linkname?: string }[],
) {
  const archive = pack()
  for (const e of entries) {
    if (e.type) archive.entry({ name: e.name, type: e.type, linkname: e.linkname ?? 'x' })
    else archive.entry({ name: e.name }, e.content ?? '')
  }
  archive.finalize()
  const chunks: Buffer[] = []
  for await (const chunk of archive) chunks.push(chunk as Buffer)
  return gzipSync(Buffer.concat(chunks))
}

async function untar(bytes: Uint8Array): Promise<Map<string, string>> {
  const out = new Map<string, string>()
  const ex = extract()
  const done = (async () => {
    for await (const entry of ex) {
      const chunks: Buffer[] = []
      for await (const c of entry) chunks.push(c as Buffer)
      out.set(entry.header.name, Buffer.concat(chunks).toString('utf8'))
    }
  })()
  ex.end(gunzipSync(bytes))
  await done
  return out
}

describe('prompt files through the gateway', () => {
  let server: InProcess
  let owner: Tenant

  const as = (t: Tenant) => ({
    call: <T = unknown>(method: string, path: string, body?: unknown) =>
      call<T>(server.base, method, path, { token: t.accessToken, body }),
  })
  const data = <T>(r: Reply<unknown>, status = 200): T => {
    if (r.status !== status) throw new Error(`expected ${status}, got ${r.status}: ${JSON.stringify(r.body)}`)
    return (r.body as { data: T }).data
  }
  const create = async (t: Tenant, body: Record<string, unknown>) =>
    data<Prompt>(await as(t).call('POST', '/api/v1/prompts', body), 201)
  const raw = async (t: Tenant | string, path: string) => {
    const token = typeof t === 'string' ? t : t.accessToken
    const res = await fetch(`${server.base}${path}`, { headers: { authorization: `Bearer ${token}` } })
    return { status: res.status, headers: res.headers, bytes: new Uint8Array(await res.arrayBuffer()) }
  }
  const exportText = async (t: Tenant, id: string, query: string) => {
    const res = await raw(t, `/api/v1/prompts/${id}/export?${query}`)
    expect(res.status, Buffer.from(res.bytes).toString()).toBe(200)
    return { text: Buffer.from(res.bytes).toString('utf8'), headers: res.headers }
  }
  const importFiles = async (
    t: Tenant | string,
    files: Upload[],
    query = '',
    fields: Record<string, string> = {},
  ): Promise<Reply<unknown>> => {
    const form = new FormData()
    for (const f of files) form.append('file', new Blob([f.content]), f.name)
    for (const [k, v] of Object.entries(fields)) form.append(k, v)
    const token = typeof t === 'string' ? t : t.accessToken
    const res = await fetch(`${server.base}/api/v1/prompts/import-files${query}`, {
      method: 'POST',
      headers: { authorization: `Bearer ${token}` },
      body: form,
    })
    const text = await res.text()
    return { status: res.status, body: text ? JSON.parse(text) : null, headers: res.headers }
  }
  const plan = async (t: Tenant, files: Upload[], query = '', fields: Record<string, string> = {}) =>
    data<ImportPlan>(await importFiles(t, files, query, fields))
  const all = async (t: Tenant) =>
    data<{ prompts: Prompt[] }>(await as(t).call('GET', '/api/v1/prompts?limit=100')).prompts
  const bySlug = async (t: Tenant, slug: string) =>
    data<Prompt>(await as(t).call('GET', `/api/v1/prompts/slug/${slug}`))

  let originals: Prompt[]

  beforeAll(async () => {
    server = await startInProcess()
    owner = await server.signUp('files-owner')
    originals = [await create(owner, CHAT), await create(owner, TEXT), await create(owner, TEXT_WITH_CONFIG)]
  }, 120_000)

  afterAll(async () => {
    await server?.close()
  })

  for (const [format, ext] of [
    ['dotprompt', '.prompt'],
    ['prompty', '.prompty'],
    ['json', '.json'],
  ] as const) {
    it(`round trip: every kind exported as ${format} and imported into an empty workspace compares equal`, async () => {
      const files: Upload[] = []
      for (const p of originals) {
        const { text, headers } = await exportText(owner, p._id, `format=${format}`)
        expect(headers.get('content-disposition')).toBe(`attachment; filename="${p.slug}${ext}"`)
        files.push({ name: `${p.slug}${ext}`, content: text })
      }
      const empty = await server.signUp(`files-${format}`)
      const dry = await plan(empty, files, '?dryRun=true')
      expect(dry.items.map((i) => [i.slug, i.action])).toEqual(originals.map((p) => [p.slug, 'create']))
      expect(await all(empty)).toEqual([])
      const done = await plan(empty, files)
      expect(done.summary).toEqual({ create: 3, update: 0, unchanged: 0, error: 0 })
      for (const p of originals) expect(content(await bySlug(empty, p.slug))).toEqual(content(p))
      // The same files again change nothing.
      const again = await plan(empty, files)
      expect(again.summary).toEqual({ create: 0, update: 0, unchanged: 3, error: 0 })
    })
  }

  it('exports the shapes section 16 fixes, and published versions by number or environment', async () => {
    const chat = originals[0] as Prompt
    const { text } = await exportText(owner, chat._id, 'format=dotprompt')
    expect(text).toMatch(/^---\nmodel: gpt-4o-mini\nconfig:\n {2}temperature: 0.2\n/)
    expect(text).toContain('persona?: string, who answers')
    expect(text).toContain('{{role "system"}}\nYou are {{persona}}.')
    expect(text).toContain('\n{{history}}\n{{! placeholder examples }}\n{{role "user"}}\n{{question}}\n')
    const prompty = (await exportText(owner, chat._id, 'format=prompty')).text
    expect(prompty).toContain('  configuration:\n    name: gpt-4o-mini\n')
    expect(prompty).toContain('system:\nYou are {{persona}}.')
    const json = await exportText(owner, chat._id, 'format=json')
    expect(json.headers.get('content-type')).toContain('application/vnd.pm.prompt+json')
    expect(JSON.parse(json.text)).toMatchObject({ slug: 'support-bot', messages: CHAT.messages })

    const v1 = data<PromptVersion>(
      await as(owner).call('POST', `/api/v1/prompts/${chat._id}/publish`, {}),
      201,
    )
    data(
      await as(owner).call('POST', `/api/v1/prompts/${chat._id}/environments/production/promote`, {
        versionId: v1._id,
      }),
    )
    const pinned = (await exportText(owner, chat._id, 'env=production')).text
    expect(pinned).toContain(`version: 1\n    versionId: ${v1._id}`)
    expect((await exportText(owner, chat._id, 'version=1')).text).toBe(pinned)
    const missing = await raw(owner, `/api/v1/prompts/${chat._id}/export?version=9`)
    expect(missing.status).toBe(404)
    expect(JSON.parse(Buffer.from(missing.bytes).toString()).error.code).toBe('VERSION_NOT_FOUND')
    const unset = await raw(owner, `/api/v1/prompts/${chat._id}/export?env=preview`)
    expect(unset.status).toBe(404)
    const bad = await raw(owner, `/api/v1/prompts/${chat._id}/export?format=yaml`)
    expect(bad.status).toBe(400)
  })

  it('imports Dotprompt and Prompty files written by hand', async () => {
    const t = await server.signUp('files-fixtures')
    const files = ['recipe.prompt', 'weather.prompty'].map((name) => ({
      name,
      content: readFileSync(new URL(name, FIXTURES)),
    }))
    expect((await plan(t, files)).summary).toMatchObject({ create: 2, error: 0 })
    const recipe = await bySlug(t, 'recipe')
    expect(recipe.type).toBe('chat')
    expect(recipe.variables).toEqual([
      { name: 'food', required: true, description: 'the dish to cook' },
      { name: 'cuisine', required: false, defaultValue: 'Italian' },
      { name: 'servings', required: false, description: 'how many people' },
    ])
    expect(recipe.config).toMatchObject({
      model: 'googleai/gemini-1.5-flash',
      temperature: 0.9,
      output: { format: 'json' },
    })
    const weather = await bySlug(t, 'weather')
    expect(weather.name).toBe('Weather Report')
    expect(weather.variables).toEqual([
      { name: 'city', required: true, description: 'the city' },
      { name: 'units', required: false, defaultValue: 'metric' },
    ])
    expect(weather.config).toEqual({ max_tokens: 300, temperature: 0.3, model: 'gpt-4o' })
  })

  it('publish=true publishes exactly the changed drafts with a change log', async () => {
    const t = await server.signUp('files-publish')
    const first = [
      { name: 'a.prompt', content: '---\nmetadata:\n  prompt:\n    name: A\n---\nHello {{who}}' },
      { name: 'b.prompt', content: '---\nmetadata:\n  prompt:\n    name: B\n---\nBye' },
    ]
    const created = await plan(t, first, '?publish=true')
    expect(created.items.map((i) => [i.slug, i.action, i.publishedVersion])).toEqual([
      ['a', 'create', 1],
      ['b', 'create', 1],
    ])
    const edited = [
      { ...first[0], content: `${first[0]?.content} and welcome` } as Upload,
      first[1] as Upload,
    ]
    const dry = await plan(t, edited, '?dryRun=true&publish=true')
    expect(dry.items.map((i) => [i.slug, i.action, i.changes])).toEqual([
      ['a', 'update', ['template']],
      ['b', 'unchanged', undefined],
    ])
    const applied = await plan(t, edited, '?publish=true')
    expect(applied.items.map((i) => [i.slug, i.action, i.publishedVersion])).toEqual([
      ['a', 'update', 2],
      ['b', 'unchanged', undefined],
    ])
    const a = await bySlug(t, 'a')
    const versions = data<{ versions: PromptVersion[] }>(
      await as(t).call('GET', `/api/v1/prompts/${a._id}/versions`),
    )
    expect(versions.versions.map((v) => [v.version, v.changeLog])).toEqual([
      [2, 'Imported from a.prompt'],
      [1, 'Imported from a.prompt'],
    ])
    expect((await bySlug(t, 'b')).versionCount).toBe(1)
  })

  it('exports a workspace as a tar.gz that imports into an empty workspace', async () => {
    const res = await raw(owner, `/api/v1/organizations/${owner.organizationId}/export?format=prompty`)
    expect(res.status).toBe(200)
    expect(res.headers.get('content-type')).toBe('application/gzip')
    const files = await untar(res.bytes)
    expect([...files.keys()].sort()).toEqual([
      'classifier.prompty',
      'manifest.json',
      'summary.prompty',
      'support-bot.prompty',
    ])
    const manifest = JSON.parse(files.get('manifest.json') ?? '{}')
    expect(manifest).toMatchObject({ format: 'prompty', organizationId: owner.organizationId })
    expect(manifest.prompts).toHaveLength(3)
    const empty = await server.signUp('files-archive')
    expect((await plan(empty, [{ name: 'prompts.tar.gz', content: res.bytes }])).summary).toMatchObject({
      create: 3,
      error: 0,
    })
    for (const p of originals) expect(content(await bySlug(empty, p.slug))).toEqual(content(p))
    // Only pinned prompts with env; another workspace's export is refused.
    const pinned = await untar(
      (await raw(owner, `/api/v1/organizations/${owner.organizationId}/export?env=production`)).bytes,
    )
    expect([...pinned.keys()].sort()).toEqual(['manifest.json', 'support-bot.prompt'])
    const other = await raw(owner, `/api/v1/organizations/${empty.organizationId}/export`)
    expect([403, 404]).toContain(other.status)
  })

  it('imports a Langfuse prompt array, mapping production and staging labels to pins', async () => {
    const t = await server.signUp('files-langfuse')
    const langfuse = [
      {
        name: 'movie-critic',
        type: 'text',
        prompt: 'As a {{criticLevel}} critic, rate {{movie}}.',
        config: { model: 'gpt-4o', temperature: 0.7 },
        labels: ['production', 'latest'],
        tags: ['movies'],
      },
      {
        name: 'support/chat',
        type: 'chat',
        prompt: [
          { role: 'system', content: 'You help with {{product}}.' },
          { type: 'placeholder', name: 'history' },
        ],
        config: {},
        labels: ['staging'],
        tags: [],
      },
      { name: 'draft-only', type: 'text', prompt: 'Just a draft', config: null, labels: [], tags: [] },
    ]
    const result = await plan(t, [{ name: 'langfuse.json', content: JSON.stringify(langfuse) }])
    expect(result.items.map((i) => [i.file, i.slug, i.action, i.publishedVersion, i.pinned])).toEqual([
      ['langfuse.json[0]', 'movie-critic', 'create', 1, ['production']],
      ['langfuse.json[1]', 'support-chat', 'create', 1, ['preview']],
      ['langfuse.json[2]', 'draft-only', 'create', undefined, undefined],
    ])
    const critic = await bySlug(t, 'movie-critic')
    expect(critic).toMatchObject({
      name: 'movie-critic',
      tags: ['movies'],
      config: { model: 'gpt-4o', temperature: 0.7 },
    })
    expect(critic.variables.map((v) => v.name)).toEqual(['criticLevel', 'movie'])
    const envs = data<{ production: { version: number } | null; preview: unknown }>(
      await as(t).call('GET', `/api/v1/prompts/${critic._id}/environments`),
    )
    expect(envs.production?.version).toBe(1)
    expect(envs.preview).toBeNull()
    const chat = await bySlug(t, 'support-chat')
    expect(chat.messages).toEqual(langfuse[1]?.prompt)
    const chatEnvs = data<{ production: unknown; preview: { version: number } | null }>(
      await as(t).call('GET', `/api/v1/prompts/${chat._id}/environments`),
    )
    expect(chatEnvs.preview?.version).toBe(1)
    expect(chatEnvs.production).toBeNull()
    expect((await bySlug(t, 'draft-only')).versionCount).toBe(0)
  })

  it('bad files are errors of the plan and write nothing; the rest of the upload goes on', async () => {
    const t = await server.signUp('files-bad')
    const result = await plan(t, [
      { name: 'not-yaml.prompt', content: '---\nmodel: [unclosed\n---\nHi' },
      { name: 'list.prompt', content: '---\n- a\n- b\n---\nHi' },
      { name: 'huge.prompt', content: `---\n---\n${'x'.repeat(2 * 1024 * 1024)}` },
      { name: 'control.prompty', content: '---\nname: x\n---\nuser:\nhi\u0007there' },
      { name: 'big-number.json', content: '{"name":"n","template":"x","config":{"n":1e999}}' },
      { name: 'dup-1.prompt', content: '---\nmetadata:\n  prompt:\n    slug: same\n---\none' },
      { name: 'dup-2.prompty', content: '---\nmetadata:\n  slug: same\n---\ntwo' },
      {
        name: 'escape.tar.gz',
        content: await tarGz([
          { name: 'ok.prompt', content: 'fine' },
          { name: '../x.prompt', content: 'evil' },
        ]),
      },
      {
        name: 'symlink.tar.gz',
        content: await tarGz([
          { name: 'ok.prompt', content: 'fine' },
          { name: 'link.prompt', type: 'symlink', linkname: '/etc/passwd' },
        ]),
      },
      {
        name: 'hardlink.tar.gz',
        content: await tarGz([
          { name: 'ok.prompt', content: 'fine' },
          { name: 'hard.prompt', type: 'link', linkname: 'ok.prompt' },
        ]),
      },
      { name: 'not-gzip.tar.gz', content: 'plain text' },
      { name: 'good.prompt', content: 'Still imported: {{x}}' },
    ])
    const byFile = Object.fromEntries(result.items.map((i) => [i.file, [i.action, i.message ?? '']]))
    expect(byFile['not-yaml.prompt']?.[1]).toMatch(/not valid YAML/)
    expect(byFile['list.prompt']?.[1]).toMatch(/front matter is not an object/)
    expect(byFile['huge.prompt']?.[1]).toMatch(/larger than 1048576 bytes/)
    expect(byFile['control.prompty']?.[1]).toMatch(/control character/)
    expect(byFile['big-number.json']?.[1]).toMatch(/too large/)
    expect(byFile['dup-1.prompt']?.[1]).toMatch(/more than one file/)
    expect(byFile['dup-2.prompty']?.[1]).toMatch(/more than one file/)
    expect(byFile['escape.tar.gz']?.[1]).toMatch(/path leaving the archive/)
    expect(byFile['symlink.tar.gz']?.[1]).toMatch(/symlink entry/)
    expect(byFile['hardlink.tar.gz']?.[1]).toMatch(/link entry/)
    expect(byFile['not-gzip.tar.gz']?.[1]).toMatch(/not a gzip archive/)
    expect(byFile['good.prompt']?.[0]).toBe('create')
    expect(result.summary).toEqual({ create: 1, update: 0, unchanged: 0, error: 11 })
    // Nothing of the bad files (nor of the archives' good entries) was written.
    expect((await all(t)).map((p) => p.slug)).toEqual(['good'])
  })

  it('bounds archives: entry count and uncompressed size (tar bomb)', async () => {
    const t = await server.signUp('files-bomb')
    const many = await tarGz(Array.from({ length: 1001 }, (_, i) => ({ name: `p${i}.prompt`, content: 'x' })))
    // 51 MiB of zeros in one entry compresses to about 50 KB.
    const archive = pack()
    archive.entry({ name: 'bomb.prompt' }, Buffer.alloc(51 * 1024 * 1024))
    archive.finalize()
    const chunks: Buffer[] = []
    for await (const c of archive) chunks.push(c as Buffer)
    const bomb = gzipSync(Buffer.concat(chunks), { level: 1 })
    const result = await plan(t, [
      { name: 'many.tar.gz', content: many },
      { name: 'bomb.tar.gz', content: bomb },
    ])
    expect(result.items.map((i) => i.message)).toEqual([
      'the archive has more than 1000 entries',
      'the archive unpacks to more than 52428800 bytes',
    ])
    expect(await all(t)).toEqual([])
  })

  it('refuses what is not a prompt upload with a 4xx', async () => {
    const t = await server.signUp('files-refusals')
    const key = data<{ key: string }>(
      await as(t).call('POST', `/api/v1/organizations/${t.organizationId}/api-keys`, {
        name: 'ci',
        scopes: ['prompts:read', 'prompts:write'],
      }),
      201,
    ).key
    const byKey = await importFiles(key, [{ name: 'a.prompt', content: 'x' }])
    expect(byKey.status).toBe(403)
    expect((byKey.body as { error: { code: string } }).error.code).toBe('USER_TOKEN_REQUIRED')
    // An API key may export.
    const p = await create(t, { name: 'Keyed', template: 'k' })
    expect((await raw(key, `/api/v1/prompts/${p._id}/export`)).status).toBe(200)
    const none = await importFiles(t, [])
    expect(none.status).toBe(400)
    const wrongField = await fetch(`${server.base}/api/v1/prompts/import-files`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.accessToken}` },
      body: (() => {
        const f = new FormData()
        f.append('other', new Blob(['x']), 'a.prompt')
        return f
      })(),
    })
    expect(wrongField.status).toBe(400)
    const json = await as(t).call('POST', '/api/v1/prompts/import-files', { file: 'x' })
    expect(json.status).toBe(415)
    const badExpect = await importFiles(t, [{ name: 'a.prompt', content: 'x' }], '', { expect: '[1]' })
    expect(badExpect.status).toBe(400)
    // More prompts than one import takes: refused whole, nothing written.
    const many = Array.from({ length: 2001 }, (_, i) => ({ name: `p${i}`, prompt: 'x' }))
    const tooMany = await importFiles(t, [{ name: 'many.json', content: JSON.stringify(many) }])
    expect(tooMany.status).toBe(400)
    expect((tooMany.body as { error: { message: string } }).error.message).toMatch(/at most 2000 prompts/)
    expect((await all(t)).map((x) => x.slug)).toEqual(['keyed'])
  })

  it('expect: a file whose prompt changed since it was read is an error and writes nothing', async () => {
    const t = await server.signUp('files-expect')
    const p = await create(t, { name: 'Guarded', template: 'v1' })
    const revision = (await exportText(t, p._id, '')).headers.get('x-prompt-revision') ?? ''
    expect(revision).toMatch(/^[0-9a-f]{24}$/)
    // With the revision as read, the file applies (dry run); after a change on the server it does not.
    const fresh = await plan(t, [{ name: 'guarded.prompt', content: 'v2 from git' }], '?dryRun=true', {
      expect: JSON.stringify({ guarded: revision }),
    })
    expect(fresh.items[0]).toMatchObject({ action: 'update', revision })
    await as(t).call('PATCH', `/api/v1/prompts/${p._id}`, { template: 'changed elsewhere' })
    const result = await plan(t, [{ name: 'guarded.prompt', content: 'v2 from git' }], '', {
      expect: JSON.stringify({ guarded: revision }),
    })
    expect(result.items[0]).toMatchObject({ action: 'error', slug: 'guarded' })
    expect(result.items[0]?.message).toMatch(/changed on the server since it was pulled/)
    expect((await bySlug(t, 'guarded')).template).toBe('changed elsewhere')
  })
})
