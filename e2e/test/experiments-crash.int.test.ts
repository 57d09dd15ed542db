import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Experiment, ExperimentResult } from '@pm/contracts'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { expectedSummary, FakeRuns } from '../src/fakeRuns.ts'
import { type Caller, caller, data, login } from '../src/prompts.ts'
import { ADMIN } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

const ITEMS = 100
/** Slow enough answers that the kill lands mid-experiment; short leases so the restart resumes soon. */
const SETTINGS = { EXPERIMENT_LEASE_MS: '1000', EXPERIMENT_POLL_MS: '50', LOG_LEVEL: 'warn' }

interface Target {
  gateway: () => string
  /** SIGKILL of the process running the experiment. */
  kill: () => Promise<void>
  /** Starts it again on the same data; resolves once it is ready. */
  start: () => Promise<void>
}

const strip = (e: Experiment) => e.summary.map(({ promptId: _p, label: _l, ...rest }) => rest)

/**
 * DESIGN section 14's promise: an experiment whose process is killed with SIGKILL mid-way is
 * resumed after the restart and completes with every (item, variant) recorded once, and the
 * aggregates of a clean run. A fresh run on the same data afterwards gives the same aggregates.
 */
async function crashAndResume(target: Target, fake: FakeRuns): Promise<void> {
  let user: Caller = caller(target.gateway(), (await login(target.gateway())).token)
  const promptId = data<{ _id: string }>(
    await user('POST', '/api/v1/prompts', { name: `Crash ${Date.now()}`, template: 'Q {{n}}' }),
    201,
  )._id
  data(await user('POST', `/api/v1/prompts/${promptId}/publish`, { changeLog: 'v1' }), 201)
  const items = Array.from({ length: ITEMS }, (_, i) => ({
    variables: { n: i + 1 },
    expected: `answer-${i + 1}`,
  }))
  const datasetId = data<{ _id: string }>(
    await user('POST', '/api/v1/datasets', { name: 'Crash', items }),
    201,
  )._id
  const body = {
    name: 'crash',
    datasetId,
    connectionId: 'c'.repeat(24),
    variants: [
      { promptId, version: 1 },
      { promptId, draft: true },
    ],
    evaluators: [{ type: 'exact' }],
    concurrency: 4,
  }
  const get = async (id: string) => data<Experiment>(await user('GET', `/api/v1/experiments/${id}`))
  const completed = async (id: string) => {
    await vi.waitFor(async () => expect((await get(id)).status).toBe('completed'), {
      timeout: 60_000,
      interval: 100,
    })
    return get(id)
  }

  fake.delayMs = 25
  const id = data<{ experimentId: string }>(await user('POST', '/api/v1/experiments', body), 202).experimentId
  await vi.waitFor(async () => expect((await get(id)).progress.done).toBeGreaterThanOrEqual(60), {
    timeout: 60_000,
    interval: 20,
  })
  await target.kill()
  const callsAtKill = fake.calls.length
  await target.start()
  user = caller(target.gateway(), (await login(target.gateway())).token)
  const after = await completed(id)
  expect(fake.calls.length).toBeGreaterThan(callsAtKill)
  expect(after.progress).toEqual({ done: 2 * ITEMS, total: 2 * ITEMS })
  const results: ExperimentResult[] = []
  for (let page = 1; page <= 2; page++) {
    const r = data<{ results: ExperimentResult[] }>(
      await user('GET', `/api/v1/experiments/${id}/results?page=${page}&limit=100`),
    )
    results.push(...r.results)
  }
  expect(results).toHaveLength(2 * ITEMS)
  expect(new Set(results.map((r) => `${r.itemId}:${r.variant}`)).size).toBe(2 * ITEMS)
  expect(strip(after)).toEqual(expectedSummary(ITEMS))

  fake.delayMs = 0
  const clean = data<{ experimentId: string }>(
    await user('POST', '/api/v1/experiments', body),
    202,
  ).experimentId
  expect(strip(await completed(clean))).toEqual(strip(after))
}

describe('an experiment survives SIGKILL of the embedded default', () => {
  let proc: RunningProcess | undefined
  let fake: FakeRuns
  let base: string
  let port: number
  let dataDir: string
  const secret = randomBytes(32).toString('hex')
  const start = async () => {
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      INTERNAL_AUTH_SECRET: secret,
      RUNS_URL: fake.base,
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
      ...SETTINGS,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
  }

  beforeAll(async () => {
    fake = await FakeRuns.start(secret)
    dataDir = mkdtempSync(join(tmpdir(), 'pm-exp-crash-'))
    port = await freePort()
    base = `http://127.0.0.1:${port}`
    await start()
  }, 90_000)

  afterAll(async () => {
    await proc?.stop()
    await fake?.close()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('resumes after the restart: every (item, variant) once, the aggregates of a clean run', async () => {
    await crashAndResume({ gateway: () => base, kill: async () => proc?.kill(), start }, fake)
  }, 180_000)
})

describe('an experiment survives SIGKILL of the experiments process (distributed mode, JetStream queue)', () => {
  let stack: Stack
  let fake: FakeRuns
  const secret = randomBytes(32).toString('hex')

  beforeAll(async () => {
    fake = await FakeRuns.start(secret)
    stack = await startStack(
      {
        ...SETTINGS,
        INTERNAL_AUTH_SECRET: secret,
        RUNS_URL: fake.base,
        // Its own durable consumer, so that stacks running side by side do not share jobs.
        EXPERIMENT_CONSUMER: `experiments-e2e-${randomBytes(6).toString('hex')}`,
      },
      { with: ['experiments'] },
    )
  }, 120_000)

  afterAll(async () => {
    await stack?.stop()
    await fake?.close()
  })

  it('resumes in the restarted experiments process, the others untouched', async () => {
    const others = ['identity', 'prompts', 'render', 'webhooks', 'gateway'].map(
      (n) => stack.processes[n]?.child.pid,
    )
    await crashAndResume(
      {
        gateway: () => stack.gateway,
        kill: async () => stack.processes.experiments?.kill(),
        start: () => stack.restart('experiments'),
      },
      fake,
    )
    expect(
      ['identity', 'prompts', 'render', 'webhooks', 'gateway'].map((n) => stack.processes[n]?.child.pid),
    ).toEqual(others)
  }, 180_000)
})
