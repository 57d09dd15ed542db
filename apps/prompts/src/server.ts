import { runService } from '@pm/kit'
import { buildApp } from './app.ts'
import { loadPromptsConfig } from './config.ts'

await runService('prompts', loadPromptsConfig, buildApp)
