import { main } from '@pm/kit'
import { startEmbedded } from './embedded.ts'

await main(async () => {
  const embedded = await startEmbedded(process.env)
  process.stdout.write(
    `${JSON.stringify({ level: 30, msg: 'prompt service ready (embedded default)', url: embedded.url })}\n`,
  )
  let closing = false
  const stop = () => {
    if (closing) return
    closing = true
    const timer = setTimeout(() => process.exit(1), 10_000)
    timer.unref()
    embedded.close().then(
      () => process.exit(0),
      () => process.exit(1),
    )
  }
  process.once('SIGTERM', stop)
  process.once('SIGINT', stop)
})
