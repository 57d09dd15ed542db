import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { run } from '@pm/cli'
import type { Prompt } from '@pm/contracts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { type InProcess, startInProcess, type Tenant } from '../src/inProcess.ts'

/** `pm pull`, `pm diff`, `pm push` against the embedded default (DESIGN section 16, issue 30). */
describe('pm pull, diff and push', () => {
  let server: InProcess
  let t: Tenant
  let home: string
  let dir: string

  const pm = async (...args: string[]) => {
    let stdout = ''
    let stderr = ''
    const code = await run(args, {
      stdout: { write: (s: string) => (stdout += s) },
      stderr: { write: (s: string) => (stderr += s) },
      env: { HOME: home, PM_URL: server.base, PM_TOKEN: t.accessToken, PM_ORG: t.organizationId },
    })
    return { code, stdout, stderr }
  }
  const api = async <T>(method: string, path: string, body?: unknown): Promise<T> => {
    const res = await call<{ data: T }>(server.base, method, path, { token: t.accessToken, body })
    if (res.status >= 300) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(res.body)}`)
    return res.body.data
  }
  const bySlug = (slug: string) => api<Prompt>('GET', `/api/v1/prompts/slug/${slug}`)

  beforeAll(async () => {
    server = await startInProcess()
    t = await server.signUp('cli-files')
    home = mkdtempSync(join(tmpdir(), 'pm-files-home-'))
    dir = join(home, 'prompts')
    await api('POST', '/api/v1/prompts', { name: 'Greeting', template: 'Hello {{name}}!' })
    await api('POST', '/api/v1/prompts', {
      name: 'Helper',
      type: 'chat',
      messages: [
        { role: 'system', content: 'You help with {{topic}}.' },
        { type: 'placeholder', name: 'history' },
      ],
      config: { model: 'gpt-4o-mini' },
    })
  }, 120_000)

  afterAll(async () => {
    await server?.close()
    if (home) rmSync(home, { recursive: true, force: true })
  })

  it('pulls into an empty folder, diffs an edit, and pushes exactly that prompt with --publish', async () => {
    const pulled = await pm('pull', '--dir', dir)
    expect(pulled.code, pulled.stderr).toBe(0)
    expect(pulled.stdout).toContain('Pulled 2 prompts')
    expect(readdirSync(dir).sort()).toEqual(['.pm-state.json', 'greeting.prompt', 'helper.prompt'])
    expect(readFileSync(join(dir, 'helper.prompt'), 'utf8')).toContain('{{history}}')

    const clean = await pm('diff', '--dir', dir)
    expect(clean.code).toBe(0)
    expect(clean.stdout).toContain('0 to create, 0 to update, 2 unchanged, 0 with errors')

    const file = join(dir, 'greeting.prompt')
    writeFileSync(
      file,
      readFileSync(file, 'utf8').replace('Hello {{name}}!', 'Hello {{name}}, welcome back!'),
    )
    const diff = await pm('diff', '--dir', dir)
    expect(diff.code).toBe(0)
    expect(diff.stdout).toContain('greeting.prompt: update (template)')
    expect(diff.stdout).toContain('-Hello {{name}}!')
    expect(diff.stdout).toContain('+Hello {{name}}, welcome back!')

    const pushed = await pm('push', '--dir', dir, '--publish')
    expect(pushed.code, pushed.stderr).toBe(0)
    expect(pushed.stdout).toContain('greeting.prompt: update (template), published v1')
    const greeting = await bySlug('greeting')
    expect(greeting).toMatchObject({ template: 'Hello {{name}}, welcome back!', versionCount: 1 })
    expect((await bySlug('helper')).versionCount).toBe(0)

    // Pushing again (the state now holds the new revision) changes nothing.
    const again = await pm('push', '--dir', dir, '--publish')
    expect(again.code, again.stderr).toBe(0)
    expect(again.stdout).toContain('0 to create, 0 to update, 2 unchanged')
  })

  it('a push after someone else changed a draft exits 1 and writes nothing', async () => {
    const greeting = await bySlug('greeting')
    const helperBefore = await bySlug('helper')
    // Both files edited locally; one prompt changed on the server meanwhile.
    for (const name of ['greeting.prompt', 'helper.prompt']) {
      const file = join(dir, name)
      writeFileSync(file, readFileSync(file, 'utf8').replace(/\n$/, ' (edited locally)\n'))
    }
    await api('PATCH', `/api/v1/prompts/${greeting._id}`, { template: 'Changed in the dashboard' })
    const dry = await pm('push', '--dir', dir, '--dry-run')
    expect(dry.code).toBe(1)
    const pushed = await pm('push', '--dir', dir, '--publish')
    expect(pushed.code).toBe(1)
    expect(pushed.stderr).toContain(
      'greeting.prompt: error: the prompt changed on the server since it was pulled',
    )
    expect(pushed.stderr).toContain('Nothing pushed')
    const after = await bySlug('greeting')
    expect(after).toMatchObject({ template: 'Changed in the dashboard', versionCount: 1 })
    const helper = await bySlug('helper')
    expect(helper.messages).toEqual(helperBefore.messages)
    expect(helper.updatedAt).toBe(helperBefore.updatedAt)
  })
})
