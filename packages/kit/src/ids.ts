import { randomFillSync } from 'node:crypto'

/**
 * Random bytes drawn 4 KiB at a time (one call into the CSPRNG per 512 ids instead of one per
 * id, as `crypto.randomUUID` does with its own cache); each byte is used once.
 */
const pool = Buffer.alloc(4096)
let offset = pool.length

/** `bytes` random bytes (at most 4096) as lowercase hex, from the pool. */
export function randomHex(bytes: number): string {
  if (offset + bytes > pool.length) {
    randomFillSync(pool)
    offset = 0
  }
  const hex = pool.toString('hex', offset, offset + bytes)
  offset += bytes
  return hex
}

/**
 * A 24-hex identifier laid out like a MongoDB ObjectId (4-byte seconds, then random),
 * so that ids look and sort the same in every store.
 */
export function newId(): string {
  const time = Math.floor(Date.now() / 1000)
    .toString(16)
    .padStart(8, '0')
  return time + randomHex(8)
}

export function isId(value: unknown): value is string {
  return typeof value === 'string' && /^[0-9a-f]{24}$/.test(value)
}
