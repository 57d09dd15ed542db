import { randomBytes } from 'node:crypto'
import { mkdtempSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { mongoUrl } from './servers.ts'

export interface Backend<T> {
  name: 'sqlite' | 'mongodb'
  /** null when the backend cannot run here (MongoDB without MONGO_URL or a container runtime). */
  available: boolean
  open(): Promise<T>
}

/**
 * The backends a repository contract suite runs against: SQLite always (a fresh file per
 * call), MongoDB when MONGO_URL is set or testcontainers finds a runtime (a fresh database
 * per call). Suites use `describe.skipIf(!backend.available)`, so a MongoDB run that could
 * not happen shows as skipped in the report, never as passed.
 */
export async function storeBackends<T>(factories: {
  sqlite: (file: string) => T | Promise<T>
  mongo: (url: string, dbName: string) => Promise<T>
}): Promise<Backend<T>[]> {
  const url = await mongoUrl()
  return [
    {
      name: 'sqlite',
      available: true,
      open: async () => factories.sqlite(join(mkdtempSync(join(tmpdir(), 'pm-store-')), 'test.db')),
    },
    {
      name: 'mongodb',
      available: url !== null,
      open: async () => {
        if (!url) throw new Error('MongoDB is not available: set MONGO_URL')
        return factories.mongo(url, `pm_test_${randomBytes(6).toString('hex')}`)
      },
    },
  ]
}
