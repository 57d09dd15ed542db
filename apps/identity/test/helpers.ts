import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { Writable } from 'node:stream'
import { MemoryBus } from '@pm/bus'
import type { CallerContext, Role, Scope } from '@pm/contracts'
import { type Service, signContext } from '@pm/kit'
import { buildApp } from '../src/app.ts'
import { loadIdentityConfig } from '../src/config.ts'
import { SqliteIdentityStore } from '../src/store/sqlite.ts'

export const SECRET = 'test-internal-secret-0123456789abcdef'

export interface TestIdentity {
  app: Service
  store: SqliteIdentityStore
  bus: MemoryBus
  /** Every broadcast the app sent, by subject. */
  broadcasts: Array<{ subject: string; data: unknown }>
  /** Every log line the app wrote. */
  logs: string[]
  close(): Promise<void>
}

/** Password hashes of 2^10 rather than 2^15 (PASSWORD_HASH_COST): a test hashes many times. */
export const TEST_PASSWORD_COST = 10

/** identity on a fresh SQLite file and an in-process bus; the caller closes it. */
export async function startIdentity(env: Record<string, string> = {}): Promise<TestIdentity> {
  const dir = mkdtempSync(join(tmpdir(), 'pm-identity-test-'))
  const config = loadIdentityConfig({
    INTERNAL_AUTH_SECRET: SECRET,
    DATA_DIR: dir,
    NODE_ENV: 'test',
    LOG_LEVEL: 'debug',
    PASSWORD_HASH_COST: String(TEST_PASSWORD_COST),
    ...env,
  })
  const store = new SqliteIdentityStore(join(dir, 'identity.db'))
  const bus = new MemoryBus()
  const broadcasts: TestIdentity['broadcasts'] = []
  const original = bus.broadcast.bind(bus)
  bus.broadcast = (subject, data) => {
    broadcasts.push({ subject, data })
    original(subject, data)
  }
  const logs: string[] = []
  const logStream = new Writable({
    write(chunk: Buffer, _enc, done) {
      for (const line of chunk.toString('utf8').split('\n')) if (line) logs.push(line)
      done()
    },
  })
  const app = await buildApp({ config, store, bus, logStream })
  return {
    app,
    store,
    bus,
    broadcasts,
    logs,
    close: async () => {
      await app.close()
      await store.close()
      await bus.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}

export function userContext(
  userId: string,
  organizationId?: string,
  role?: Role,
  scopes: Scope[] = role === 'MEMBER'
    ? ['prompts:read', 'prompts:write', 'organization:read']
    : ['prompts:read', 'prompts:write', 'organization:read', 'organization:write'],
): string {
  const context: CallerContext = {
    kind: 'user',
    userId,
    scopes: role ? scopes : [],
    requestId: 'test',
    ...(organizationId ? { organizationId } : {}),
    ...(role ? { role } : {}),
  }
  return signContext(context, SECRET)
}

export function keyContext(apiKeyId: string, organizationId: string, scopes: Scope[]): string {
  return signContext({ kind: 'apiKey', apiKeyId, organizationId, scopes, requestId: 'test' }, SECRET)
}

export function anonymousContext(): string {
  return signContext({ kind: 'anonymous', scopes: [], requestId: 'test' }, SECRET)
}

export function serviceContext(): string {
  return signContext({ kind: 'service', scopes: [], requestId: 'test' }, SECRET)
}
