import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import { SUBJECTS } from '@pm/contracts'
import { hashApiKey, isWellFormedApiKey } from '@pm/kit'
import { afterEach, beforeEach, describe, expect, it } from 'vitest'
import { runCli } from '../src/cli/run.ts'
import { verifyPassword } from '../src/domain/passwords.ts'
import { SqliteIdentityStore } from '../src/store/sqlite.ts'

const PASSWORD = 'cli password 1234'

describe('identity CLI', () => {
  let dir: string
  const broadcasts: Array<{ subject: string; data: unknown }> = []

  const cli = async (args: string[], stdin = '', env: Record<string, string> = {}) => {
    let out = ''
    let err = ''
    const code = await runCli(args, {
      env: { DATA_DIR: dir, ...env },
      readStdin: async () => stdin,
      out: (s) => {
        out += s
      },
      err: (s) => {
        err += s
      },
      openBus: async () => {
        const bus = new MemoryBus()
        bus.broadcast = (subject, data) => {
          broadcasts.push({ subject, data })
        }
        return bus
      },
    })
    return { code, out, err, json: () => JSON.parse(out) }
  }

  const withStore = async <T>(fn: (s: SqliteIdentityStore) => Promise<T>): Promise<T> => {
    const store = new SqliteIdentityStore(join(dir, 'identity.db'))
    try {
      return await fn(store)
    } finally {
      await store.close()
    }
  }

  beforeEach(() => {
    dir = mkdtempSync(join(tmpdir(), 'pm-identity-cli-'))
    broadcasts.length = 0
  })
  afterEach(() => {
    rmSync(dir, { recursive: true, force: true })
  })

  it('creates a user with an organization, mints, lists and revokes a key', async () => {
    const created = await cli(
      ['create-user', '--email', 'Ops@Example.com', '--name', 'Ops', '--password-stdin', '--org', 'Ops Team'],
      `${PASSWORD}\n`,
    )
    expect(created.code).toBe(0)
    const { user, organization } = created.json()
    expect(user).toMatchObject({ email: 'ops@example.com', name: 'Ops' })
    expect(organization).toMatchObject({ name: 'Ops Team', slug: 'ops-team' })
    expect(created.out).not.toContain(PASSWORD)
    await withStore(async (s) => {
      const stored = await s.findUserByEmail('ops@example.com')
      // The trailing newline of stdin is not part of the password.
      expect(await verifyPassword(PASSWORD, stored?.passwordHash ?? '')).toBe(true)
      expect(await s.getMembership(organization._id, user._id)).toMatchObject({
        role: 'OWNER',
        status: 'ACTIVE',
      })
    })

    const minted = await cli([
      'mint-key',
      '--org',
      'ops-team',
      '--name',
      'deploy',
      '--scopes',
      'prompts:read, prompts:write',
      '--rate-limit',
      '50/60',
      '--expires-at',
      '2100-01-01T00:00:00Z',
    ])
    expect(minted.code).toBe(0)
    const { key, apiKey } = minted.json()
    expect(isWellFormedApiKey(key)).toBe(true)
    expect(apiKey).toMatchObject({
      organizationId: organization._id,
      createdBy: user._id,
      scopes: ['prompts:read', 'prompts:write'],
      rateLimit: { points: 50, durationSeconds: 60 },
      expiresAt: '2100-01-01T00:00:00.000Z',
    })
    await withStore(async (s) => {
      expect((await s.findApiKeyByHash(hashApiKey(key)))?._id).toBe(apiKey._id)
    })

    const listed = await cli(['list-keys', '--org', organization._id])
    expect(listed.code).toBe(0)
    expect(listed.json().apiKeys.map((k: { _id: string }) => k._id)).toEqual([apiKey._id])
    expect(listed.out).not.toContain(key)
    expect(listed.out).not.toContain(hashApiKey(key))

    const revoked = await cli(['revoke-key', '--org', 'ops-team', '--key-id', apiKey._id])
    expect(revoked.code).toBe(0)
    expect(revoked.json().revokedAt).toBeTypeOf('string')
    expect(broadcasts).toEqual([
      {
        subject: SUBJECTS.apiKeyRevoked,
        data: { keyId: apiKey._id, hash: hashApiKey(key), organizationId: organization._id },
      },
    ])
  })

  it('bootstraps once, creates organizations for existing users', async () => {
    const args = ['bootstrap', '--email', 'root@example.com', '--org', 'Root', '--password', PASSWORD]
    const first = await cli(args)
    expect(first.code).toBe(0)
    expect(first.json()).toMatchObject({ created: true, organization: { name: 'Root' } })
    const second = await cli(args)
    expect(second.json()).toMatchObject({
      created: false,
      organization: { _id: first.json().organization._id },
    })

    const org = await cli(['create-org', '--owner', 'root@example.com', '--name', 'Second'])
    expect(org.code).toBe(0)
    expect(org.json()).toMatchObject({ name: 'Second', slug: 'second' })
    expect((await cli(['create-org', '--owner', 'nobody@example.com', '--name', 'X'])).code).toBe(1)
  })

  it('refuses bad input with a message and a non-zero status', async () => {
    expect((await cli([])).code).toBe(2)
    expect((await cli(['--help'])).code).toBe(0)
    const unknown = await cli(['frobnicate'])
    expect(unknown.code).toBe(2)
    expect(unknown.err).toContain('unknown command frobnicate')
    expect((await cli(['create-user', '--email', 'x@example.com', '--name', 'X'])).err).toContain(
      '--password',
    )
    const short = await cli(['create-user', '--email', 'x@example.com', '--name', 'X', '--password', 'short'])
    expect(short.code).toBe(2)
    expect((await cli(['create-user', '--email', 'nope', '--name', 'X', '--password', PASSWORD])).code).toBe(
      2,
    )
    await cli([
      'create-user',
      '--email',
      'x@example.com',
      '--name',
      'X',
      '--password',
      PASSWORD,
      '--org',
      'X Org',
    ])
    const dup = await cli(['create-user', '--email', 'x@example.com', '--name', 'X', '--password', PASSWORD])
    expect(dup.code).toBe(1)
    expect(dup.err).toContain('already exists')
    const badScope = await cli(['mint-key', '--org', 'x-org', '--name', 'k', '--scopes', 'root'])
    expect(badScope.code).toBe(2)
    expect(badScope.err).toContain('unknown scope root')
    expect(
      (
        await cli([
          'mint-key',
          '--org',
          'x-org',
          '--name',
          'k',
          '--scopes',
          'prompts:read',
          '--rate-limit',
          'lots',
        ])
      ).code,
    ).toBe(2)
    expect(
      (await cli(['mint-key', '--org', 'missing', '--name', 'k', '--scopes', 'prompts:read'])).code,
    ).toBe(1)
    expect((await cli(['revoke-key', '--org', 'x-org', '--key-id', 'abc'])).code).toBe(1)
    expect((await cli(['list-keys', '--org', 'x-org', '--bogus'])).code).toBe(2)
  })

  it("mints keys under the service's API_KEY_MAX_PER_ORG, not under the default", async () => {
    const env = { API_KEY_MAX_PER_ORG: '1' }
    const created = await cli(
      [
        'create-user',
        '--email',
        'cap@example.com',
        '--name',
        'Cap',
        '--password',
        PASSWORD,
        '--org',
        'Cap Org',
      ],
      '',
      env,
    )
    expect(created.code).toBe(0)
    const mint = (name: string) =>
      cli(['mint-key', '--org', 'cap-org', '--name', name, '--scopes', 'prompts:read'], '', env)
    expect((await mint('first')).code).toBe(0)
    const second = await mint('second')
    expect(second.code).toBe(1)
    expect(second.err).toContain('at most 1 API keys')
  })
})
