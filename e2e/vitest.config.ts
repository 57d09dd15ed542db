import { mergeConfig } from 'vitest/config'
import { privateServersAvailable } from '../packages/testkit/src/privateServers.ts'
import base from '../vitest.base.ts'

/**
 * With PM_TEST_PRIVATE_SERVERS=1 (`npm test`) and nats-server and redis-server installed, every
 * file gets its own NATS and Redis (packages/testkit/src/privateServers.ts) besides its own
 * ports, data folders and processes, so files run side by side; much of their time is spent
 * waiting on the processes they start. Three at a time keep the two cores of the machines here
 * busy: two left about a third of them idle (the e2e files alone: 336 s with two, 271 s with
 * three, 266 s with four). Otherwise (NATS_URL / REDIS_URL shared), one file at a time as before.
 *
 * expect.poll gives up after 1 s by default. The browser tests poll the page after each step
 * (a publish, a promotion), which takes longer than that on a loaded 2-core machine; polling
 * ends as soon as the condition holds, so the longer bound costs nothing when it does.
 */
export default mergeConfig(base, {
  test: {
    expect: { poll: { timeout: 10_000 } },
    ...(privateServersAvailable() ? { maxWorkers: 3 } : {}),
  },
})
