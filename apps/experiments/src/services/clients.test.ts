import { createServer, type Server } from 'node:http'
import type { AddressInfo } from 'node:net'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { RunsExecutor } from './clients.ts'

/**
 * RunsExecutor against a local server standing in for the runs service: `/answer` answers a run
 * at once, `/stall` never answers (its requests are kept, to see them closed).
 */
describe('RunsExecutor', () => {
  let server: Server
  let url: string
  let stalledClosed = 0
  beforeAll(async () => {
    server = createServer((req, res) => {
      if (req.url?.includes('/prompts/answer/')) {
        req.resume()
        res.setHeader('content-type', 'application/json')
        res.end(
          JSON.stringify({
            output: { content: 'hi' },
            latencyMs: 7,
            usage: { inputTokens: 3, outputTokens: 1 },
          }),
        )
        return
      }
      req.on('close', () => {
        stalledClosed++
      })
    })
    await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
    url = `http://127.0.0.1:${(server.address() as AddressInfo).port}`
  })
  afterAll(async () => {
    server.closeAllConnections()
    await new Promise((resolve) => server.close(resolve))
  })

  const caller = {
    kind: 'user' as const,
    userId: 'u1',
    organizationId: 'o1',
    scopes: ['runs:write' as const],
  }
  const unit = (promptId: string) => ({ promptId, variables: {}, connectionId: 'c1' })

  it('answers a run', async () => {
    const runs = new RunsExecutor(url, 'secret-secret-secret-secret-32ch', 60_000)
    const answer = await runs.run(caller, unit('answer'), new AbortController().signal)
    expect(answer).toEqual({ output: 'hi', latencyMs: 7, inputTokens: 3, outputTokens: 1 })
    await runs.close()
  })

  it('gives up at its deadline and closes the request', async () => {
    const runs = new RunsExecutor(url, 'secret-secret-secret-secret-32ch', 200)
    const closed = stalledClosed
    await expect(runs.run(caller, unit('stall'), new AbortController().signal)).rejects.toThrow(
      'the run did not answer in time',
    )
    await expect.poll(() => stalledClosed).toBe(closed + 1)
    await runs.close()
  })

  it("stops when the experiment's signal aborts, with its reason", async () => {
    const runs = new RunsExecutor(url, 'secret-secret-secret-secret-32ch', 60_000)
    const cancel = new AbortController()
    const pending = runs.run(caller, unit('stall'), cancel.signal)
    setTimeout(() => cancel.abort(new Error('experiment cancelled')), 50)
    await expect(pending).rejects.toThrow('experiment cancelled')
    await runs.close()
  })
})
