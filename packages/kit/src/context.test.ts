import { describe, expect, it } from 'vitest'
import { signContext, verifyContext } from './context.ts'

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
