import type { PromptsConfig } from './config.ts'
import type { PromptFiles } from './services/files.ts'
import type { Importer } from './services/importer.ts'
import type { PromptsService } from './services/prompts.ts'

/** What the prompts routes are given; route files import this, never app.ts. */
export interface PromptsDeps {
  config: PromptsConfig
  service: PromptsService
  importer: Importer
  /** Prompts as code: export and import of files (issue 30). */
  files: PromptFiles
}
