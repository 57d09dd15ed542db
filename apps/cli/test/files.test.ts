import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { run } from '../src/cli.ts'

const ORG = '0123456789abcdef0123456d'
const id = (n: number) => `0123456789abcdef0123${String(n).padStart(4, '0')}`

function capture() {
  const chunks: string[] = []
  return { write: (t: string) => chunks.push(t), isTTY: false, text: () => chunks.join('') }
}

/**
 * `pm pull` against a fake gateway: the prompts to list and export, and an import-files dry run
 * that answers each file (an error for the names in `unreadable`).
 */
describe('pm pull', () => {
  let app: FastifyInstance
  let base: string
  let home: string
  let prompts: { _id: string; slug: string }[] = []
  let unreadable = new Map<string, string>()

  beforeAll(async () => {
    home = mkdtempSync(join(tmpdir(), 'pm-cli-files-'))
    app = Fastify()
    app.addContentTypeParser('multipart/form-data', { parseAs: 'string' }, (_r, body, done) =>
      done(null, body),
    )
    app.get('/api/v1/prompts', async () => ({
      data: {
        prompts,
        pagination: { page: 1, limit: 100, total: prompts.length, totalPages: 1 },
      },
    }))
    app.get('/api/v1/prompts/:id/export', async (request) => {
      const p = prompts.find((x) => x._id === (request.params as { id: string }).id)
      return `---\nmetadata:\n  prompt:\n    slug: ${p?.slug}\n---\nHello from ${p?.slug}\n`
    })
    app.post('/api/v1/prompts/import-files', async (request) => {
      const names = [...String(request.body).matchAll(/filename="([^"]+)"/g)].map((m) => m[1] ?? '')
      const items = names.map((file) => {
        const slug = file.replace(/\.prompt$/, '')
        const message = unreadable.get(file)
        if (message) return { file, slug, action: 'error', message }
        const p = prompts.find((x) => x.slug === slug)
        return p
          ? { file, slug, action: 'unchanged', promptId: p._id, revision: `rev-${slug}` }
          : { file, slug, action: 'create' }
      })
      const count = (a: string) => items.filter((i) => i.action === a).length
      return {
        data: {
          dryRun: true,
          publish: false,
          summary: {
            create: count('create'),
            update: 0,
            unchanged: count('unchanged'),
            error: count('error'),
          },
          items,
        },
      }
    })
    await app.listen({ host: '127.0.0.1', port: 0 })
    const address = app.server.address()
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
  })
  afterAll(async () => {
    await app.close()
    rmSync(home, { recursive: true, force: true })
  })
  beforeEach(() => {
    unreadable = new Map()
  })

  async function pull(dir: string, extra: string[] = []) {
    const out = capture()
    const err = capture()
    const code = await run(['pull', '--dir', dir, ...extra], {
      stdout: out,
      stderr: err,
      env: { PM_URL: base, PM_TOKEN: 'user-jwt', PM_ORG: ORG, PM_CONFIG: join(home, 'session.json') },
    })
    return { code, out: out.text(), err: err.text() }
  }

  const state = (dir: string) => JSON.parse(readFileSync(join(dir, '.pm-state.json'), 'utf8'))

  it('removes the files its last pull wrote and this one did not (a renamed or deleted prompt), and only those', async () => {
    const dir = join(home, 'renamed')
    prompts = [
      { _id: id(1), slug: 'old' },
      { _id: id(2), slug: 'keep' },
    ]
    expect((await pull(dir)).code).toBe(0)
    // The user's own file, never written by pm.
    writeFileSync(join(dir, 'mine.prompt'), 'Mine\n')
    prompts = [
      { _id: id(1), slug: 'new' },
      { _id: id(2), slug: 'keep' },
    ]
    const second = await pull(dir)
    expect(second.code).toBe(0)
    expect(second.out).toContain('Removed (written by the last pull, not by this one): old.prompt')
    expect(readdirSync(dir).sort()).toEqual(['.pm-state.json', 'keep.prompt', 'mine.prompt', 'new.prompt'])
    expect(state(dir).pulled).toEqual(['new.prompt', 'keep.prompt'])
    expect(Object.keys(state(dir).prompts).sort()).toEqual(['keep', 'new'])

    // The same files again: nothing to remove.
    const json = await pull(dir, ['--json'])
    expect(JSON.parse(json.out).removed).toEqual([])
  })

  it('writes no file outside its folder for a server that names a prompt with path characters', async () => {
    const dir = join(home, 'hostile')
    prompts = [{ _id: id(8), slug: '../escaped' }]
    const res = await pull(dir)
    expect(res.code).toBe(1)
    expect(res.err).toContain('no slug')
    expect(existsSync(join(home, 'escaped.prompt'))).toBe(false)
  })

  it('reads a state file written before `pulled` existed: the files of its prompts', async () => {
    const dir = join(home, 'old-state')
    prompts = [{ _id: id(3), slug: 'stays' }]
    await pull(dir)
    writeFileSync(join(dir, 'gone.prompt'), 'Gone\n')
    writeFileSync(
      join(dir, '.pm-state.json'),
      JSON.stringify({
        format: 'dotprompt',
        env: null,
        prompts: {
          gone: { id: id(4), revision: 'r', file: 'gone.prompt' },
          evil: { id: id(5), revision: 'r', file: '../outside.prompt' },
        },
      }),
    )
    writeFileSync(join(home, 'outside.prompt'), 'Outside\n')
    const res = await pull(dir, ['--json'])
    expect(res.code).toBe(0)
    expect(JSON.parse(res.out).removed).toEqual(['gone.prompt'])
    expect(existsSync(join(dir, 'gone.prompt'))).toBe(false)
    expect(existsSync(join(home, 'outside.prompt'))).toBe(true)
  })

  it('fails (exit 1) when a file it wrote does not read back, naming the file and why', async () => {
    const dir = join(home, 'unreadable')
    prompts = [
      { _id: id(6), slug: 'fine' },
      { _id: id(7), slug: 'beep' },
    ]
    unreadable.set('beep.prompt', 'the file holds a control character (U+0007) on line 6')
    const res = await pull(dir)
    expect(res.code).toBe(1)
    expect(res.err).toContain('1 pulled file cannot be read back')
    expect(res.err).toContain('  beep.prompt: the file holds a control character (U+0007) on line 6')
    expect(Object.keys(state(dir).prompts)).toEqual(['fine'])
    const json = await pull(dir, ['--json'])
    expect(json.code).toBe(1)
    expect(JSON.parse(json.out).errors).toEqual([
      { file: 'beep.prompt', message: 'the file holds a control character (U+0007) on line 6' },
    ])
  })
})
