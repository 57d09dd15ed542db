import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { startEmbedded } from '@pm/embedded'
import { childEnv, freePort } from '@pm/testkit'
import { call } from './client.ts'

export interface Tenant {
  email: string
  accessToken: string
  organizationId: string
  userId: string
}

export interface InProcess {
  base: string
  /** Signs a new user up (their own workspace, OWNER). */
  signUp(label: string): Promise<Tenant>
  close(): Promise<void>
}

/** The embedded default in this very process, with sign-up on and quiet logs. */
export async function startInProcess(env: Record<string, string> = {}): Promise<InProcess> {
  const dataDir = mkdtempSync(join(tmpdir(), 'pm-inproc-'))
  const embedded = await startEmbedded({
    PORT: String(await freePort()),
    HOST: '127.0.0.1',
    DATA_DIR: dataDir,
    LOG_LEVEL: 'fatal',
    AUTH_ALLOW_SIGNUP: 'true',
    // The run's settings a spawned service would get (childEnv): the password hash cost, say.
    ...childEnv({}),
    ...env,
  })
  let n = 0
  return {
    base: embedded.url,
    signUp: async (label) => {
      n++
      const email = `${label}-${n}-${Date.now()}@example.com`
      const res = await call<{
        data: { accessToken: string; organizationId: string; user: { _id: string } }
      }>(embedded.url, 'POST', '/api/v1/auth/register', {
        body: { email, password: 'correct horse battery staple', name: label },
      })
      if (res.status !== 201) throw new Error(`sign-up answered ${res.status}: ${JSON.stringify(res.body)}`)
      const { accessToken, organizationId, user } = res.body.data
      return { email, accessToken, organizationId, userId: user._id }
    },
    close: async () => {
      await embedded.close()
      rmSync(dataDir, { recursive: true, force: true })
    },
  }
}
