import { createHmac } from 'node:crypto'
import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { Webhook } from 'standardwebhooks'

export interface ReceivedWebhook {
  path: string
  headers: IncomingHttpHeaders
  /** The raw body, as the signatures cover it. */
  body: string
  receivedAt: number
}

/**
 * A real HTTP receiver for webhook deliveries, on 127.0.0.1: records every request and
 * answers each path from a script of statuses (200 once the script is used up).
 */
export class WebhookReceiver {
  readonly requests: ReceivedWebhook[] = []
  readonly base: string
  private readonly server: Server
  private readonly scripts = new Map<string, number[]>()

  private constructor(server: Server, base: string) {
    this.server = server
    this.base = base
  }

  static async start(): Promise<WebhookReceiver> {
    let receiver: WebhookReceiver | undefined
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const path = req.url ?? '/'
        receiver?.requests.push({
          path,
          headers: req.headers,
          body: Buffer.concat(chunks).toString('utf8'),
          receivedAt: Date.now(),
        })
        const status = receiver?.scripts.get(path)?.shift() ?? 200
        res.writeHead(status, { 'content-type': 'text/plain' }).end(`answered ${status}`)
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    receiver = new WebhookReceiver(server, `http://127.0.0.1:${port}`)
    return receiver
  }

  /** The next requests to `path` get these statuses, in order. */
  script(path: string, statuses: number[]): void {
    this.scripts.set(path, [...statuses])
  }

  to(path: string): ReceivedWebhook[] {
    return this.requests.filter((r) => r.path === path)
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}

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
