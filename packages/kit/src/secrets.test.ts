import { mkdtempSync, readFileSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { describe, expect, it } from 'vitest'
import { ConfigError } from './config.ts'
import { loadSecretBox, SECRET_KEY_FILE, SecretBox, SecretError } from './secrets.ts'

const b64 = (key: Buffer) => key.toString('base64')

describe('SecretBox', () => {
  const box = new SecretBox(SecretBox.generateKey())

  it('seals with a fresh iv and opens again; the clear text is not in the sealed value', () => {
    const a = box.seal('whsec_abcdefghijklmnop', 'sub-1')
    const b = box.seal('whsec_abcdefghijklmnop', 'sub-1')
    expect(a).not.toBe(b)
    expect(a).toMatch(/^enc:v1:[0-9a-f]{8}:/)
    expect(a).not.toContain('whsec')
    expect(box.open(a, 'sub-1')).toBe('whsec_abcdefghijklmnop')
  })

  it('refuses a value sealed for another record, altered, or under an unknown key', () => {
    const sealed = box.seal('s3cret', 'sub-1')
    expect(() => box.open(sealed, 'sub-2')).toThrow(SecretError)
    // The last character but one: all of its bits are the tag's (the last one's lowest are
    // padding), and it becomes another character whatever it was (1 run in 64 it was already 'A').
    const altered = `${sealed.slice(0, -2)}${sealed.at(-2) === 'A' ? 'B' : 'A'}${sealed.slice(-1)}`
    expect(altered).not.toBe(sealed)
    expect(() => box.open(altered, 'sub-1')).toThrow(SecretError)
    expect(() => new SecretBox(SecretBox.generateKey()).open(sealed, 'sub-1')).toThrow(/neither SECRETS_KEY/)
  })

  it('passes a clear (older) value through and says it needs sealing', () => {
    expect(box.open('plain-old')).toBe('plain-old')
    expect(box.needsReseal('plain-old')).toBe(true)
    expect(box.needsReseal(box.seal('x'))).toBe(false)
  })

  it('rotation: the new key opens what the old one sealed when given it as previous', () => {
    const oldKey = SecretBox.generateKey()
    const sealedOld = new SecretBox(oldKey).seal('value', 'ctx')
    const rotated = new SecretBox(SecretBox.generateKey(), [oldKey])
    expect(rotated.open(sealedOld, 'ctx')).toBe('value')
    expect(rotated.needsReseal(sealedOld)).toBe(true)
    const resealed = rotated.seal(rotated.open(sealedOld, 'ctx'), 'ctx')
    expect(rotated.needsReseal(resealed)).toBe(false)
  })
})

describe('loadSecretBox', () => {
  it('uses SECRETS_KEY and SECRETS_KEY_PREVIOUS, refusing a key of the wrong size', () => {
    const key = SecretBox.generateKey()
    const prev = SecretBox.generateKey()
    const box = loadSecretBox({ SECRETS_KEY: b64(key), SECRETS_KEY_PREVIOUS: b64(prev) })
    expect(box.open(new SecretBox(prev).seal('p'))).toBe('p')
    expect(new SecretBox(key).open(box.seal('q'))).toBe('q')
    expect(() => loadSecretBox({ SECRETS_KEY: 'c2hvcnQ=' })).toThrow(/32 bytes/)
  })

  it('refuses to start on MongoDB without SECRETS_KEY', () => {
    expect(() => loadSecretBox({ MONGO_URL: 'mongodb://db/pm' })).toThrow(ConfigError)
    expect(() => loadSecretBox({ MONGO_URL: 'mongodb://db/pm' })).toThrow(/SECRETS_KEY: is required/)
  })

  it('embedded: generates DATA_DIR/secret.key 0600 (dir 0700) whatever the umask, and reuses it', () => {
    const dir = join(mkdtempSync(join(tmpdir(), 'pm-secrets-')), 'data')
    const before = process.umask(0o022)
    try {
      const first = loadSecretBox({ DATA_DIR: dir })
      expect(statSync(dir).mode & 0o777).toBe(0o700)
      expect(statSync(join(dir, SECRET_KEY_FILE)).mode & 0o777).toBe(0o600)
      const again = loadSecretBox({ DATA_DIR: dir })
      expect(again.open(first.seal('same key'))).toBe('same key')
    } finally {
      process.umask(before)
    }
  })

  it('embedded rotation: a new first line seals, the old line still opens', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pm-secrets-'))
    const old = loadSecretBox({ DATA_DIR: dir })
    const sealed = old.seal('kept')
    const file = join(dir, SECRET_KEY_FILE)
    writeFileSync(file, `${b64(SecretBox.generateKey())}\n${readFileSync(file, 'utf8')}`)
    const rotated = loadSecretBox({ DATA_DIR: dir })
    expect(rotated.open(sealed)).toBe('kept')
    expect(rotated.needsReseal(sealed)).toBe(true)
  })
})
