import { runService } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadExperimentsConfig } from './config.ts'

await runService('experiments', loadExperimentsConfig, buildApp)
