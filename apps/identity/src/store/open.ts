import { join } from 'node:path'
import type { IdentityConfig } from '../config.ts'
import { SqliteIdentityStore } from './sqlite.ts'
import type { IdentityStore } from './types.ts'

/** MongoDB when MONGO_URL is set, else the SQLite file `identity.db` under DATA_DIR. */
export async function openIdentityStore(
  config: Pick<IdentityConfig, 'MONGO_URL' | 'MONGO_DB' | 'DATA_DIR'>,
): Promise<IdentityStore> {
  if (config.MONGO_URL) {
    // The driver and the store load only here: a service on SQLite never loads them.
    const [{ connectMongo }, { MongoIdentityStore }] = await Promise.all([
      import('@pm/kit/mongo'),
      import('./mongo.ts'),
    ])
    const store = new MongoIdentityStore(
      await connectMongo(config.MONGO_URL),
      config.MONGO_DB ?? 'pm_identity',
    )
    await store.init()
    return store
  }
  return new SqliteIdentityStore(join(config.DATA_DIR, 'identity.db'))
}
