import {
  type Collection,
  type Document,
  MongoBulkWriteError,
  MongoClient,
  MongoServerError,
  type TransactionOptions,
} from 'mongodb'

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

/**
 * The options of every multi-document transaction, stated rather than left to the server's
 * defaults: a snapshot read and a majority write, so that a committed transaction survives a
 * primary change and reads one point in time.
 */
export const TRANSACTION_OPTIONS: TransactionOptions = {
  readPreference: 'primary',
  readConcern: { level: 'snapshot' },
  writeConcern: { w: 'majority' },
}

/**
 * True when an unordered `insertMany` of `attempted` documents failed only because some of them
 * already exist: at least one write error, every one a duplicate key, no write-concern error,
 * and every document accounted for (inserted or a duplicate). Anything else (network error,
 * server selection timeout, election, write-concern failure: a MongoBulkWriteError with no
 * write errors, or with a write-concern error beside them) means documents may be missing and
 * must be rethrown, never counted as done (issue 14, MongoDB store).
 */
export function onlyDuplicateKeys(err: unknown, attempted: number): err is MongoBulkWriteError {
  if (!(err instanceof MongoBulkWriteError)) return false
  const writeErrors = Array.isArray(err.writeErrors) ? err.writeErrors : [err.writeErrors]
  if (writeErrors.length === 0) return false
  if (!writeErrors.every((e) => e?.code === 11000)) return false
  // The write-concern error is `err` when it is the only failure, else in the result.
  if (err.err !== undefined || err.result?.getWriteConcernError() !== undefined) return false
  return err.insertedCount + writeErrors.length === attempted
}

/**
 * Drops an index that a wider one replaced (its key is a prefix of the new one's), so that an
 * existing deployment does not keep maintaining both. Absent index or collection: nothing to do.
 */
export async function dropReplacedIndex<T extends Document>(
  collection: Collection<T>,
  name: string,
): Promise<void> {
  try {
    await collection.dropIndex(name)
  } catch (err) {
    // 27 IndexNotFound, 26 NamespaceNotFound
    if (err instanceof MongoServerError && (err.code === 27 || err.code === 26)) return
    throw err
  }
}
