import { randomBytes, scrypt, timingSafeEqual } from 'node:crypto'

/**
 * scrypt (memory-hard, in node:crypto: no native addon). N=2^15, r=8 uses 32 MiB per
 * hash. The parameters are stored with the hash so they can be raised later: a hash is always
 * verified with its own. New hashes get N = 2^cost, `cost` from PASSWORD_HASH_COST (identity's
 * settings; 15 unless set). Only the tests lower it (npm test: 10, about 2 ms a hash instead of
 * 90), as Devise's `stretches` are lowered in a Rails app's test environment.
 */
export const DEFAULT_PASSWORD_COST = 15
const R = 8
const P = 1
const KEY_LENGTH = 32
const MAXMEM = 64 * 1024 * 1024

function derive(password: string, salt: Buffer, n: number, r: number, p: number): Promise<Buffer> {
  return new Promise((resolve, reject) =>
    scrypt(password.normalize('NFKC'), salt, KEY_LENGTH, { N: n, r, p, maxmem: MAXMEM }, (err, key) =>
      err ? reject(err) : resolve(key),
    ),
  )
}

export async function hashPassword(password: string, cost = DEFAULT_PASSWORD_COST): Promise<string> {
  const n = 2 ** cost
  const salt = randomBytes(16)
  const key = await derive(password, salt, n, R, P)
  return `scrypt$${n}$${R}$${P}$${salt.toString('base64')}$${key.toString('base64')}`
}

export async function verifyPassword(password: string, stored: string): Promise<boolean> {
  const [scheme, n, r, p, salt, hash] = stored.split('$')
  if (scheme !== 'scrypt' || !n || !r || !p || !salt || !hash) return false
  const expected = Buffer.from(hash, 'base64')
  const key = await derive(password, Buffer.from(salt, 'base64'), Number(n), Number(r), Number(p))
  return key.length === expected.length && timingSafeEqual(key, expected)
}

/**
 * Verifying against this when the user does not exist keeps the timing the same as for a user
 * whose hash has this cost.
 */
export function dummyHash(cost = DEFAULT_PASSWORD_COST): string {
  return `scrypt$${2 ** cost}$${R}$${P}$${Buffer.alloc(16).toString('base64')}$${Buffer.alloc(KEY_LENGTH).toString('base64')}`
}
