import { createServer, type IncomingHttpHeaders, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'

export interface ReceivedRequest {
  path: string
  headers: IncomingHttpHeaders
  body: string
}

/**
 * A real HTTP receiver on 127.0.0.1 for the tests: records every request, and answers each
 * path from a script of statuses (then 200 once the script is used up).
 */
export class Receiver {
  readonly requests: ReceivedRequest[] = []
  readonly base: string
  private readonly server: Server
  private readonly scripts = new Map<string, number[]>()

  private constructor(server: Server, base: string) {
    this.server = server
    this.base = base
  }

  static async start(): Promise<Receiver> {
    let receiver: Receiver | undefined
    const server = createServer((req, res) => {
      const chunks: Buffer[] = []
      req.on('data', (c: Buffer) => chunks.push(c))
      req.on('end', () => {
        const path = req.url ?? '/'
        receiver?.requests.push({ path, headers: req.headers, body: Buffer.concat(chunks).toString('utf8') })
        const status = receiver?.scripts.get(path)?.shift() ?? 200
        res.writeHead(status, { 'content-type': 'text/plain' }).end(`answered ${status}`)
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    const { port } = server.address() as AddressInfo
    receiver = new Receiver(server, `http://127.0.0.1:${port}`)
    return receiver
  }

  /** The next requests to `path` get these statuses, in order. */
  script(path: string, statuses: number[]): void {
    this.scripts.set(path, [...statuses])
  }

  to(path: string): ReceivedRequest[] {
    return this.requests.filter((r) => r.path === path)
  }

  async close(): Promise<void> {
    this.server.closeAllConnections()
    await new Promise<void>((resolve) => this.server.close(() => resolve()))
  }
}
