import { loadOperatingSettings, main } from '@pm/kit'
import { startEmbedded } from './embedded.ts'

await main(async () => {
  // SHUTDOWN_TIMEOUT_MS: how long requests in flight (a streamed run, say) may finish after SIGTERM.
  const { SHUTDOWN_TIMEOUT_MS } = loadOperatingSettings(process.env)
  const embedded = await startEmbedded(process.env)
  process.stdout.write(
    `${JSON.stringify({ level: 30, msg: 'prompt service ready (embedded default)', url: embedded.url })}\n`,
  )
  let closing = false
  const stop = () => {
    if (closing) return
    closing = true
    const timer = setTimeout(() => process.exit(1), SHUTDOWN_TIMEOUT_MS)
    timer.unref()
    embedded.close().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
})
