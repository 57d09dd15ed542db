import { main, metricsFor, runServer, tracingFor } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadPromptsConfig } from './config.ts'

await main(async () => {
  const config = loadPromptsConfig()
  const metrics = metricsFor(config)
  const tracing = await tracingFor(config, 'prompts')
  const app = await buildApp({ config, metrics, tracing })
  await runServer(app, {
    host: config.HOST,
    port: config.PORT,
    metrics,
    metricsPort: config.METRICS_PORT,
    tracing,
  })
})
