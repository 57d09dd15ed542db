import { describe, expect, it } from 'vitest'
import { Authenticator } from '../src/auth.ts'
import type { IdentityClient, MembershipInfo } from '../src/identityClient.ts'

const ORG = 'a1'.repeat(12)
const USER = 'b2'.repeat(12)
const ACTIVE = { role: 'MEMBER', status: 'ACTIVE' } as MembershipInfo

/** Identity's membership answers, one per call, each released when the test says so. */
function identityAnswering() {
  const calls: { release: (m: MembershipInfo | null) => void }[] = []
  const identity = {
    membership: () =>
      new Promise<MembershipInfo | null>((resolve) => {
        calls.push({ release: resolve })
      }),
  } as unknown as IdentityClient
  const auth = new Authenticator(identity, {
    identityUrl: 'http://127.0.0.1:9',
    issuer: 'i',
    audience: 'a',
    clockToleranceSeconds: 0,
    keyCacheTtlMs: 60_000,
    membershipCacheTtlMs: 60_000,
  })
  return { auth, calls }
}

const settle = () => new Promise((resolve) => setImmediate(resolve))

describe('the membership cache and the membership broadcast', () => {
  it('caches an ACTIVE answer: the next request does not ask identity', async () => {
    const { auth, calls } = identityAnswering()
    const first = auth.activeMember(ORG, USER, 'r1')
    await settle()
    calls[0]?.release(ACTIVE)
    expect(await first).toMatchObject({ role: 'MEMBER' })
    expect(await auth.activeMember(ORG, USER, 'r2')).toMatchObject({ role: 'MEMBER' })
    expect(calls).toHaveLength(1)
  })

  it('does not cache an answer from before a removal that was broadcast while it was asked', async () => {
    const { auth, calls } = identityAnswering()
    const pending = auth.activeMember(ORG, USER, 'r1')
    await settle()
    // The member is removed; the broadcast arrives while the first lookup is in flight, and that
    // lookup then answers what identity knew before the removal.
    auth.membershipChanged(ORG, USER)
    calls[0]?.release(ACTIVE)
    await settle()
    // Asked again: identity now says there is no membership.
    expect(calls).toHaveLength(2)
    calls[1]?.release(null)
    expect(await pending).toBeNull()
    // Nothing was cached: the next request asks identity again, and is refused again.
    const next = auth.activeMember(ORG, USER, 'r2')
    await settle()
    expect(calls).toHaveLength(3)
    calls[2]?.release(null)
    expect(await next).toBeNull()
  })

  it('does not cache either when the membership changes again during the second question', async () => {
    const { auth, calls } = identityAnswering()
    const pending = auth.activeMember(ORG, USER, 'r1')
    await settle()
    auth.membershipChanged(ORG, USER)
    calls[0]?.release(ACTIVE)
    await settle()
    auth.membershipChanged(ORG, USER)
    calls[1]?.release(ACTIVE)
    // The newest answer is used for this request (asked after the first change) but not kept.
    expect(await pending).toMatchObject({ role: 'MEMBER' })
    const next = auth.activeMember(ORG, USER, 'r2')
    await settle()
    expect(calls).toHaveLength(3)
    calls[2]?.release(ACTIVE)
    expect(await next).toMatchObject({ role: 'MEMBER' })
  })
})
