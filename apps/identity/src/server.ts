import { main, runServer } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadIdentityConfig } from './config.ts'

await main(async () => {
  const config = loadIdentityConfig()
  const app = await buildApp({ config })
  await runServer(app, { host: config.HOST, port: config.PORT })
})
