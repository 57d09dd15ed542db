import type { PromptsConfig } from './config.ts'
import type { Importer } from './services/importer.ts'
import type { PromptsService } from './services/prompts.ts'

/** What the prompts routes are given; route files import this, never app.ts. */
export interface PromptsDeps {
  config: PromptsConfig
  service: PromptsService
  importer: Importer
}
