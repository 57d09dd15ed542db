import { type FakeProvider, startFakeProvider } from '@pm/fakeprovider'
import type { Experiment, ExperimentResult } from '@pm/contracts'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call, type Reply } from '../src/client.ts'
import { type InProcess, startInProcess, type Tenant } from '../src/inProcess.ts'
import { type Stack, startStack } from '../src/stack.ts'

type Data<T> = { data: T }
const ITEMS = 200

/**
 * An experiment against the real runs service, in the embedded default and in the distributed mode,
 * with the local provider (packages/fakeprovider, which echoes the last user message and counts a token per word):
 * version 1 renders `answer-<n>`, the draft `wrong-<n>`, so the test knows every answer, its
 * `exact` score and its tokens; a rubric prompt's render holds `{"score": 0.5}` (the judge
 * echoes it) and another's none (that evaluator errors on every unit; the experiment completes).
 */
interface Target {
  base: string
  signUp(label: string): Promise<Tenant>
  close(): Promise<void>
}

/** The embedded default in this process. */
async function embedded(): Promise<Target> {
  const pm: InProcess = await startInProcess({
    PROVIDER_ALLOWED_HOSTS: '127.0.0.1',
    EXPERIMENT_POLL_MS: '50',
  })
  return pm
}

/** The distributed mode: experiments and runs as processes of their own, real NATS and Redis. */
async function distributed(): Promise<Target> {
  const stack: Stack = await startStack(
    {
      PROVIDER_ALLOWED_HOSTS: '127.0.0.1',
      EXPERIMENT_POLL_MS: '50',
      AUTH_ALLOW_SIGNUP: 'true',
      LOG_LEVEL: 'warn',
    },
    { with: ['experiments', 'runs'] },
  )
  let n = 0
  return {
    base: stack.gateway,
    signUp: async (label) => {
      n++
      const email = `${label}-${n}-${Date.now()}@example.com`
      const res = await call<{
        data: { accessToken: string; organizationId: string; user: { _id: string } }
      }>(stack.gateway, 'POST', '/api/v1/auth/register', {
        body: { email, password: 'correct horse battery staple', name: label },
      })
      if (res.status !== 201) throw new Error(`sign-up answered ${res.status}: ${JSON.stringify(res.body)}`)
      const { accessToken, organizationId, user } = res.body.data
      return { email, accessToken, organizationId, userId: user._id }
    },
    close: () => stack.stop(),
  }
}

describe.each([
  { mode: 'embedded default', start: embedded },
  { mode: 'distributed mode', start: distributed },
])('an experiment through the runs service and the local provider ($mode)', ({ start }) => {
  let pm: Target
  let provider: FakeProvider
  let me: Tenant

  const as = <T>(method: string, path: string, body?: unknown) =>
    call<T>(pm.base, method, path, { token: me.accessToken, ...(body === undefined ? {} : { body }) })
  const ok = <T>(r: Reply<unknown>, status = 200): T => {
    expect(r.status, JSON.stringify(r.body).slice(0, 500)).toBe(status)
    return (r.body as Data<T>).data
  }

  beforeAll(async () => {
    provider = await startFakeProvider()
    pm = await start()
    me = await pm.signUp('runs-exp')
  }, 120_000)

  afterAll(async () => {
    await pm?.close()
    await provider?.close()
  })

  it('200 items × 2 variants complete with the aggregates the answers imply; a judge without a score errors its units', async () => {
    const connectionId = ok<{ _id: string }>(
      await as('POST', `/api/v1/organizations/${me.organizationId}/connections`, {
        name: 'local',
        provider: 'openai-compatible',
        baseUrl: `${provider.url}/v1`,
        apiKey: 'sk-local-test',
        models: ['echo-1'],
      }),
      201,
    )._id
    const promptId = ok<{ _id: string }>(
      await as('POST', '/api/v1/prompts', { name: 'Echo', template: 'answer-{{n}}' }),
      201,
    )._id
    ok(await as('POST', `/api/v1/prompts/${promptId}/publish`, { changeLog: 'v1' }), 201)
    ok(await as('PATCH', `/api/v1/prompts/${promptId}`, { template: 'wrong-{{n}}' }))
    for (const [name, template] of [
      ['judge-half', '{"score": 0.5} {{output}} {{expected}} {{input}}'],
      ['judge-mute', 'no verdict for {{output}} {{expected}} {{input}}'],
    ]) {
      const id = ok<{ _id: string }>(
        await as('POST', '/api/v1/prompts', { name, slug: name, template }),
        201,
      )._id
      ok(await as('POST', `/api/v1/prompts/${id}/publish`, { changeLog: 'v1' }), 201)
    }
    const items = Array.from({ length: ITEMS }, (_, i) => ({
      variables: { n: i + 1 },
      expected: `answer-${i + 1}`,
    }))
    const datasetId = ok<{ _id: string }>(
      await as('POST', '/api/v1/datasets', { name: 'Echoes', items }),
      201,
    )._id
    const experimentId = ok<{ experimentId: string }>(
      await as('POST', '/api/v1/experiments', {
        name: 'v1 vs draft',
        datasetId,
        connectionId,
        model: 'echo-1',
        variants: [
          { promptId, version: 1 },
          { promptId, draft: true },
        ],
        evaluators: [
          { type: 'exact' },
          { type: 'llm-judge', rubric: 'judge-half', name: 'judge' },
          { type: 'llm-judge', rubric: 'judge-mute', name: 'mute' },
        ],
        concurrency: 8,
      }),
      202,
    ).experimentId
    let exp: Experiment | undefined
    await vi.waitFor(
      async () => {
        exp = ok<Experiment>(await as('GET', `/api/v1/experiments/${experimentId}`))
        expect(exp.status).toBe('completed')
      },
      { timeout: 120_000, interval: 200 },
    )
    if (!exp) throw new Error('unreachable')
    expect(exp.progress).toEqual({ done: 2 * ITEMS, total: 2 * ITEMS })
    const [v1, draft] = exp.summary
    expect(v1).toMatchObject({
      label: 'v1',
      done: ITEMS,
      errors: 0,
      evaluators: {
        exact: { mean: 1, count: ITEMS },
        judge: { mean: 0.5, count: ITEMS },
        mute: { mean: null, count: 0 },
      },
      passRate: 0,
      // One word in, one word out per answer (the fake counts a token per word).
      tokens: { input: ITEMS, output: ITEMS },
    })
    expect(draft).toMatchObject({
      label: 'draft',
      done: ITEMS,
      errors: 0,
      evaluators: { exact: { mean: 0, count: ITEMS } },
    })
    expect(v1?.latencyMs.p50).not.toBeNull()
    const page = ok<{ results: ExperimentResult[]; pagination: { total: number } }>(
      await as('GET', `/api/v1/experiments/${experimentId}/results?variant=0&limit=3`),
    )
    expect(page.pagination.total).toBe(ITEMS)
    expect(page.results[0]).toMatchObject({
      output: 'answer-1',
      scores: { exact: 1, judge: 0.5, mute: null },
    })
    expect(page.results[0]?.evaluatorErrors.mute).toMatch(/no score/)
    // The runs service logged every run of the experiment (units and judges).
    const runs = ok<{ pagination: { total: number } }>(
      await as('GET', `/api/v1/prompts/${promptId}/runs?limit=1`),
    )
    expect(runs.pagination.total).toBe(2 * ITEMS)
  }, 180_000)
})
