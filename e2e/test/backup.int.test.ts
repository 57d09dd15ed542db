import { existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, statSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { run } from '@pm/cli'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { ADMIN } from '../src/slice.ts'
import { createApiKey, createWebhook, login, type Session } from '../src/webhooks.ts'

interface Data<T> {
  data: T
}
interface PromptRow {
  _id: string
  name: string
  versionCount: number
}

/** Started with umask 022, the usual default, under which files come out world-readable. */
function startService(dataDir: string, port: number): RunningProcess {
  return startProcess(
    'embedded',
    join(REPO_ROOT, 'apps/embedded/src/main.ts'),
    {
      PORT: String(port),
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
    },
    { umask: 0o022 },
  )
}

const mode = (path: string) => (statSync(path).mode & 0o777).toString(8)

/** `dir` and every folder under it as `name: 700`, every file as `name: 600` when private. */
function modes(dir: string, prefix = ''): Record<string, string> {
  const out: Record<string, string> = { [prefix || '.']: mode(dir) }
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name)
    if (entry.isDirectory()) Object.assign(out, modes(path, `${prefix}${entry.name}/`))
    else out[`${prefix}${entry.name}`] = mode(path)
  }
  return out
}

/** What `modes` should find: folders 700, files 600. */
const privateModes = (found: Record<string, string>) =>
  Object.fromEntries(Object.keys(found).map((k) => [k, k === '.' || k.endsWith('/') ? '700' : '600']))

/** Runs the CLI in this process, as `pnpm cli ...` would; answers its exit code and output. */
async function cli(args: string[], env: Record<string, string> = {}) {
  let stdout = ''
  let stderr = ''
  const code = await run(args, {
    stdout: { write: (t: string) => (stdout += t) },
    stderr: { write: (t: string) => (stderr += t) },
    env: { HOME: tmpdir(), ...env },
  })
  return { code, stdout, stderr }
}

async function allPrompts(base: string, s: Session): Promise<PromptRow[]> {
  const rows: PromptRow[] = []
  for (let page = 1; ; page++) {
    const res = await call<Data<{ prompts: PromptRow[] }>>(
      base,
      'GET',
      `/api/v1/prompts?limit=100&page=${page}&organizationId=${s.organizationId}`,
      { token: s.token },
    )
    expect(res.status).toBe(200)
    rows.push(...res.body.data.prompts)
    if (res.body.data.prompts.length < 100) return rows
  }
}

async function createAndPublish(base: string, s: Session, name: string, versions: number): Promise<string> {
  const created = await call<Data<{ _id: string }>>(base, 'POST', '/api/v1/prompts', {
    token: s.token,
    body: { name, template: `Hello {{name}} from ${name}`, organizationId: s.organizationId },
  })
  expect(created.status).toBe(201)
  for (let v = 0; v < versions; v++) {
    const res = await call(base, 'POST', `/api/v1/prompts/${created.body.data._id}/publish`, {
      token: s.token,
      body: { changeLog: `v${v + 1}` },
    })
    expect(res.status).toBe(201)
  }
  return created.body.data._id
}

describe('pm backup / pm restore (embedded default, SQLite)', () => {
  const root = mkdtempSync(join(tmpdir(), 'pm-backup-'))
  const live = join(root, 'live')
  const fresh = join(root, 'fresh')
  const file = join(root, 'backup.pmbak')
  let proc: RunningProcess | undefined
  let base: string

  beforeAll(async () => {
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    proc = startService(live, port)
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
  }, 60_000)

  afterAll(async () => {
    await proc?.stop()
    rmSync(root, { recursive: true, force: true })
  })

  it('copies the stores under write load, restores them into a fresh DATA_DIR, and the service starts on it', async () => {
    const s = await login(base)
    const keys = [
      await createApiKey(base, s, ['prompts:read']),
      await createApiKey(base, s, ['prompts:read', 'prompts:write']),
    ]
    const hooks = [
      await createWebhook(base, s, 'http://127.0.0.1:9/one'),
      await createWebhook(base, s, 'http://127.0.0.1:9/two'),
    ]
    // Files at rest, under umask 022: DATA_DIR 0700, every file in it (stores with their -wal
    // and -shm, the key file, the holder files) 0600.
    const live0 = modes(live)
    expect(Object.keys(live0)).toEqual(
      expect.arrayContaining([
        'identity.db',
        'identity.db-wal',
        'identity.db-shm',
        'prompts.db',
        'webhooks.db',
        'webhooks.db-wal',
        'secret.key',
        '.pm-holders/',
      ]),
    )
    expect(live0).toEqual(privateModes(live0))

    const before: Record<string, number> = {}
    for (let i = 0; i < 8; i++)
      before[await createAndPublish(base, s, `Before ${i}`, 1 + (i % 3))] = 1 + (i % 3)

    // Writers keep creating and publishing while the backup runs.
    let writing = true
    let written = 0
    const writer = async (n: number) => {
      for (let i = 0; writing; i++) {
        await createAndPublish(base, s, `During ${n}-${i}`, 2)
        written++
      }
    }
    const writers = [writer(1), writer(2), writer(3)]
    while (written < 3) await new Promise((r) => setImmediate(r))
    const umask = process.umask(0o022)
    const backup = await cli(['backup', '--out', file, '--json'], { DATA_DIR: live }).finally(() =>
      process.umask(umask),
    )
    writing = false
    await Promise.all(writers)
    expect(backup.stderr).toBe('')
    expect(backup.code).toBe(0)
    const report = JSON.parse(backup.stdout) as { stores: Array<{ name: string; bytes: number }> }
    // The key file too: without it the restored webhook secrets would not open.
    expect(report.stores.map((st) => st.name)).toEqual([
      'identity.db',
      'prompts.db',
      'webhooks.db',
      'runs.db',
      'experiments.db',
      'secret.key',
    ])
    expect(existsSync(file)).toBe(true)
    expect(mode(file)).toBe('600')
    expect(readdirSync(root).filter((f) => f.includes('partial'))).toEqual([])

    // Refused while the service holds the files, and over existing stores without --force.
    const busy = await cli(['restore', file, '--data-dir', live])
    expect(busy.code).toBe(1)
    expect(busy.stderr).toMatch(/the service is running on .*pid \d+.*Stop it first/)

    const restored = await cli(['restore', file, '--data-dir', fresh])
    expect(restored.stderr).toBe('')
    expect(restored.code).toBe(0)
    expect(readFileSync(join(fresh, 'secret.key'), 'utf8')).toBe(
      readFileSync(join(live, 'secret.key'), 'utf8'),
    )
    const fresh0 = modes(fresh)
    expect(fresh0).toEqual(privateModes(fresh0))
    // Only the stores: no *.restoring file, and no -wal/-shm the integrity check's open left.
    expect(readdirSync(fresh).filter((f) => f.includes('restoring'))).toEqual([])
    const again = await cli(['restore', file, '--data-dir', fresh])
    expect(again.code).toBe(1)
    expect(again.stderr).toMatch(/already in .*--force/)

    // The service starts on the restored DATA_DIR (bootstrap finds its admin: nothing doubled).
    await proc?.stop()
    proc = undefined
    const port = await freePort()
    const restoredBase = `http://127.0.0.1:${port}`
    proc = startService(fresh, port)
    await waitForHttp(`${restoredBase}/health/ready`, 90_000, proc)
    const s2 = await login(restoredBase)
    expect(s2.organizationId).toBe(s.organizationId)

    // Every prompt written before the backup, with every version.
    const prompts = await allPrompts(restoredBase, s2)
    const byId = new Map(prompts.map((p) => [p._id, p]))
    for (const [id, versions] of Object.entries(before)) {
      expect(byId.get(id)?.versionCount, id).toBe(versions)
      const list = await call<Data<{ versions: Array<{ version: number }> }>>(
        restoredBase,
        'GET',
        `/api/v1/prompts/${id}/versions`,
        { token: s2.token },
      )
      expect(list.body.data.versions.map((v) => v.version).sort()).toEqual(
        Array.from({ length: versions }, (_, i) => i + 1),
      )
    }
    // Prompts written during the backup are whole: a publish is in the copy with its version or not at all.
    for (const p of prompts.filter((p) => p.name.startsWith('During'))) {
      const list = await call<Data<{ versions: unknown[] }>>(
        restoredBase,
        'GET',
        `/api/v1/prompts/${p._id}/versions`,
        { token: s2.token },
      )
      expect(list.body.data.versions).toHaveLength(p.versionCount)
    }

    // Every key (and it still authenticates) and every subscription.
    const keyList = await call<Data<{ apiKeys: Array<{ _id: string }> }>>(
      restoredBase,
      'GET',
      `/api/v1/organizations/${s2.organizationId}/api-keys`,
      { token: s2.token },
    )
    expect(keyList.body.data.apiKeys.length).toBeGreaterThanOrEqual(keys.length)
    for (const key of keys) {
      const res = await call(restoredBase, 'GET', '/api/v1/prompts?limit=1', { token: key })
      expect(res.status).toBe(200)
    }
    const hookList = await call<Data<{ webhooks: Array<{ _id: string }> }>>(
      restoredBase,
      'GET',
      `/api/v1/organizations/${s2.organizationId}/webhooks`,
      { token: s2.token },
    )
    expect(hookList.body.data.webhooks.map((h) => h._id).sort()).toEqual(
      hooks.map((h) => h.webhook._id).sort(),
    )
    // The restored service runs with its files as private as the first one's.
    const running = modes(fresh)
    expect(running).toEqual(privateModes(running))
  }, 180_000)

  it('refuses a file that is not a backup, and explains the usage', async () => {
    const notBackup = join(root, 'not-a-backup')
    const res = await cli(['restore', join(REPO_ROOT, 'package.json'), '--data-dir', notBackup])
    expect(res.code).toBe(1)
    expect(res.stderr).toMatch(/not a backup made by "pm backup"/)
    expect(existsSync(join(notBackup, 'identity.db'))).toBe(false)
    expect((await cli(['backup'])).code).toBe(2)
    expect((await cli(['restore'])).code).toBe(2)
    // --force sets the current files aside (never deletes them).
    const twice = join(root, 'twice')
    expect((await cli(['restore', file, '--data-dir', twice])).code).toBe(0)
    const forced = await cli(['restore', file, '--data-dir', twice, '--force', '--json'])
    expect(forced.code).toBe(0)
    const { setAside } = JSON.parse(forced.stdout) as { setAside: string[] }
    // The five stores and the key file.
    expect(setAside).toHaveLength(6)
    for (const f of setAside) expect(existsSync(f)).toBe(true)
    const empty = await cli(['backup', '--out', join(root, 'x.pmbak'), '--data-dir', join(root, 'nothing')])
    expect(empty.code).toBe(1)
    expect(empty.stderr).toMatch(/no store under/)
  })
})
