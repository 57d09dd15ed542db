import type { AuditEntry } from '@pm/contracts'
import {
  type ClientSession,
  type Collection,
  DBRef,
  type Db,
  type Document,
  MongoBulkWriteError,
  MongoClient,
  MongoServerError,
  type TransactionOptions,
} from 'mongodb'
import type { AuditOutbox } from './audit.ts'

/**
 * What the stores on MongoDB share: `@pm/kit/mongo`, apart from the package's main entry, so
 * that a service on SQLite (the embedded default, the tests) never loads the driver (about 170
 * ms of CPU a process start); a service imports this and its MongoDB store only when MONGO_URL
 * is set.
 */

/** One client per process; the driver pools connections. */
export async function connectMongo(url: string): Promise<MongoClient> {
  const client = new MongoClient(url, { serverSelectionTimeoutMS: 5_000 })
  await client.connect()
  return client
}

// ---------------------------------------------------------------------------------------------
// User JSON (a prompt's config, a dataset item's variables, a run's params, a JSON schema): stored
// as it came, except the objects the driver would not read back as objects.

/**
 * The key of an object stored as its entries: `{ [ENTRIES]: [[key, value], ...] }`.
 */
const ENTRIES = '$pmEntries'

const DBREF_KEYS = new Set(['$ref', '$id', '$db'])

function isPlainObject(value: unknown): value is Record<string, unknown> {
  if (value === null || typeof value !== 'object' || Array.isArray(value)) return false
  const proto = Object.getPrototypeOf(value)
  return proto === Object.prototype || proto === null
}

/**
 * Whether the BSON parser would turn this object into a `DBRef` on the way back: every `$`-prefixed
 * key it has is `$ref`, `$id` or `$db` (bson's deserializer, `allowedDBRefKeys` and
 * `isDBRefLike`), or it has the marker key itself. The marker makes the stored object hold a
 * `$`-key outside those three, so the parser leaves it a plain object.
 */
function needsEntries(value: Record<string, unknown>): boolean {
  let dollar = false
  for (const key of Object.keys(value)) {
    if (key === ENTRIES) return true
    if (key.startsWith('$')) {
      if (!DBREF_KEYS.has(key)) return false
      dollar = true
    }
  }
  return dollar
}

/**
 * User JSON as it is written to MongoDB. The driver's BSON parser turns any embedded object whose
 * only `$`-keys are `$ref`/`$id`/`$db` (a string `$ref`, a non-null `$id`) into a `DBRef` instance,
 * with no option to turn that off, and its constructor splits a `$ref` with one dot into db and
 * collection: `{"$ref": "#/defs/a.b", "$id": "x"}` in a JSON schema came back as a DBRef whose
 * JSON says `"$ref": "b", "$db": "#/defs/a"`. Such objects are stored as their entries instead;
 * everything else is stored unchanged (documents written before read the same).
 */
export function toMongoJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => toMongoJson(v)) as T
  if (!isPlainObject(value)) return value
  if (needsEntries(value)) {
    return { [ENTRIES]: Object.entries(value).map(([k, v]) => [k, toMongoJson(v)]) } as T
  }
  const out: Record<string, unknown> = {}
  for (const [k, v] of Object.entries(value)) setKey(out, k, toMongoJson(v))
  return out as T
}

/** User JSON as read from MongoDB: the inverse of `toMongoJson` (a DBRef stored before: its JSON). */
export function fromMongoJson<T>(value: T): T {
  if (Array.isArray(value)) return value.map((v) => fromMongoJson(v)) as T
  if (value instanceof DBRef) return fromMongoJson(value.toJSON()) as T
  if (!isPlainObject(value)) return value
  const keys = Object.keys(value)
  const entries = value[ENTRIES]
  const out: Record<string, unknown> = {}
  if (keys.length === 1 && Array.isArray(entries)) {
    for (const pair of entries as [string, unknown][]) setKey(out, pair[0], fromMongoJson(pair[1]))
    return out as T
  }
  for (const k of keys) setKey(out, k, fromMongoJson(value[k]))
  return out as T
}

/** Sets a key as data, `__proto__` included (no prototype change). */
function setKey(target: Record<string, unknown>, key: string, value: unknown): void {
  if (key === '__proto__') {
    Object.defineProperty(target, key, { value, writable: true, enumerable: true, configurable: true })
  } else target[key] = value
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

// ---------------------------------------------------------------------------------------------
// The audit outbox (audit.ts): a collection written in the change's multi-document transaction.

/** An outbox document: its `_id` is the entry's id. */
export interface AuditOutboxDoc {
  _id: string
  entry: AuditEntry
  createdAt: string
  sentAt: string | null
}

/**
 * Runs `fn` in a transaction (TRANSACTION_OPTIONS) and returns what it returned. The driver may
 * run `fn` more than once (a transient error retries the whole transaction): `fn` must pass the
 * session to every operation and must not swallow their errors.
 */
export async function mongoTransaction<T>(
  client: MongoClient,
  fn: (session: ClientSession) => Promise<T>,
): Promise<T> {
  const session = client.startSession({ defaultTransactionOptions: TRANSACTION_OPTIONS })
  try {
    return await session.withTransaction(() => fn(session))
  } finally {
    await session.endSession()
  }
}

/**
 * Creates a collection that only transactions write to, so that no transaction has to create
 * it (allowed since MongoDB 4.4, but not in a cross-shard transaction).
 */
export async function ensureCollection(db: Db, name: string): Promise<void> {
  const found = await db.listCollections({ name }, { nameOnly: true }).toArray()
  if (found.length > 0) return
  try {
    await db.createCollection(name)
  } catch (err) {
    // Another replica created it at the same moment (NamespaceExists).
    if (!(err instanceof MongoServerError && err.code === 48)) throw err
  }
}

/** The `audit_outbox` collection of a service's database. */
export class MongoAuditOutbox implements AuditOutbox {
  private readonly db: Db
  private readonly docs: Collection<AuditOutboxDoc>

  constructor(db: Db) {
    this.db = db
    this.docs = db.collection<AuditOutboxDoc>('audit_outbox')
  }

  async init(): Promise<void> {
    await ensureCollection(this.db, 'audit_outbox')
    // pendingAudit's filter and sort, tie-break included: no in-memory sort.
    await this.docs.createIndex({ sentAt: 1, createdAt: 1, _id: 1 })
  }

  /** Inserts entries in the change's transaction (`session`). */
  async insert(entries: readonly AuditEntry[], session: ClientSession): Promise<void> {
    if (entries.length === 0) return
    await this.docs.insertMany(
      entries.map((entry) => ({ _id: entry.id, entry, createdAt: entry.at, sentAt: null })),
      { session },
    )
  }

  async pendingAudit(limit: number): Promise<AuditEntry[]> {
    const docs = await this.docs.find({ sentAt: null }).sort({ createdAt: 1, _id: 1 }).limit(limit).toArray()
    return docs.map((d) => d.entry)
  }

  async markAuditSent(ids: string[], at: string): Promise<void> {
    if (ids.length === 0) return
    await this.docs.updateMany({ _id: { $in: ids } }, { $set: { sentAt: at } })
  }

  async pruneAuditOutbox(before: string): Promise<number> {
    // `$lt` with a string matches strings only: unsent entries (null) stay.
    return (await this.docs.deleteMany({ sentAt: { $lt: before } })).deletedCount
  }
}

/**
 * A start-up re-seal of a collection's sealed secrets (SecretBox): each document's `sealed` field
 * and its optional `alsoSealed` one go through `reseal` (null: left as it is) and are written
 * back by compare-and-set, so a replica that re-sealed it (or an update that replaced it) first
 * wins and nothing is sealed twice; a document changed between the read and the write is read
 * again, a few times. How many documents changed.
 */
export async function resealFields(
  collection: Collection<Document>,
  sealed: string,
  alsoSealed: string,
  reseal: (id: string, stored: string) => string | null,
): Promise<number> {
  let n = 0
  const projection = { _id: 1, [sealed]: 1, [alsoSealed]: 1 }
  for await (const first of collection.find({}, { projection })) {
    let doc: Document | null = first
    for (let attempt = 0; doc && attempt < 5; attempt++) {
      const id = String(doc._id)
      const current = String(doc[sealed])
      const second = (doc[alsoSealed] as string | null | undefined) ?? null
      const next = reseal(id, current)
      const nextSecond = second === null ? null : reseal(id, second)
      if (next === null && nextSecond === null) break
      // `alsoSealed: null` also matches a document without the field.
      const res = await collection.updateOne(
        { _id: doc._id, [sealed]: current, [alsoSealed]: second },
        { $set: { [sealed]: next ?? current, ...(nextSecond === null ? {} : { [alsoSealed]: nextSecond }) } },
      )
      if (res.matchedCount === 1) {
        n += res.modifiedCount
        break
      }
      doc = await collection.findOne({ _id: doc._id }, { projection })
    }
  }
  return n
}
