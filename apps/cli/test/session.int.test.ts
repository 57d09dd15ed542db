import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { pm } from './run.ts'

const ADMIN = { email: 'tokens@example.com', password: 'correct horse battery staple', org: 'Tokens Inc' }
/**
 * The shortest lifetime identity accepts, and no clock skew allowed past it by the gateway (one
 * clock here): the test waits seconds, not the 90 s of a minute's token and the default 30 s.
 */
const ACCESS_TOKEN_TTL_SECONDS = 5
const JWT_CLOCK_TOLERANCE_SECONDS = 0

interface SavedSession {
  accessToken: string
  refreshToken: string
  expiresAt: string
}

describe('pm keeps working after its access token expires (embedded default, short token lifetime)', () => {
  let dir: string
  let base: string
  let proc: RunningProcess
  let env: Record<string, string>
  const saved = () => JSON.parse(readFileSync(env.PM_CONFIG ?? '', 'utf8')) as SavedSession

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pm-cli-session-'))
    base = `http://127.0.0.1:${await freePort()}`
    env = { PM_URL: base, PM_CONFIG: join(dir, 'session.json'), HOME: dir }
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: new URL(base).port,
      DATA_DIR: join(dir, 'data'),
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
      ACCESS_TOKEN_TTL_SECONDS: String(ACCESS_TOKEN_TTL_SECONDS),
      JWT_CLOCK_TOLERANCE_SECONDS: String(JWT_CLOCK_TOLERANCE_SECONDS),
    })
    await waitForHttp(`${base}/health/ready`, 30_000, proc)
  }, 60_000)

  afterAll(async () => {
    await proc?.stop()
    rmSync(dir, { recursive: true, force: true })
  })

  it('renews the session with the refresh token, rotating it, on the 401 and before the command', async () => {
    const login = await pm(['login', '--email', ADMIN.email, '--password-stdin'], env, `${ADMIN.password}\n`)
    expect(login.code, login.stderr).toBe(0)
    expect(saved().refreshToken).toBeTruthy()
    expect((await pm(['keys', 'list'], env)).code).toBe(0)
    // A token of seconds is within the CLI's renewal margin: that command may already have
    // renewed the session. The session from here on is the one it left.
    const first = saved()
    expect(first.refreshToken).toBeTruthy()

    // Wait until the gateway refuses the access token for real.
    const expiredAt = Date.parse(first.expiresAt) + JWT_CLOCK_TOLERANCE_SECONDS * 1000 + 1_000
    await new Promise((r) => setTimeout(r, Math.max(0, expiredAt - Date.now())))
    const refused = await fetch(`${base}/api/v1/organizations`, {
      headers: { authorization: `Bearer ${first.accessToken}` },
    })
    expect(refused.status).toBe(401)

    // 1. The session file still claims the token is valid (say, clocks disagree): the command
    //    meets the 401, renews the session and succeeds.
    writeFileSync(
      env.PM_CONFIG ?? '',
      JSON.stringify({ ...first, expiresAt: new Date(Date.now() + 3_600_000).toISOString() }),
      { mode: 0o600 },
    )
    const afterExpiry = await pm(
      ['keys', 'create', '--name', 'after-expiry', '--scopes', 'prompts:read'],
      env,
    )
    expect(afterExpiry.stderr).toBe('')
    expect(afterExpiry.code).toBe(0)
    const second = saved()
    expect(second.accessToken).not.toBe(first.accessToken)
    expect(second.refreshToken).not.toBe(first.refreshToken)

    // 2. The session file says the token has expired: it is renewed before the command.
    writeFileSync(
      env.PM_CONFIG ?? '',
      JSON.stringify({ ...second, expiresAt: new Date(Date.now() - 1_000).toISOString() }),
      { mode: 0o600 },
    )
    const listed = await pm(['keys', 'list'], env)
    expect(listed.code, listed.stderr).toBe(0)
    expect(listed.stdout).toContain('after-expiry')
    const third = saved()
    expect(third.refreshToken).not.toBe(second.refreshToken)

    // The spent refresh token is refused by the service (rotation), and reusing it ends the
    // whole family: the session's current refresh token is refused from then on too.
    const refresh = (refreshToken: string) =>
      fetch(`${base}/api/v1/auth/refresh`, {
        method: 'POST',
        headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ refreshToken }),
      })
    expect((await refresh(first.refreshToken)).status).toBe(401)
    expect((await refresh(third.refreshToken)).status).toBe(401)
  })
})
