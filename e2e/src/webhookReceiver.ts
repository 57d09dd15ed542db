import { createHmac } from 'node:crypto'
import { Webhook } from 'standardwebhooks'
import type { ReceivedWebhook } from '@pm/testkit'

export { WebhookReceiver, type ReceivedWebhook } from '@pm/testkit'

/**
 * Checks `X-Service-Signature` the way a receiver following the docs would, by hand:
 * `t=<unix seconds>,v1=<hex HMAC-SHA256 of "<t>.<raw body>">`, keyed with the base64-decoded
 * part of the `whsec_` secret, and a timestamp within five minutes.
 */
export function verifyByHand(request: ReceivedWebhook, secret: string): boolean {
  const header = request.headers['x-service-signature']
  const match = typeof header === 'string' ? /^t=(\d+),v1=([0-9a-f]{64})$/.exec(header) : null
  if (!match?.[1] || !match[2]) return false
  if (Math.abs(Date.now() / 1000 - Number(match[1])) > 300) return false
  const key = Buffer.from(secret.replace(/^whsec_/, ''), 'base64')
  const expected = createHmac('sha256', key).update(`${match[1]}.${request.body}`, 'utf8').digest('hex')
  return expected === match[2]
}

/** Checks the Standard Webhooks headers with the official `standardwebhooks` library; throws when wrong. */
export function verifyWithLibrary(request: ReceivedWebhook, secret: string): unknown {
  return new Webhook(secret).verify(request.body, request.headers as Record<string, string>)
}
