import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import type { ImportBatch, Prompt } from '@pm/contracts'
import { newId } from '@pm/kit'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { caller, data, login, upload } from '../src/prompts.ts'
import { ADMIN } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

const ROWS = 5_000
/**
 * A pause after each row, so that the kill lands mid-import (5,000 rows take more than five
 * seconds); the resume path is the one production takes.
 */
const SLOW = { IMPORT_ROW_DELAY_MS: '1' }
/**
 * The restart after the kill: no pause, as in production (the pause only has to keep the first
 * process busy until the kill), so the resumed rows go at full speed.
 */
const RESUME = { IMPORT_ROW_DELAY_MS: '0' }
/**
 * IMPORT_LEASE_MS (default 5 s): a dead writer's batch is free this long after its last renewal.
 * Shorter here, as IMPORT_POLL_MS (default 1 s), how often a process looks for such a batch:
 * the restarted process resumes the batch about 2 s after the kill, not 5 to 6 s.
 */
const LEASE_MS = 2_000
const LEASE = { IMPORT_LEASE_MS: String(LEASE_MS), IMPORT_POLL_MS: '200' }

interface PromptList {
  prompts: Prompt[]
  pagination: { total: number; totalPages: number }
}

/** What a SIGKILL left on disk, read straight from the prompts database (process dead). */
function onDisk(dataDir: string, batchId: string, org: string) {
  const db = new DatabaseSync(join(dataDir, 'prompts.db'))
  try {
    const batch = db
      .prepare('SELECT status, created, failed, position FROM import_batches WHERE id = ?')
      .get(batchId) as { status: string; created: number; failed: number; position: number }
    const prompts = db.prepare('SELECT COUNT(*) AS n FROM prompts WHERE organization_id = ?').get(org) as {
      n: number
    }
    const file = db
      .prepare('SELECT length(content) AS bytes FROM import_files WHERE batch_id = ?')
      .get(batchId) as { bytes: number } | undefined
    return { batch, prompts: prompts.n, fileBytes: file?.bytes ?? 0 }
  } finally {
    db.close()
  }
}

function csvFile(): string {
  const rows = ['name,template,description,tags']
  for (let i = 1; i <= ROWS; i++)
    rows.push(`Crash ${i},"Hello {{name}}, row #${i}",Row ${i},"crash; n${i % 5}"`)
  return rows.join('\n')
}

interface Target {
  gateway: () => string
  dataDir: () => string
  /** SIGKILL of the process that writes the import. */
  kill: () => Promise<void>
  /** Starts it again on the same data (RESUME); resolves once it is ready. */
  start: () => Promise<void>
}

/**
 * The whole story of issue 21 against one deployment: a 5,000-row import through the gateway,
 * the writer killed with SIGKILL halfway, its counts exact on disk at that moment, the batch
 * resumed by the restarted process and completed with every row once and whole, and the same
 * file sent again creating nothing.
 */
async function crashAndResume(target: Target): Promise<void> {
  let admin = await login(target.gateway())
  let user = caller(target.gateway(), admin.token)
  const org = data<{ _id: string }>(
    await user('POST', '/api/v1/organizations', { name: `Crash ${newId()}` }),
    201,
  )._id
  const status = async () =>
    data<ImportBatch>(await user('GET', `/api/v1/prompts/import/${batchId}?organizationId=${org}`))

  const csv = csvFile()
  const accepted = data<{ batchId: string }>(
    await upload(target.gateway(), admin.token, csv, { query: `?organizationId=${org}` }),
    202,
  )
  const batchId = accepted.batchId
  await vi.waitFor(async () => expect((await status()).created).toBeGreaterThanOrEqual(1_000), {
    timeout: 60_000,
    interval: 20,
  })
  await target.kill()

  // Killed mid-import: the counts on disk are exactly the prompts written, and the file is kept.
  const killed = onDisk(target.dataDir(), batchId, org)
  expect(killed.batch.status).toBe('processing')
  expect(killed.batch.created).toBeLessThan(ROWS)
  expect(killed.batch).toMatchObject({ failed: 0, position: killed.batch.created })
  expect(killed.prompts).toBe(killed.batch.created)
  expect(killed.fileBytes).toBe(Buffer.byteLength(csv))

  const restarting = Date.now()
  await target.start()
  // Bounded from the new process's readiness, not its start: a start takes seconds on a busy machine.
  const ready = Date.now()
  admin = await login(target.gateway())
  user = caller(target.gateway(), admin.token)
  let done: ImportBatch | undefined
  await vi.waitFor(
    async () => {
      done = await status()
      expect(done.status).toBe('completed')
    },
    { timeout: 60_000, interval: 50 },
  )
  expect(done).toMatchObject({ total: ROWS, created: ROWS, failed: 0, errors: [] })
  // Resumed by the new process, within seconds: once the dead writer's lease ran out.
  const resumedAt = Date.parse(done?.resumedAt ?? '')
  expect(resumedAt).toBeGreaterThan(restarting)
  expect(resumedAt - ready).toBeLessThan(LEASE_MS + 10_000)

  // Every row once, whole: name, template, description and tags all from its row.
  const seen = new Set<number>()
  for (let page = 1; page <= ROWS / 100; page++) {
    const list = data<PromptList>(
      await user('GET', `/api/v1/prompts?organizationId=${org}&limit=100&page=${page}`),
    )
    expect(list.pagination.total).toBe(ROWS)
    for (const p of list.prompts) {
      const i = Number(p.name.replace('Crash ', ''))
      seen.add(i)
      expect(p).toMatchObject({
        slug: `crash-${i}`,
        template: `Hello {{name}}, row #${i}`,
        description: `Row ${i}`,
        tags: ['crash', `n${i % 5}`],
        variables: [{ name: 'name', required: true }],
        createdBy: admin.userId,
      })
    }
  }
  expect(seen.size).toBe(ROWS)
  // The file went with the end of the batch.
  expect(onDisk(target.dataDir(), batchId, org).fileBytes).toBe(0)

  // Sent again, as a user does after such a failure: the same batch, nothing new.
  const again = data<{ batchId: string; message: string }>(
    await upload(target.gateway(), admin.token, csv, { query: `?organizationId=${org}` }),
    202,
  )
  expect(again.batchId).toBe(batchId)
  expect(again.message).toContain('nothing new')
  const total = data<PromptList>(await user('GET', `/api/v1/prompts?organizationId=${org}&limit=1`))
    .pagination.total
  expect(total).toBe(ROWS)
}

describe('a CSV import survives SIGKILL of the embedded default', () => {
  let proc: RunningProcess | undefined
  let base: string
  let port: number
  let dataDir: string
  const start = async (env: Record<string, string> = {}) => {
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      LOG_LEVEL: 'warn',
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
      ...SLOW,
      ...LEASE,
      ...env,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
  }

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'pm-import-crash-'))
    port = await freePort()
    base = `http://127.0.0.1:${port}`
    await start()
  }, 60_000)

  afterAll(async () => {
    await proc?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('resumes the batch after a restart: every row once, counts exact, a re-send creates nothing', async () => {
    await crashAndResume({
      gateway: () => base,
      dataDir: () => dataDir,
      kill: async () => proc?.kill(),
      start: () => start(RESUME),
    })
  }, 180_000)
})

describe('a CSV import survives SIGKILL of the prompts process (distributed mode)', () => {
  let stack: Stack

  beforeAll(async () => {
    stack = await startStack({ ...SLOW, ...LEASE })
  }, 120_000)

  afterAll(async () => {
    await stack?.stop()
  })

  it('resumes the batch in the restarted prompts process, the gateway and the others untouched', async () => {
    const others = ['identity', 'render', 'webhooks', 'gateway'].map(
      (name) => stack.processes[name]?.child.pid,
    )
    await crashAndResume({
      gateway: () => stack.gateway,
      dataDir: () => stack.dataDir,
      kill: async () => stack.processes.prompts?.kill(),
      start: () => stack.restart('prompts', RESUME),
    })
    expect(
      ['identity', 'render', 'webhooks', 'gateway'].map((name) => stack.processes[name]?.child.pid),
    ).toEqual(others)
  }, 180_000)
})
