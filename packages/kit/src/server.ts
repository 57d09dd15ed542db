import type { FastifyInstance } from 'fastify'
import { ConfigError } from './config.ts'

export interface ListenOptions {
  host: string
  port: number
  /** Hard limit for a graceful shutdown. */
  shutdownTimeoutMs?: number
}

/**
 * Listens, and on SIGTERM/SIGINT stops taking work, lets Fastify's onClose hooks drain
 * consumers and close stores, and exits; a shutdown that hangs is cut off.
 */
export async function runServer(app: FastifyInstance, opts: ListenOptions): Promise<void> {
  let closing = false
  const shutdown = (signal: string) => {
    if (closing) return
    closing = true
    app.log.info({ signal }, 'shutting down')
    const timer = setTimeout(() => {
      app.log.error('shutdown timed out')
      process.exit(1)
    }, opts.shutdownTimeoutMs ?? 10_000)
    timer.unref()
    app.close().then(
      () => process.exit(0),
      (err: unknown) => {
        app.log.error({ err }, 'shutdown failed')
        process.exit(1)
      },
    )
  }
  process.once('SIGTERM', () => shutdown('SIGTERM'))
  process.once('SIGINT', () => shutdown('SIGINT'))
  await app.listen({ host: opts.host, port: opts.port })
}

/** Entry-point wrapper: a configuration error stops the process with its message. */
export async function main(start: () => Promise<void>): Promise<void> {
  try {
    await start()
  } catch (err) {
    if (err instanceof ConfigError) {
      process.stderr.write(`${err.message}\n`)
    } else {
      process.stderr.write(`failed to start: ${(err as Error).stack ?? String(err)}\n`)
    }
    process.exit(1)
  }
}
