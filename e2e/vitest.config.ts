import { mergeConfig } from 'vitest/config'
import base from '../vitest.base.ts'

/**
 * How many files run at a time: vitest.base.ts (four with private servers, else one).
 *
 * expect.poll gives up after 1 s by default. The browser tests poll the page after each step
 * (a publish, a promotion), which takes longer than that on a loaded 2-core machine; polling
 * ends as soon as the condition holds, so the longer bound costs nothing when it does.
 */
export default mergeConfig(base, {
  test: {
    expect: { poll: { timeout: 10_000 } },
  },
})
