import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { json, pm } from './run.ts'

const ADMIN = { email: 'ops@example.com', password: 'correct horse battery staple', org: 'Ops Inc' }

describe('pm against the embedded default', () => {
  let dir: string
  let dataDir: string
  let base: string
  let proc: RunningProcess
  let bootKey: string
  let env: Record<string, string>
  let promptId: string

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pm-cli-int-'))
    dataDir = join(dir, 'data')
    base = `http://127.0.0.1:${await freePort()}`
    env = { PM_URL: base, PM_CONFIG: join(dir, 'session.json'), HOME: dir }
  }, 60_000)

  afterAll(async () => {
    await proc?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('init creates the first user and organization in the store and mints a key; again changes nothing', async () => {
    const first = json<{
      created: boolean
      organization: { name: string }
      apiKey: { _id: string; key: string; created: boolean }
    }>(
      await pm(
        [
          'init',
          '--email',
          ADMIN.email,
          '--org-name',
          ADMIN.org,
          '--password-stdin',
          '--key-name',
          'bootstrap',
          '--json',
        ],
        { DATA_DIR: dataDir },
        `${ADMIN.password}\n`,
      ),
    )
    expect(first.created).toBe(true)
    expect(first.organization.name).toBe(ADMIN.org)
    expect(first.apiKey.key).toMatch(/^pk_/)
    expect(first.apiKey.created).toBe(true)
    bootKey = first.apiKey.key
    const again = json<{ created: boolean; apiKey: null }>(
      await pm(['init', '--email', ADMIN.email, '--org-name', 'Other', '--json'], {
        DATA_DIR: dataDir,
        PM_PASSWORD: ADMIN.password,
      }),
    )
    expect(again).toMatchObject({ created: false, apiKey: null })

    // init again with the same key name reports the key it made, and makes no second one;
    // a new name makes a new key and says so.
    const sameKey = await pm(
      ['init', '--email', ADMIN.email, '--org-name', ADMIN.org, '--key-name', 'bootstrap'],
      { DATA_DIR: dataDir, PM_PASSWORD: ADMIN.password },
    )
    expect(sameKey.code).toBe(0)
    expect(sameKey.stdout).toContain('already exists: no new key made')
    expect(sameKey.stdout).not.toMatch(/pk_/)
    const sameKeyJson = json<{ apiKey: { _id: string; created: boolean; key?: string } }>(
      await pm(
        ['init', '--email', ADMIN.email, '--org-name', ADMIN.org, '--key-name', 'bootstrap', '--json'],
        {
          DATA_DIR: dataDir,
          PM_PASSWORD: ADMIN.password,
        },
      ),
    )
    expect(sameKeyJson.apiKey).toMatchObject({ _id: first.apiKey._id, created: false })
    expect(sameKeyJson.apiKey.key).toBeUndefined()
    const otherKey = await pm(
      ['init', '--email', ADMIN.email, '--org-name', ADMIN.org, '--key-name', 'second'],
      { DATA_DIR: dataDir, PM_PASSWORD: ADMIN.password },
    )
    expect(otherKey.stdout).toContain('Made API key "second"')
    expect(otherKey.stdout).toMatch(/\npk_\w+/)

    // The service starts on that data with no BOOTSTRAP_* settings at all.
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: new URL(base).port,
      DATA_DIR: dataDir,
    })
    await waitForHttp(`${base}/health/ready`, 60_000, proc)
  }, 180_000)

  it('login keeps a session (owner-only file) that later commands use', async () => {
    const login = await pm(['login', '--email', ADMIN.email, '--password', ADMIN.password], env)
    expect(login.code).toBe(0)
    expect(login.stdout).toContain(`Signed in to ${base} as ${ADMIN.email}`)
    expect(statSync(env.PM_CONFIG ?? '').mode & 0o777).toBe(0o600)
    const wrong = await pm(['login', '--email', ADMIN.email, '--password', 'nope-nope'], {
      ...env,
      PM_CONFIG: join(dir, 'other.json'),
    })
    expect(wrong.code).toBe(1)
    expect(wrong.stderr).toContain('INVALID_CREDENTIALS')
  })

  it('the key minted by init works through the gateway', async () => {
    const list = json<{ prompts: unknown[]; summary: { total: number } }>(
      await pm(['prompts', 'list', '--json'], { ...env, PM_API_KEY: bootKey }),
    )
    expect(list.summary.total).toBe(0)
  })

  it('keys create, list, rename and revoke, and a revoked key is refused', async () => {
    const created = json<{ key: string; apiKey: { _id: string; scopes: string[] } }>(
      await pm(['keys', 'create', '--name', 'ci', '--scopes', 'prompts:read,prompts:write', '--json'], env),
    )
    expect(created.key).toMatch(/^pk_/)
    expect(created.apiKey.scopes).toEqual(['prompts:read', 'prompts:write'])
    const listed = await pm(['keys', 'list'], env)
    expect(listed.code).toBe(0)
    expect(listed.stdout).toContain(created.apiKey._id)
    expect(listed.stdout).toContain('bootstrap')

    expect((await pm(['prompts', 'list'], { ...env, PM_API_KEY: created.key })).code).toBe(0)
    const renamed = await pm(['keys', 'rename', created.apiKey._id, '--name', 'ci deploys'], env)
    expect([renamed.code, renamed.stdout.trim()]).toEqual([
      0,
      `Renamed ${created.apiKey._id} to "ci deploys".`,
    ])
    const revoked = await pm(['keys', 'revoke', created.apiKey._id], env)
    expect(revoked.code).toBe(0)
    expect(revoked.stdout).toContain(`Revoked ${created.apiKey._id}`)
    const refused = await pm(['prompts', 'list'], { ...env, PM_API_KEY: created.key })
    expect(refused.code).toBe(1)
    expect(refused.stderr).toContain('INVALID_CREDENTIALS')
  })

  it('prompts create and list, publish, invoke', async () => {
    const created = json<{ _id: string; slug: string }>(
      await pm(
        [
          'prompts',
          'create',
          '--name',
          'Welcome Mail',
          '--template',
          'Dear {{ name }}, welcome!',
          '--tags',
          'mail,onboarding',
          '--json',
        ],
        {
          ...env,
          PM_API_KEY: bootKey,
        },
      ),
    )
    expect(created.slug).toBe('welcome-mail')
    promptId = created._id
    const listed = await pm(['prompts', 'list', '--search', 'welcome'], { ...env, PM_API_KEY: bootKey })
    expect(listed.code).toBe(0)
    expect(listed.stdout).toContain(promptId)
    expect(listed.stdout).toContain('mail,onboarding')

    // publish needs the user session; with only a key it is refused by the service.
    const withKey = await pm(['publish', promptId], {
      ...env,
      PM_CONFIG: join(dir, 'none.json'),
      PM_API_KEY: bootKey,
    })
    expect(withKey.code).toBe(2)
    const published = json<{ version: number; status: string }>(
      await pm(['publish', promptId, '--changelog', 'first', '--json'], env),
    )
    expect(published).toMatchObject({ version: 1, status: 'PUBLISHED' })

    const invoked = await pm(['invoke', promptId, '--var', 'name=Ada'], { ...env, PM_API_KEY: bootKey })
    expect(invoked.code).toBe(0)
    expect(invoked.stdout).toBe('Dear Ada, welcome!\n')
    const viaSession = json<{ renderedContent: string; version: number }>(
      await pm(['invoke', promptId, '--vars-json', '{"name":"Bo"}', '--version', '1', '--json'], env),
    )
    expect(viaSession).toMatchObject({ renderedContent: 'Dear Bo, welcome!', version: 1 })
    const missing = await pm(['invoke', promptId], { ...env, PM_API_KEY: bootKey })
    expect(missing.code).toBe(1)
    expect(missing.stderr).toContain('MISSING_REQUIRED_VARIABLES')

    // By slug, which the prompt keeps.
    const bySlug = await pm(['invoke', '--slug', 'welcome-mail', '--var', 'name=Cy'], {
      ...env,
      PM_API_KEY: bootKey,
    })
    expect(bySlug.code).toBe(0)
    expect(bySlug.stdout).toBe('Dear Cy, welcome!\n')
    const both = await pm(['invoke', promptId, '--slug', 'welcome-mail'], { ...env, PM_API_KEY: bootKey })
    expect(both.code).toBe(2)
    const unknown = await pm(['invoke', '--slug', 'no-such-prompt'], { ...env, PM_API_KEY: bootKey })
    expect(unknown.code).toBe(1)
    expect(unknown.stderr).toContain('NOT_FOUND')
  })

  it('promote pins a version to production and invoke --env production renders it', async () => {
    const promoted = json<{ version: number }>(
      await pm(['promote', promptId, 'production', '--version', '1', '--json'], {
        ...env,
        PM_API_KEY: bootKey,
      }),
    )
    expect(promoted.version).toBe(1)
    const invoked = await pm(['invoke', promptId, '--var', 'name=Ada', '--env', 'production'], {
      ...env,
      PM_API_KEY: bootKey,
    })
    expect(invoked.stdout).toBe('Dear Ada, welcome!\n')
  })

  it('import creates the good rows of a CSV with a progress bar and reports the bad ones', async () => {
    const csv = join(dir, 'prompts.csv')
    writeFileSync(csv, 'name,template,tags\nOne,Hello {{a}},x\nTwo,,y\nThree,Bye {{b}},x;z\n')
    const result = await pm(['import', csv, '--interval', '50'], env)
    expect(result.code).toBe(1)
    expect(result.stderr).toContain('3/3 100%')
    expect(result.stdout).toContain('2 created, 1 failed of 3')
    expect(result.stdout).toMatch(/row 3: /)
    const listed = json<{ summary: { total: number } }>(await pm(['prompts', 'list', '--json'], env))
    expect(listed.summary.total).toBe(3)
  })
})
