import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { MemoryBus } from '@pm/bus'
import { type CallerContext, CONTEXT_HEADER, type Scope } from '@pm/contracts'
import { newId, type Service, signContext } from '@pm/kit'
import { buildApp, loadPromptsConfig, type PromptsConfig } from '../src/app.ts'
import { StaticOrgSettings } from '../src/services/orgSettings.ts'
import { SqlitePromptStore } from '../src/store/sqlite.ts'

export interface Harness {
  app: Service
  bus: MemoryBus
  store: SqlitePromptStore
  config: PromptsConfig
  /** The protected environments promotes see (identity's answer, in these tests). */
  orgSettings: StaticOrgSettings
  org: string
  user: string
  /** Signed context headers for a user (default) or another caller in `org`. */
  as(caller?: Partial<CallerContext>): Record<string, string>
  close(): Promise<void>
}

const ALL: Scope[] = ['prompts:read', 'prompts:write', 'organization:read']

/** The prompts service on a fresh SQLite file and an in-process bus, for app.inject tests. */
export async function harness(
  env: Record<string, string> = {},
  /** Another start on the data of an earlier harness (its directory is then kept on close). */
  after?: Pick<Harness, 'config' | 'org' | 'user'>,
): Promise<Harness> {
  const dir = after?.config.DATA_DIR ?? mkdtempSync(join(tmpdir(), 'pm-prompts-'))
  const secret = randomBytes(32).toString('hex')
  const config = loadPromptsConfig({
    INTERNAL_AUTH_SECRET: secret,
    DATA_DIR: dir,
    LOG_LEVEL: 'silent',
    ...env,
  })
  const bus = new MemoryBus(10)
  const store = new SqlitePromptStore(join(dir, 'prompts.db'))
  const orgSettings = new StaticOrgSettings()
  const app = await buildApp({ config, bus, store, orgSettings })
  await app.ready()
  const org = after?.org ?? newId()
  const user = after?.user ?? newId()
  return {
    app,
    bus,
    store,
    config,
    orgSettings,
    org,
    user,
    as: (caller = {}) => ({
      [CONTEXT_HEADER]: signContext(
        {
          kind: 'user',
          userId: user,
          organizationId: org,
          role: 'OWNER',
          scopes: ALL,
          requestId: newId(),
          ...caller,
        },
        secret,
      ),
    }),
    close: async () => {
      await app.close()
      await bus.close()
      await store.close()
      if (!after) rmSync(dir, { recursive: true, force: true })
    },
  }
}

/** A multipart body as a browser or fetch would send it. */
export async function multipart(
  content: string | Buffer,
  field = 'file',
  filename = 'prompts.csv',
): Promise<{ payload: Buffer; headers: Record<string, string> }> {
  const form = new FormData()
  form.append(field, new Blob([content], { type: 'text/csv' }), filename)
  const request = new Request('http://localhost/', { method: 'POST', body: form })
  return {
    payload: Buffer.from(await request.arrayBuffer()),
    headers: { 'content-type': request.headers.get('content-type') ?? '' },
  }
}
