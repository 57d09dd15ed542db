import { join } from 'node:path'
import { connectMongo } from '@pm/kit'
import type { IdentityConfig } from '../config.ts'
import { MongoIdentityStore } from './mongo.ts'
import { SqliteIdentityStore } from './sqlite.ts'
import type { IdentityStore } from './types.ts'

/** MongoDB when MONGO_URL is set, else the SQLite file `identity.db` under DATA_DIR. */
export async function openIdentityStore(
  config: Pick<IdentityConfig, 'MONGO_URL' | 'MONGO_DB' | 'DATA_DIR'>,
): Promise<IdentityStore> {
  if (config.MONGO_URL) {
    const store = new MongoIdentityStore(
      await connectMongo(config.MONGO_URL),
      config.MONGO_DB ?? 'pm_identity',
    )
    await store.init()
    return store
  }
  return new SqliteIdentityStore(join(config.DATA_DIR, 'identity.db'))
}
