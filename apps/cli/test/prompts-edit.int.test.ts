import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { json, pm } from './run.ts'

const ADMIN = { email: 'edit@example.com', password: 'correct horse battery staple' }

describe('pm prompts update, delete, chat create, get --slug; login; argument errors', () => {
  let dir: string
  let base: string
  let proc: RunningProcess
  let env: Record<string, string>

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pm-cli-edit-'))
    base = `http://127.0.0.1:${await freePort()}`
    env = { PM_URL: base, PM_CONFIG: join(dir, 'session.json'), HOME: dir }
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: new URL(base).port,
      DATA_DIR: join(dir, 'data'),
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: 'Edit Inc',
    })
    await waitForHttp(`${base}/health/ready`, 60_000, proc)
  }, 90_000)

  afterAll(async () => {
    await proc?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('login names the session end (the refresh token: 30 days), not the 15-minute access token', async () => {
    const login = await pm(['login', '--email', ADMIN.email, '--password', ADMIN.password], env)
    expect(login.code).toBe(0)
    const until = /session until (\S+) \(each use renews it\)/.exec(login.stdout)?.[1]
    expect(until).toBeDefined()
    const days = (Date.parse(until ?? '') - Date.now()) / 86_400_000
    expect(days).toBeGreaterThan(29.9)
    expect(days).toBeLessThanOrEqual(30)
    const saved = JSON.parse(readFileSync(env.PM_CONFIG ?? '', 'utf8')) as { sessionExpiresAt: string }
    expect(saved.sessionExpiresAt).toBe(until)
  })

  it('creates a chat prompt from --message flags, gets it by slug, updates and deletes it', async () => {
    const created = json<{ _id: string; slug: string; type: string; messages: unknown[]; config: unknown }>(
      await pm(
        [
          'prompts',
          'create',
          '--name',
          'Support Bot',
          '--type',
          'chat',
          '--message',
          'system:You help {{customer}}.',
          '--message',
          'placeholder:history',
          '--message',
          'user:{{question}}',
          '--config-json',
          '{"model":"gpt-4o-mini"}',
          '--json',
        ],
        env,
      ),
    )
    expect(created).toMatchObject({
      slug: 'support-bot',
      type: 'chat',
      config: { model: 'gpt-4o-mini' },
      messages: [
        { role: 'system', content: 'You help {{customer}}.' },
        { type: 'placeholder', name: 'history' },
        { role: 'user', content: '{{question}}' },
      ],
    })

    const bySlug = await pm(['prompts', 'get', '--slug', 'support-bot'], env)
    expect(bySlug.code).toBe(0)
    expect(bySlug.stdout).toContain(`Support Bot (${created._id})`)

    const human = await pm(
      ['prompts', 'update', created._id, '--name', 'Helper', '--message', 'system:Hi {{customer}}'],
      env,
    )
    expect(human.stdout).toContain(
      `Updated chat prompt (1 messages) "Helper" (${created._id}), slug support-bot.`,
    )
    expect(human.stdout).toContain(
      'variables the draft no longer uses (kept until removed): history, question',
    )
    const updated = json<{ name: string; description: string; messages: unknown[] }>(
      await pm(['prompts', 'update', created._id, '--description', 'the bot', '--json'], env),
    )
    expect(updated).toMatchObject({
      name: 'Helper',
      description: 'the bot',
      messages: [{ content: 'Hi {{customer}}' }],
    })

    const unconfirmed = await pm(['prompts', 'delete', created._id], env)
    expect(unconfirmed.code).toBe(2)
    expect(unconfirmed.stderr).toContain('add --yes to confirm')
    expect((await pm(['prompts', 'delete', created._id, '--yes'], env)).code).toBe(0)
    const gone = await pm(['prompts', 'get', '--slug', 'support-bot'], env)
    expect(gone.code).toBe(1)
    expect(gone.stderr).toContain('NOT_FOUND')
  })

  it('names the bad argument instead of quoting the parser', async () => {
    const unknown = await pm(['prompts', 'list', '--slug-x', 'x'], env)
    expect(unknown.code).toBe(2)
    expect(unknown.stderr).toMatch(/^error: unknown option --slug-x; this command takes --url <value>/)
    expect(unknown.stderr).not.toContain(`'-- "`)
    const noEquals = await pm(['invoke', '--slug', 'x', '--var', 'name'], env)
    expect(noEquals.code).toBe(2)
    expect(noEquals.stderr).toContain('--var "name" has no "=": write --var name=<value>')
    const noValue = await pm(['invoke', '--slug', 'x', '--var'], env)
    expect(noValue.stderr).toContain('--var needs a value')
    const badRole = await pm(['prompts', 'create', '--name', 'X', '--message', 'boss:hi'], env)
    expect(badRole.code).toBe(2)
    expect(badRole.stderr).toContain('--message "boss:hi" does not start with a role')
  })
})
