import { main, metricsFor, runServer, tracingFor } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadWebhooksConfig } from './config.ts'

await main(async () => {
  const config = loadWebhooksConfig()
  const metrics = metricsFor(config)
  const tracing = await tracingFor(config, 'webhooks')
  const app = await buildApp({ config, metrics, tracing })
  await runServer(app, {
    host: config.HOST,
    port: config.PORT,
    metrics,
    metricsPort: config.METRICS_PORT,
    tracing,
  })
})
