import { mergeConfig } from 'vitest/config'
import base from '../vitest.base.ts'

/**
 * With PM_TEST_PRIVATE_SERVERS=1 (`npm test`), every file gets its own NATS and Redis
 * (packages/testkit/src/privateServers.ts) and its own ports, data folders and processes, so
 * two files run side by side: their time is mostly spent waiting on the processes they start.
 * By hand (NATS_URL / REDIS_URL shared), one file at a time as before.
 */
export default mergeConfig(base, {
  test: process.env.PM_TEST_PRIVATE_SERVERS === '1' ? { maxWorkers: 2 } : {},
})
