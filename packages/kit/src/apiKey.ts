import { hash, randomInt } from 'node:crypto'
import { crc32 } from 'node:zlib'

/**
 * API keys: `pk_` + 32 random base62 characters + a 6-character base62 CRC-32 checksum of
 * those 32. The checksum lets the gateway refuse a mistyped or made-up key before any
 * lookup. Only the SHA-256 of the whole key is stored.
 */
const ALPHABET = '0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'
const BODY_LENGTH = 32
const CHECK_LENGTH = 6
const KEY_PATTERN = /^pk_[0-9A-Za-z]{38}$/

function base62(value: number, width: number): string {
  let out = ''
  let n = value
  for (let i = 0; i < width; i++) {
    out = ALPHABET.charAt(n % 62) + out
    n = Math.floor(n / 62)
  }
  return out
}

function checksum(body: string): string {
  return base62(crc32(body) >>> 0, CHECK_LENGTH)
}

export function generateApiKey(): string {
  let body = ''
  for (let i = 0; i < BODY_LENGTH; i++) body += ALPHABET.charAt(randomInt(62))
  return `pk_${body}${checksum(body)}`
}

/** Format and checksum only; says nothing about whether the key exists. */
export function isWellFormedApiKey(key: string): boolean {
  if (!KEY_PATTERN.test(key)) return false
  const body = key.slice(3, 3 + BODY_LENGTH)
  return key.slice(3 + BODY_LENGTH) === checksum(body)
}

export function hashApiKey(key: string): string {
  // One-shot hash: the gateway computes this on every request with an API key.
  return hash('sha256', key, 'hex')
}

/** What lists show instead of the key: enough to recognise it, not to use it. */
export function apiKeyPrefix(key: string): string {
  return key.slice(0, 10)
}
