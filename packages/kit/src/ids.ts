import { randomFillSync, randomInt } from 'node:crypto'

/**
 * Random bytes drawn 4 KiB at a time (one call into the CSPRNG per 512 ids instead of one per
 * id, as `crypto.randomUUID` does with its own cache); each byte is used once.
 */
const pool = Buffer.alloc(4096)
let offset = pool.length

/** `bytes` random bytes (at most 4096) from the pool: a view of it, to be read before the next draw. */
export function randomBytesView(bytes: number): Buffer {
  if (offset + bytes > pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  const view = pool.subarray(offset, offset + bytes)
  offset += bytes
  return view
}

/** `bytes` random bytes (at most 4096) as lowercase hex, from the pool. */
export function randomHex(bytes: number): string {
  return randomBytesView(bytes).toString('hex')
}

/** This process's part of every id it makes: 5 random bytes, as in a MongoDB ObjectId. */
const processPart = randomHex(5)
/** The ids' counter, from a random start below 2^23, so that 8 million ids come before it wraps. */
let counter = randomInt(0x800000)

/**
 * A 24-hex identifier laid out like a MongoDB ObjectId: 4-byte seconds, 5 random bytes of this
 * process, a 3-byte counter. Ids look and sort the same in every store, and those one process
 * makes sort in the order it made them: the stores order lists, the outbox and the audit log by
 * their time and then by id, and records made within one millisecond keep their order.
 */
export function newId(): string {
  const time = Math.floor(Date.now() / 1000)
    .toString(16)
    .padStart(8, '0')
  counter = (counter + 1) % 0x1000000
  return time + processPart + counter.toString(16).padStart(6, '0')
}

export function isId(value: unknown): value is string {
  return typeof value === 'string' && /^[0-9a-f]{24}$/.test(value)
}
