/** The local provider in a process of its own, for the run bench: prints its URL once listening. */
import { startFakeProvider } from '@pm/fakeprovider'

const fake = await startFakeProvider({ port: Number(process.env.PORT ?? 0) })
process.stdout.write(`${fake.url}\n`)
const stop = () => {
  fake.close().then(() => process.exit(0))
}
process.once('SIGTERM', stop)
process.once('SIGINT', stop)
