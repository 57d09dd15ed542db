import { main, runServer } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadGatewayConfig } from './config.ts'

await main(async () => {
  const config = loadGatewayConfig()
  const app = await buildApp({ config })
  await runServer(app, { host: config.HOST, port: config.PORT })
})
