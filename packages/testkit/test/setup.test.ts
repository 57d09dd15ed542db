import { expect, it, vi } from 'vitest'

// vitest.setup.ts (at the root) gives vi.waitFor a 15 s bound instead of Vitest's 1 s. The test
// files import vitest with Node's own loader, so the setup file and they must load the same copy
// of vitest (one @types/node in the workspace: pnpm-workspace.yaml's overrides); with two copies
// the setup patched a `vi` no test used, and waits of over a second failed on a loaded machine.
it('vi.waitFor waits past 1 s by default (the setup file patched this vi)', async () => {
  const start = Date.now()
  await vi.waitFor(() => {
    if (Date.now() - start < 1_300) throw new Error('not yet')
  })
  expect(Date.now() - start).toBeGreaterThanOrEqual(1_300)
})
