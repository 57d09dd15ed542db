import { main, runServer } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadRenderConfig } from './config.ts'

await main(async () => {
  const config = loadRenderConfig()
  const app = await buildApp({ config })
  await runServer(app, { host: config.HOST, port: config.PORT })
})
