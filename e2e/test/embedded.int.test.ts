import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { call } from '../src/client.ts'
import { ADMIN, runSlice } from '../src/slice.ts'

describe('embedded default: one process, SQLite, in-process events, in-memory limits', () => {
  let proc: RunningProcess
  let base: string
  let dataDir: string

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'pm-embedded-'))
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    // No NATS_URL, REDIS_URL or MONGO_URL: nothing external. Every route's schemas compile before
    // the process is ready (a schema that does not compile fails this start).
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      SCHEMA_COMPILE: 'eager',
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
  }, 60_000)

  afterAll(async () => {
    await proc?.stop()
    rmSync(dataDir, { recursive: true, force: true })
  })

  it('runs the slice through the gateway', async () => {
    const result = await runSlice(base)
    const listed = await call<{ data: { prompts: { _id: string }[] } }>(base, 'GET', '/api/v1/prompts', {
      token: result.apiKey,
    })
    expect(listed.status).toBe(200)
    expect(listed.body.data.prompts.map((p) => p._id)).toContain(result.promptId)
  })

  it('keeps data across a restart and does not bootstrap twice', async () => {
    await proc.stop()
    const port = new URL(base).port
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: port,
      DATA_DIR: dataDir,
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
    const login = await call<{ data: { accessToken: string } }>(base, 'POST', '/api/v1/auth/login', {
      body: { email: ADMIN.email, password: ADMIN.password },
    })
    expect(login.status).toBe(200)
    const orgs = await call<{ data: { organizations: unknown[] } }>(base, 'GET', '/api/v1/organizations', {
      token: login.body.data.accessToken,
    })
    expect(orgs.body.data.organizations).toHaveLength(1)
  })
})
