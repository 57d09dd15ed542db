import { randomFillSync, randomInt } from 'node:crypto'

/**
 * Random bytes drawn 4 KiB at a time (one call into the CSPRNG per 512 ids instead of one per
 * id, as `crypto.randomUUID` does with its own cache); each byte is used once. No Buffer view of
 * a draw is made: the gateway draws for every request (its sampler's decision, and the unsampled
 * `traceparent` it sends on), and a view made hex through Node's binding took about 1.6 µs of a
 * 2-core VM's CPU for a header's ids, the hex read off the pool's range 1.1 µs, slices of the
 * pool's hex 0.5 µs (a throwaway micro-benchmark, 2026-12-03; docs/decisions.md).
 */
const pool = Buffer.alloc(4096)
/** The pool as lowercase hex, made on the first `randomHexSlice` after each draw of it ('' until then). */
let poolHex = ''
let offset = pool.length

/**
 * `bytes` random bytes (at most 4096) drawn from the pool: where they start in `randomPool`, to be
 * read at once (the next draw may fill the pool anew), as bytes there or as hex by `randomHexAt`.
 */
export function randomDraw(bytes: number): number {
  if (offset + bytes > pool.length) {
    randomFillSync(pool)
    poolHex = ''
    offset = 0
  }
  const at = offset
  offset += bytes
  return at
}

/** The pool `randomDraw` draws from; read only where a draw just said. */
export const randomPool: Readonly<Buffer> = pool

/** The `bytes` bytes at `at` of the pool (a draw just made) as lowercase hex, a string of its own. */
export function randomHexAt(at: number, bytes: number): string {
  return pool.toString('hex', at, at + bytes)
}

/** `bytes` random bytes (at most 4096) as lowercase hex, from the pool: a string of its own. */
export function randomHex(bytes: number): string {
  return randomHexAt(randomDraw(bytes), bytes)
}

/**
 * `bytes` random bytes (at most 4096) as lowercase hex, for a string that is sent and dropped at
 * once (the unsampled `traceparent`): a slice of the pool's hex, which from 7 bytes up V8 keeps as
 * a view of that 8 KiB string, holding all of it while the slice lives. Ids that live (a span's,
 * kept until its batch is sent) take `randomHex`.
 */
export function randomHexSlice(bytes: number): string {
  const at = randomDraw(bytes)
  if (poolHex === '') poolHex = pool.toString('hex')
  return poolHex.slice(2 * at, 2 * (at + bytes))
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
