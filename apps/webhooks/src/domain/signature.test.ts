import { createHmac } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import { describe, expect, it } from 'vitest'
import { generateSecret, secretKeyBytes, signDelivery, verifyServiceSignature } from './signature.ts'

const body = JSON.stringify({ type: 'prompt.updated', data: { id: 'p_1', text: 'héllo ✓' } })
const now = () => Math.floor(Date.now() / 1000)

describe('generateSecret', () => {
  it('is whsec_ followed by base64 of 32 random bytes', () => {
    const secret = generateSecret()
    expect(secret).toMatch(/^whsec_[A-Za-z0-9+/]{43}=$/)
    expect(Buffer.from(secret.slice('whsec_'.length), 'base64')).toHaveLength(32)
    expect(generateSecret()).not.toBe(secret)
  })

  it('rejects malformed secrets instead of signing with them', () => {
    expect(() => secretKeyBytes('whsec_')).toThrow()
    expect(() => secretKeyBytes('whsec_not base64!')).toThrow()
  })
})

describe('signDelivery', () => {
  it('produces headers the standardwebhooks library verifies', () => {
    const secret = generateSecret()
    const headers = signDelivery({
      secret,
      eventId: 'evt_1',
      deliveryId: 'dlv_1',
      body,
      timestampSeconds: now(),
    })
    expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body))
    expect(headers['content-type']).toBe('application/json')
    expect(headers['webhook-id']).toBe('evt_1')
  })

  it('fails standardwebhooks verification when the body or id is changed', () => {
    const secret = generateSecret()
    const headers = signDelivery({ secret, eventId: 'evt_1', body, timestampSeconds: now() })
    expect(() => new Webhook(secret).verify(`${body} `, headers)).toThrow()
    expect(() => new Webhook(secret).verify(body, { ...headers, 'webhook-id': 'evt_2' })).toThrow()
    expect(() => new Webhook(generateSecret()).verify(body, headers)).toThrow()
  })

  it('signs X-Service-Signature as hex HMAC-SHA256 of "<t>.<body>" keyed by the decoded secret', () => {
    const secret = generateSecret()
    const t = 1_700_000_000
    const headers = signDelivery({ secret, eventId: 'evt_1', body, timestampSeconds: t })
    const key = Buffer.from(secret.slice('whsec_'.length), 'base64')
    const v1 = createHmac('sha256', key).update(`${t}.${body}`).digest('hex')
    expect(headers['X-Service-Signature']).toBe(`t=${t},v1=${v1}`)
    expect(headers['webhook-timestamp']).toBe(String(t))
    const std = createHmac('sha256', key).update(`evt_1.${t}.${body}`).digest('base64')
    expect(headers['webhook-signature']).toBe(`v1,${std}`)
  })

  it('during a rotation signs with both secrets, the current one first; either verifies, a third does not', () => {
    const current = generateSecret()
    const previous = generateSecret()
    const t = now()
    const headers = signDelivery({
      secret: current,
      previousSecret: previous,
      eventId: 'evt_1',
      body,
      timestampSeconds: t,
    })
    const sig = (secret: string, data: string, encoding: 'hex' | 'base64') =>
      createHmac('sha256', secretKeyBytes(secret)).update(data).digest(encoding)
    expect(headers['X-Service-Signature']).toBe(
      `t=${t},v1=${sig(current, `${t}.${body}`, 'hex')},v1=${sig(previous, `${t}.${body}`, 'hex')}`,
    )
    expect(headers['webhook-signature']).toBe(
      `v1,${sig(current, `evt_1.${t}.${body}`, 'base64')} v1,${sig(previous, `evt_1.${t}.${body}`, 'base64')}`,
    )
    for (const secret of [current, previous]) {
      expect(new Webhook(secret).verify(body, headers)).toEqual(JSON.parse(body))
      expect(verifyServiceSignature(headers['X-Service-Signature'], body, secret)).toBe(true)
    }
    const other = generateSecret()
    expect(() => new Webhook(other).verify(body, headers)).toThrow()
    expect(verifyServiceSignature(headers['X-Service-Signature'], body, other)).toBe(false)
  })
})

describe('verifyServiceSignature', () => {
  const secret = generateSecret()
  const t = 1_700_000_000
  const header = signDelivery({ secret, eventId: 'evt_1', body, timestampSeconds: t })['X-Service-Signature']

  it('accepts a fresh, matching signature', () => {
    expect(verifyServiceSignature(header, body, secret, 300, t + 10)).toBe(true)
    expect(verifyServiceSignature(header, body, secret, 300, t - 10)).toBe(true)
  })

  it('accepts the current time by default', () => {
    const fresh = signDelivery({ secret, eventId: 'e', body, timestampSeconds: now() })['X-Service-Signature']
    expect(verifyServiceSignature(fresh, body, secret)).toBe(true)
  })

  it('rejects a tampered body, another secret, or a stale timestamp', () => {
    expect(verifyServiceSignature(header, `${body}x`, secret, 300, t)).toBe(false)
    expect(verifyServiceSignature(header, body, generateSecret(), 300, t)).toBe(false)
    expect(verifyServiceSignature(header, body, secret, 300, t + 301)).toBe(false)
    expect(verifyServiceSignature(header, body, secret, 300, t - 301)).toBe(false)
  })

  it('rejects a timestamp swapped into a valid signature', () => {
    const swapped = header?.replace(`t=${t}`, `t=${t + 1}`)
    expect(verifyServiceSignature(swapped, body, secret, 300, t)).toBe(false)
  })

  it('rejects malformed headers without throwing', () => {
    for (const bad of [
      undefined,
      null,
      '',
      'garbage',
      `t=${t}`,
      'v1=abcd',
      `t=${t},v1=zz`,
      `t=abc,v1=${'0'.repeat(64)}`,
    ]) {
      expect(verifyServiceSignature(bad, body, secret, 300, t)).toBe(false)
    }
  })

  it('accepts any of several v1 entries, as during secret rotation', () => {
    const other = signDelivery({ secret: generateSecret(), eventId: 'e', body, timestampSeconds: t })
    const otherV1 = other['X-Service-Signature']?.split(',v1=')[1]
    const v1 = header?.split(',v1=')[1]
    expect(verifyServiceSignature(`t=${t},v1=${otherV1},v1=${v1}`, body, secret, 300, t)).toBe(true)
  })
})
