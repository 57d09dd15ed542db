import { runService } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadWebhooksConfig } from './config.ts'

await runService('webhooks', loadWebhooksConfig, buildApp)
