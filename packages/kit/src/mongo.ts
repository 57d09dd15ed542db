import { MongoClient, MongoServerError } from 'mongodb'

/** One client per process; the driver pools connections. */
export async function connectMongo(url: string): Promise<MongoClient> {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 5_000 })
  await client.connect()
  return client
}

/** True for a duplicate key error (code 11000). */
export function isDuplicateKey(err: unknown): boolean {
  return err instanceof MongoServerError && err.code === 11000
}
