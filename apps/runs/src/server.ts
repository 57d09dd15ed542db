import { runService } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadRunsConfig } from './config.ts'

await runService('runs', loadRunsConfig, buildApp)
