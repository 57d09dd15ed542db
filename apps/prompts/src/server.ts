import { main, runServer } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadPromptsConfig } from './config.ts'

await main(async () => {
  const config = loadPromptsConfig()
  const app = await buildApp({ config })
  await runServer(app, { host: config.HOST, port: config.PORT })
})
