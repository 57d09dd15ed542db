import { createCipheriv, createDecipheriv, createHash, randomBytes } from 'node:crypto'
import { chmodSync, readFileSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { Type } from '@sinclair/typebox'
import { ConfigError } from './config.ts'
import { ensurePrivateDir } from './privateFiles.ts'

/**
 * Secrets at rest (webhook signing secrets, provider API keys): AES-256-GCM under a 32-byte
 * key. A stored value reads `enc:v1:<keyId>:<iv>:<ciphertext+tag>` (base64url parts), where
 * keyId names the key that sealed it (the first 8 hex digits of its SHA-256), so that a
 * rotation can tell which values still need re-sealing. See docs/operations.md, "Secrets at
 * rest", for rotation.
 */
export const secretsSettings = {
  /** 32 random bytes, base64 (`openssl rand -base64 32`). Required with MONGO_URL. */
  SECRETS_KEY: Type.Optional(Type.String({ minLength: 1 })),
  /** Earlier keys still accepted for reading during a rotation, comma-separated, base64. */
  SECRETS_KEY_PREVIOUS: Type.Optional(Type.String({ minLength: 1 })),
}

export const SECRET_KEY_FILE = 'secret.key'
const PREFIX = 'enc:v1:'
const ALGORITHM = 'aes-256-gcm'
const IV_BYTES = 12
const TAG_BYTES = 16

export class SecretError extends Error {
  constructor(message: string) {
    super(message)
    this.name = 'SecretError'
  }
}

function keyId(key: Buffer): string {
  return createHash('sha256').update(key).digest('hex').slice(0, 8)
}

/** Parses a base64 key of exactly 32 bytes; `name` is the setting it came from. */
export function parseSecretsKey(value: string, name: string): Buffer {
  const key = Buffer.from(value.trim(), 'base64')
  if (key.length !== 32) {
    throw new ConfigError(
      `${name}: must be 32 bytes, base64-encoded (got ${key.length} bytes); make one with \`openssl rand -base64 32\``,
    )
  }
  return key
}

/** Seals and opens secrets. Seals with the current key; opens with any key it holds. */
export class SecretBox {
  private readonly current: { id: string; key: Buffer }
  private readonly keys = new Map<string, Buffer>()

  constructor(current: Buffer, previous: Buffer[] = []) {
    if (current.length !== 32) throw new SecretError('a secrets key is 32 bytes')
    this.current = { id: keyId(current), key: current }
    for (const key of [current, ...previous]) this.keys.set(keyId(key), key)
  }

  /** A fresh random key, for tests and for the embedded default's key file. */
  static generateKey(): Buffer {
    return randomBytes(32)
  }

  /** Whether a stored value is sealed (as opposed to an older clear value). */
  static isSealed(value: string): boolean {
    return value.startsWith(PREFIX)
  }

  /**
   * Seals `plain`. `context` (e.g. the record's id) is bound to the value as associated data:
   * a sealed value copied onto another record does not open there.
   */
  seal(plain: string, context = ''): string {
    const iv = randomBytes(IV_BYTES)
    const cipher = createCipheriv(ALGORITHM, this.current.key, iv, { authTagLength: TAG_BYTES })
    cipher.setAAD(Buffer.from(context, 'utf8'))
    const body = Buffer.concat([cipher.update(plain, 'utf8'), cipher.final(), cipher.getAuthTag()])
    return `${PREFIX}${this.current.id}:${iv.toString('base64url')}:${body.toString('base64url')}`
  }

  /** Opens a sealed value; a value that is not sealed is returned as it is (clear, from before). */
  open(value: string, context = ''): string {
    if (!SecretBox.isSealed(value)) return value
    const [id, ivPart, bodyPart] = value.slice(PREFIX.length).split(':')
    const key = id ? this.keys.get(id) : undefined
    if (!key || !ivPart || !bodyPart) {
      throw new SecretError(
        `a stored secret was sealed with key ${id ?? '?'}, which is neither SECRETS_KEY nor in SECRETS_KEY_PREVIOUS`,
      )
    }
    const body = Buffer.from(bodyPart, 'base64url')
    if (body.length < TAG_BYTES) throw new SecretError('a stored secret is truncated')
    const decipher = createDecipheriv(ALGORITHM, key, Buffer.from(ivPart, 'base64url'), {
      authTagLength: TAG_BYTES,
    })
    decipher.setAAD(Buffer.from(context, 'utf8'))
    decipher.setAuthTag(body.subarray(body.length - TAG_BYTES))
    try {
      return Buffer.concat([
        decipher.update(body.subarray(0, body.length - TAG_BYTES)),
        decipher.final(),
      ]).toString('utf8')
    } catch {
      throw new SecretError('a stored secret does not open: wrong key, wrong record or altered')
    }
  }

  /** Whether a stored value should be sealed again: clear, or sealed under an earlier key. */
  needsReseal(value: string): boolean {
    if (!SecretBox.isSealed(value)) return true
    return !value.startsWith(`${PREFIX}${this.current.id}:`)
  }
}

/**
 * The key of this process's secrets: SECRETS_KEY (with SECRETS_KEY_PREVIOUS for reading)
 * when set. Without it, a store on MongoDB (the distributed mode) refuses to start, and the
 * embedded default (SQLite under DATA_DIR) reads `DATA_DIR/secret.key`, generating it (0600)
 * on first start. That file holds one base64 key per line: the first seals, the others only
 * open (a rotation in the embedded default puts the new key first).
 */
export function loadSecretBox(settings: {
  SECRETS_KEY?: string
  SECRETS_KEY_PREVIOUS?: string
  MONGO_URL?: string
  DATA_DIR?: string
}): SecretBox {
  const previous = (settings.SECRETS_KEY_PREVIOUS ?? '')
    .split(',')
    .map((s) => s.trim())
    .filter(Boolean)
    .map((k) => parseSecretsKey(k, 'SECRETS_KEY_PREVIOUS'))
  if (settings.SECRETS_KEY)
    return new SecretBox(parseSecretsKey(settings.SECRETS_KEY, 'SECRETS_KEY'), previous)
  if (settings.MONGO_URL) {
    throw new ConfigError(
      'SECRETS_KEY: is required with MONGO_URL (the distributed mode): 32 random bytes, base64, the same for every ' +
        'replica of the service; make one with `openssl rand -base64 32`',
    )
  }
  const dir = settings.DATA_DIR ?? './data'
  ensurePrivateDir(dir)
  const file = join(dir, SECRET_KEY_FILE)
  try {
    // 'wx': only the first starter writes it; a concurrent one reads what that wrote.
    writeFileSync(file, `${SecretBox.generateKey().toString('base64')}\n`, { flag: 'wx', mode: 0o600 })
  } catch (err) {
    if ((err as NodeJS.ErrnoException).code !== 'EEXIST') throw err
  }
  chmodSync(file, 0o600)
  const lines = readFileSync(file, 'utf8')
    .split('\n')
    .map((s) => s.trim())
    .filter(Boolean)
  const [first, ...rest] = lines
  if (!first) throw new ConfigError(`${file}: is empty; delete it only if no secret was ever stored with it`)
  return new SecretBox(parseSecretsKey(first, file), [
    ...rest.map((k) => parseSecretsKey(k, file)),
    ...previous,
  ])
}
