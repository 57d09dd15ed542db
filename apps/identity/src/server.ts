import { runService } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadIdentityConfig } from './config.ts'

await runService('identity', loadIdentityConfig, buildApp)
