import { runService } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadGatewayConfig } from './config.ts'

await runService('gateway', loadGatewayConfig, buildApp)
