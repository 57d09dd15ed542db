import { forgetPrivateServers } from './packages/testkit/src/servers.ts'

// Integration files share their worker's modules (vitest.base.ts, `isolate: false`): this runs
// before each file, stopping the private NATS and Redis of the file before it in this worker, so
// that each file still gets servers of its own (packages/testkit/src/privateServers.ts).
forgetPrivateServers()
