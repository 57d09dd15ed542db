import type { ExperimentsConfig } from './config.ts'
import type { ExperimentsService } from './services/experiments.ts'

/** What the routes are given; route files import this, never app.ts or a store. */
export interface ExperimentsDeps {
  config: ExperimentsConfig
  service: ExperimentsService
}
