import { vi } from 'vitest'

// vi.waitFor gives up after 1 s by default. Under `npm test` every package's tests run at once on
// CI's two cores, and a step that takes 50 ms alone (a delivery, a request reaching a fake) has
// been seen to take longer, failing tests whose code was right. Polling still ends as soon as the
// condition holds, so a longer bound costs nothing when it does; a test that sets its own timeout
// keeps it.
const waitFor = vi.waitFor.bind(vi)
vi.waitFor = ((callback, options) =>
  waitFor(
    callback,
    typeof options === 'number' ? options : { timeout: 15_000, ...options },
  )) as typeof vi.waitFor
