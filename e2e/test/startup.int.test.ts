import { join } from 'node:path'
import { REPO_ROOT, startProcess } from '@pm/testkit'
import { describe, expect, it } from 'vitest'

describe('service entry points', () => {
  it('stop at start with a message naming the bad setting', async () => {
    const proc = startProcess('identity', join(REPO_ROOT, 'apps/identity/src/server.ts'), {
      PORT: 'not-a-port',
      INTERNAL_AUTH_SECRET: 'short',
    })
    const code = await new Promise<number | null>((resolve) => proc.child.once('exit', (c) => resolve(c)))
    expect(code).toBe(1)
    const output = proc.logs.join('\n')
    expect(output).toMatch(/PORT/)
    expect(output).toMatch(/INTERNAL_AUTH_SECRET/)
  })
})
