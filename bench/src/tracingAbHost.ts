/**
 * The host of `bench:tracing-ab` (tracing-ab.ts): the embedded service several times in this one
 * process, each with its own settings (tracing off, or on at a ratio), data folder and port, so
 * that the variants share one JIT, one heap and one event loop. Reads the variants' settings as
 * JSON from argv, prints one line `{"urls":[...]}` once all are ready, and stops on SIGTERM.
 */
import { startEmbedded } from '@pm/embedded'
import { holdContextFrame } from '@pm/kit'

holdContextFrame()
const envs = JSON.parse(process.argv[2] ?? '[]') as Record<string, string>[]
const started: Awaited<ReturnType<typeof startEmbedded>>[] = []
for (const env of envs) started.push(await startEmbedded(env))
process.stdout.write(`${JSON.stringify({ urls: started.map((s) => s.url) })}\n`)
process.once('SIGTERM', () => {
  Promise.all(started.map((s) => s.close())).then(
    () => process.exit(0),
    () => process.exit(1),
  )
})
