import { existsSync, mkdtempSync, readdirSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { delimiter, dirname, join } from 'node:path'
import {
  findNode,
  freePort,
  REPO_ROOT,
  type RunningProcess,
  runCommand,
  startProcess,
  waitForHttp,
} from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const ADMIN = { email: 'npx@example.com', password: 'correct horse battery staple', org: 'Npx Inc' }
const NODE20 = findNode(20)

/** A command run to its end (killed if it takes more than 170 s). */
function exec(
  cmd: string,
  args: string[],
  opts: { cwd?: string; env: Record<string, string>; stdin?: string },
) {
  return runCommand(cmd, args, { ...opts, timeoutMs: 170_000 })
}

/** npm's own notices about this machine's npm configuration are not pm's output. */
function withoutNpmNotices(stderr: string): string {
  return stderr
    .split('\n')
    .filter((line) => line && !line.startsWith('npm warn') && !line.startsWith('npm notice'))
    .join('\n')
}

describe('npx of the packed @pm/cli gives a working pm', () => {
  let dir: string
  let tarball: string
  let base: string
  let proc: RunningProcess
  let key: string
  let promptId: string

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pm-cli-pack-'))
    const packDir = join(dir, 'tarballs')
    const packed = await exec('pnpm', ['pack', '--pack-destination', packDir], {
      cwd: join(REPO_ROOT, 'apps/cli'),
      env: { ...process.env } as Record<string, string>,
    })
    if (packed.code !== 0) throw new Error(`pnpm pack failed: ${packed.stderr}`)
    const file = readdirSync(packDir).find((f) => f.endsWith('.tgz'))
    if (!file) throw new Error('pnpm pack wrote no tarball')
    tarball = join(packDir, file)

    base = `http://127.0.0.1:${await freePort()}`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: new URL(base).port,
      DATA_DIR: join(dir, 'data'),
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 60_000, proc)
    const post = async <T>(path: string, token: string, body: unknown): Promise<T> => {
      const res = await fetch(`${base}${path}`, {
        method: 'POST',
        headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
        body: JSON.stringify(body),
      })
      return ((await res.json()) as { data: T }).data
    }
    const login = await post<{ accessToken: string; organizationId: string }>('/api/v1/auth/login', '', {
      email: ADMIN.email,
      password: ADMIN.password,
    })
    key = (
      await post<{ key: string }>(
        `/api/v1/organizations/${login.organizationId}/api-keys`,
        login.accessToken,
        {
          name: 'npx',
          scopes: ['prompts:read', 'prompts:write'],
        },
      )
    ).key
    promptId = (
      await post<{ _id: string }>('/api/v1/prompts', key, { name: 'Hi', template: 'Hello {{ name }}!' })
    )._id
    await post(`/api/v1/prompts/${promptId}/publish`, login.accessToken, {})
  }, 300_000)

  afterAll(async () => {
    await proc?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  /** `npx --package <tarball> pm ...` with `node` on PATH being the given binary. */
  function npx(node: string, args: string[], env: Record<string, string> = {}, stdin?: string) {
    const bin = dirname(node)
    const npxBin = existsSync(join(bin, 'npx')) ? join(bin, 'npx') : 'npx'
    return exec(npxBin, ['--yes', '--prefer-offline', `--package=${tarball}`, '--', 'pm', ...args], {
      cwd: dir,
      stdin,
      env: {
        PATH: [bin, process.env.PATH ?? ''].join(delimiter),
        HOME: process.env.HOME ?? dir,
        PM_CONFIG: join(dir, 'session.json'),
        ...env,
      },
    })
  }

  const nodes: [string, string | undefined][] = [
    ['Node.js 24', process.execPath],
    ['Node.js 20', NODE20],
  ]
  for (const [label, node] of nodes) {
    it.skipIf(!node)(
      `${label}: invoke, login and a refused key, as an operator would`,
      async () => {
        const bin = node ?? process.execPath
        const invoked = await npx(bin, ['invoke', promptId, '--var', 'name=Ada'], {
          PM_URL: base,
          PM_API_KEY: key,
        })
        expect(withoutNpmNotices(invoked.stderr)).toBe('')
        expect(invoked.stdout).toBe('Hello Ada!\n')
        expect(invoked.code).toBe(0)

        const login = await npx(
          bin,
          ['login', '--email', ADMIN.email, '--password-stdin', '--url', base],
          {},
          `${ADMIN.password}\n`,
        )
        expect(login.code, login.stderr).toBe(0)
        const listed = await npx(bin, ['prompts', 'list'], {})
        expect(listed.stdout).toContain(promptId)

        const refused = await npx(bin, ['prompts', 'list'], { PM_URL: base, PM_API_KEY: 'pk_wrong' })
        expect(refused.code).toBe(1)
        expect(refused.stderr).toContain('INVALID_CREDENTIALS')
        expect(refused.stderr).not.toContain('login')

        const usage = await npx(bin, ['nope'], {})
        expect(usage.code).toBe(2)
        expect(usage.stderr).not.toContain('Run "pm help"')
      },
      180_000,
    )
  }

  it('Node.js 24: init writes the first user into a store of its own', async () => {
    const init = await npx(
      process.execPath,
      ['init', '--email', 'first@example.com', '--org-name', 'First', '--password-stdin', '--key-name', 'k'],
      { DATA_DIR: join(dir, 'init-data') },
      'long enough password\n',
    )
    expect(init.code, init.stderr).toBe(0)
    expect(init.stdout).toContain('Made API key "k"')
  }, 180_000)

  it.skipIf(!NODE20)(
    'Node.js 20: init says which Node.js it needs',
    async () => {
      const init = await npx(
        NODE20 ?? process.execPath,
        ['init', '--email', 'first@example.com', '--org-name', 'First', '--password-stdin'],
        { DATA_DIR: join(dir, 'init-data-20') },
        'long enough password\n',
      )
      expect(init.code).toBe(1)
      expect(init.stderr).toContain('UNSUPPORTED_RUNTIME')
      expect(init.stderr).toContain('Node.js 22.5 or later')
    },
    180_000,
  )
})
