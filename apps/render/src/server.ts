import { runService } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadRenderConfig } from './config.ts'

await runService('render', loadRenderConfig, buildApp)
