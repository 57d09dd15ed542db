import { randomBytes } from 'node:crypto'

/**
 * A 24-hex identifier laid out like a MongoDB ObjectId (4-byte seconds, then random),
 * so that ids look and sort the same in every store.
 */
export function newId(): string {
  const time = Math.floor(Date.now() / 1000)
    .toString(16)
    .padStart(8, '0')
  return time + randomBytes(8).toString('hex')
}

export function isId(value: unknown): value is string {
  return typeof value === 'string' && /^[0-9a-f]{24}$/.test(value)
}
