import type { Connections } from './services/connections.ts'
import type { Runs } from './services/runs.ts'

/** What the runs routes are given; route files import this, never app.ts or the stores. */
export interface RunsDeps {
  connections: Connections
  runs: Runs
  /** RUN_HEARTBEAT_MS: a comment line on a silent stream. */
  heartbeatMs: number
}
