import { describe, expect, it } from 'vitest'
import {
  CONTEXT_MAX_AGE_MS,
  CONTEXT_REUSE_MS,
  ContextSigner,
  ContextVerifier,
  signContext,
  verifyContext,
} from './context.ts'

const secret = 'x'.repeat(32)

describe('caller context', () => {
  it('round-trips', () => {
    const token = signContext(
      { kind: 'apiKey', apiKeyId: 'k', organizationId: 'o', scopes: ['prompts:read'], requestId: 'r' },
      secret,
    )
    expect(verifyContext(token, secret)).toMatchObject({
      kind: 'apiKey',
      organizationId: 'o',
      scopes: ['prompts:read'],
    })
  })

  it('refuses another secret, a tampered payload and an expired token', () => {
    const token = signContext({ kind: 'user', userId: 'u', scopes: [], requestId: 'r' }, secret)
    expect(verifyContext(token, 'y'.repeat(32))).toBeNull()
    const [payload, mac] = token.split('.')
    const forged = Buffer.from(
      JSON.stringify({ kind: 'user', userId: 'admin', scopes: [], exp: Date.now() + 1e6 }),
    ).toString('base64url')
    expect(verifyContext(`${forged}.${mac}`, secret)).toBeNull()
    expect(verifyContext(`${payload}.${mac}`, secret, Date.now() + 120_000)).toBeNull()
    expect(verifyContext(undefined, secret)).toBeNull()
    expect(verifyContext('garbage', secret)).toBeNull()
  })
})

describe('ContextSigner', () => {
  const base = {
    kind: 'apiKey' as const,
    apiKeyId: 'k',
    organizationId: 'o',
    scopes: ['prompts:read' as const],
  }

  it('reuses a token for the same caller whatever the request id, never across callers', () => {
    const signer = new ContextSigner(secret)
    const now = Date.now()
    const a = signer.sign({ ...base, requestId: 'r1' }, now)
    expect(signer.sign({ ...base, requestId: 'r2' }, now + 1_000)).toBe(a)
    // Every field of the caller is part of the token.
    const variants = [
      { ...base, apiKeyId: 'k2' },
      { ...base, organizationId: 'o2' },
      { ...base, scopes: [] },
      { ...base, kind: 'user' as const },
      { ...base, userId: 'u' },
      { ...base, role: 'OWNER' as const },
      { ...base, targetOrganizationId: 't' },
    ]
    for (const v of variants) {
      const token = signer.sign({ ...v, requestId: 'r' }, now)
      expect(token).not.toBe(a)
      expect(verifyContext(token, secret, now)).toEqual(v)
    }
  })

  it('signs afresh once the reuse window passes, so a sent token is always valid for 30 s', () => {
    const signer = new ContextSigner(secret)
    const now = Date.now()
    const a = signer.sign({ ...base, requestId: 'r' }, now)
    expect(signer.sign({ ...base, requestId: 'r' }, now + CONTEXT_REUSE_MS - 1)).toBe(a)
    const b = signer.sign({ ...base, requestId: 'r' }, now + CONTEXT_REUSE_MS)
    expect(b).not.toBe(a)
    expect(verifyContext(b, secret, now + CONTEXT_REUSE_MS + CONTEXT_MAX_AGE_MS)).toEqual(base)
  })

  it('stays bounded', () => {
    const signer = new ContextSigner(secret, 2)
    const now = Date.now()
    const first = signer.sign({ ...base, apiKeyId: '1', requestId: 'r' }, now)
    signer.sign({ ...base, apiKeyId: '2', requestId: 'r' }, now)
    signer.sign({ ...base, apiKeyId: '3', requestId: 'r' }, now)
    expect(signer.sign({ ...base, apiKeyId: '1', requestId: 'r' }, now + 1)).not.toBe(first)
  })
})

describe('ContextVerifier', () => {
  const context = { kind: 'user' as const, userId: 'u', organizationId: 'o', scopes: [], requestId: 'r' }

  it('verifies once and answers a repeated token from memory until it expires', () => {
    const verifier = new ContextVerifier(secret)
    const now = Date.now()
    const token = signContext(context, secret, now)
    const first = verifier.verify(token, now)
    expect(first).toEqual({ kind: 'user', userId: 'u', organizationId: 'o', scopes: [] })
    expect(verifier.verify(token, now + 1_000)).toBe(first)
    expect(Object.isFrozen(first)).toBe(true)
    expect(verifier.verify(token, now + CONTEXT_MAX_AGE_MS + 1)).toBeNull()
    expect(verifier.verify(token, now + CONTEXT_MAX_AGE_MS + 2)).toBeNull()
  })

  it('refuses forged, tampered, foreign and expired tokens, also after seeing the genuine one', () => {
    const verifier = new ContextVerifier(secret)
    const now = Date.now()
    const token = signContext(context, secret, now)
    expect(verifier.verify(token, now)).not.toBeNull()
    const [payload, signature] = token.split('.')
    const tampered = Buffer.from(JSON.stringify({ ...context, userId: 'admin', exp: now + 60_000 })).toString(
      'base64url',
    )
    expect(verifier.verify(`${tampered}.${signature}`, now)).toBeNull()
    expect(verifier.verify(`${payload}.${signature}x`, now)).toBeNull()
    expect(verifier.verify(`${payload}.`, now)).toBeNull()
    expect(verifier.verify(`.${signature}`, now)).toBeNull()
    expect(verifier.verify(signContext(context, 'y'.repeat(32), now), now)).toBeNull()
    expect(verifier.verify(signContext(context, secret, now - 120_000), now)).toBeNull()
    expect(verifier.verify(undefined, now)).toBeNull()
    // Another service's secret: a token this verifier has cached is still refused there.
    expect(new ContextVerifier('y'.repeat(32)).verify(token, now)).toBeNull()
  })

  it('stays bounded', () => {
    const verifier = new ContextVerifier(secret, 2)
    const now = Date.now()
    const tokens = ['1', '2', '3'].map((userId) => signContext({ ...context, userId }, secret, now))
    for (const t of tokens) expect(verifier.verify(t, now)).not.toBeNull()
    expect((verifier as unknown as { verified: Map<string, unknown> }).verified.size).toBe(2)
  })
})
