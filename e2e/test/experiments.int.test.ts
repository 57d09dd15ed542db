import { randomBytes } from 'node:crypto'
import type { Dataset, Experiment, ExperimentResult } from '@pm/contracts'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call, type Reply } from '../src/client.ts'
import { expectedSummary, FakeRuns } from '../src/fakeRuns.ts'
import { type InProcess, startInProcess, type Tenant } from '../src/inProcess.ts'
import { WebhookReceiver } from '../src/webhookReceiver.ts'

type Data<T> = { data: T }
type ErrorReply = { error: { code: string; message: string; details?: { row?: number } } }

/**
 * Datasets and experiments through the gateway, in the embedded default (DESIGN section 14).
 * Each unit's run goes to a stand-in for the runs service whose answers the test knows
 * (e2e/src/fakeRuns.ts), over the same internal HTTP with the signed caller context.
 */
describe('datasets and experiments (embedded default)', () => {
  let pm: InProcess
  let fake: FakeRuns
  let receiver: WebhookReceiver
  let me: Tenant
  let other: Tenant
  let promptId: string
  const connectionId = 'c'.repeat(24)

  const as =
    (t: Tenant) =>
    <T>(method: string, path: string, body?: unknown) =>
      call<T>(pm.base, method, path, { token: t.accessToken, ...(body === undefined ? {} : { body }) })
  const ok = <T>(r: Reply<unknown>, status = 200): T => {
    expect(r.status, JSON.stringify(r.body).slice(0, 500)).toBe(status)
    return (r.body as Data<T>).data
  }
  const upload = async (t: Tenant, datasetId: string, content: string, name: string, type: string) => {
    const form = new FormData()
    form.append('file', new Blob([content], { type }), name)
    const res = await fetch(`${pm.base}/api/v1/datasets/${datasetId}/items/upload`, {
      method: 'POST',
      headers: { authorization: `Bearer ${t.accessToken}` },
      body: form,
    })
    return { status: res.status, body: (await res.json()) as unknown }
  }
  const dataset = async (name: string, count: number, extra: Record<string, unknown> = {}) =>
    ok<Dataset>(
      await as(me)('POST', '/api/v1/datasets', {
        name,
        items: Array.from({ length: count }, (_, i) => ({
          variables: { n: i + 1, ...extra },
          expected: `answer-${i + 1}`,
        })),
      }),
      201,
    )
  const start = async (body: Record<string, unknown>) =>
    ok<{ experimentId: string; status: string }>(
      await as(me)('POST', '/api/v1/experiments', {
        name: 'exp',
        connectionId,
        variants: [
          { promptId, version: 1 },
          { promptId, draft: true },
        ],
        evaluators: [{ type: 'exact' }],
        ...body,
      }),
      202,
    ).experimentId
  const get = async (id: string) => ok<Experiment>(await as(me)('GET', `/api/v1/experiments/${id}`))
  const ended = async (id: string, timeout = 30_000) => {
    let exp: Experiment | undefined
    await vi.waitFor(
      async () => {
        exp = await get(id)
        expect(['completed', 'failed', 'cancelled']).toContain(exp.status)
      },
      { timeout, interval: 50 },
    )
    if (!exp) throw new Error('unreachable')
    return exp
  }
  const allResults = async (id: string) => {
    const out: ExperimentResult[] = []
    for (let page = 1; ; page++) {
      const r = ok<{ results: ExperimentResult[]; pagination: { hasNextPage: boolean } }>(
        await as(me)('GET', `/api/v1/experiments/${id}/results?page=${page}&limit=100`),
      )
      out.push(...r.results)
      if (!r.pagination.hasNextPage) return out
    }
  }

  beforeAll(async () => {
    const secret = randomBytes(32).toString('hex')
    fake = await FakeRuns.start(secret)
    receiver = await WebhookReceiver.start()
    pm = await startInProcess({
      INTERNAL_AUTH_SECRET: secret,
      RUNS_URL: fake.base,
      EXPERIMENT_POLL_MS: '50',
      WEBHOOK_ALLOW_PRIVATE_TARGETS: 'true',
      WEBHOOK_POLL_MS: '100',
    })
    me = await pm.signUp('exp')
    other = await pm.signUp('other')
    promptId = ok<{ _id: string }>(
      await as(me)('POST', '/api/v1/prompts', { name: 'Capital', template: 'Q {{n}}' }),
      201,
    )._id
    ok(await as(me)('POST', `/api/v1/prompts/${promptId}/publish`, { changeLog: 'v1' }), 201)
  }, 60_000)

  afterAll(async () => {
    await pm?.close()
    await fake?.close()
    await receiver?.close()
  })

  it('datasets: create, list, rename, items from JSON, CSV and JSONL, paginated, deleted one by one', async () => {
    const d = ok<Dataset>(
      await as(me)('POST', '/api/v1/datasets', { name: 'Cities', description: 'capitals' }),
      201,
    )
    expect(d.itemCount).toBe(0)
    expect(
      ok<{ added: number }>(
        await as(me)('POST', `/api/v1/datasets/${d._id}/items`, {
          items: [{ variables: { city: 'Paris' }, expected: 'France' }],
        }),
        201,
      ).added,
    ).toBe(1)
    const csv = await upload(
      me,
      d._id,
      'city,expected\nLyon,France\n"Rome, IT",Italy\n',
      'cities.csv',
      'text/csv',
    )
    expect(csv.status).toBe(201)
    const jsonl = await upload(
      me,
      d._id,
      '{"variables":{"city":"Bern"},"expected":"Switzerland","metadata":{"k":1}}\n',
      'more.jsonl',
      'application/octet-stream',
    )
    expect(jsonl.status).toBe(201)
    expect((jsonl.body as Data<{ itemCount: number }>).data.itemCount).toBe(4)
    const page = ok<{
      items: { _id: string; variables: Record<string, unknown>; expected: string | null }[]
      pagination: { total: number }
    }>(await as(me)('GET', `/api/v1/datasets/${d._id}/items?limit=2&page=2`))
    expect(page.pagination.total).toBe(4)
    expect(page.items.map((i) => i.variables.city)).toEqual(['Rome, IT', 'Bern'])
    const first = page.items[0]
    if (!first) throw new Error('no item')
    ok(await as(me)('DELETE', `/api/v1/datasets/${d._id}/items/${first._id}`))
    expect(ok<Dataset>(await as(me)('GET', `/api/v1/datasets/${d._id}`)).itemCount).toBe(3)
    expect(ok<Dataset>(await as(me)('PATCH', `/api/v1/datasets/${d._id}`, { name: 'Capitals' })).name).toBe(
      'Capitals',
    )
    expect(
      ok<{ datasets: Dataset[] }>(await as(me)('GET', '/api/v1/datasets')).datasets.map((x) => x._id),
    ).toContain(d._id)
    // Another workspace sees none of it.
    expect((await as(other)('GET', `/api/v1/datasets/${d._id}`)).status).toBe(404)
    expect(
      (await as(other)('POST', `/api/v1/datasets/${d._id}/items`, { items: [{ variables: {} }] })).status,
    ).toBe(404)
    ok(await as(me)('DELETE', `/api/v1/datasets/${d._id}`))
    expect((await as(me)('GET', `/api/v1/datasets/${d._id}`)).status).toBe(404)
  })

  it('an upload with a bad row reports the row and imports nothing', async () => {
    const d = ok<Dataset>(await as(me)('POST', '/api/v1/datasets', { name: 'Bad rows' }), 201)
    const csv = await upload(me, d._id, 'a,b\n1,2\n3,4\n5\n6,7\n', 'bad.csv', 'text/csv')
    expect(csv.status).toBe(400)
    expect((csv.body as ErrorReply).error.details?.row).toBe(4)
    expect((csv.body as ErrorReply).error.message).toMatch(/row 4/)
    const jsonl = await upload(
      me,
      d._id,
      '{"variables":{"a":1}}\n{"variables":{"a":2}}\n{"variables":[]}\n',
      'bad.jsonl',
      'application/jsonl',
    )
    expect(jsonl.status).toBe(400)
    expect((jsonl.body as ErrorReply).error.details?.row).toBe(3)
    const items = ok<{ pagination: { total: number } }>(
      await as(me)('GET', `/api/v1/datasets/${d._id}/items`),
    )
    expect(items.pagination.total).toBe(0)
    expect(ok<Dataset>(await as(me)('GET', `/api/v1/datasets/${d._id}`)).itemCount).toBe(0)
  })

  it('a dataset holds at most 10,000 items: the 10,001st is refused, a request of 1,001 too', async () => {
    const d = ok<Dataset>(await as(me)('POST', '/api/v1/datasets', { name: 'Big' }), 201)
    const batch = (from: number, count: number) =>
      Array.from({ length: count }, (_, i) => ({ variables: { n: from + i } }))
    expect((await as(me)('POST', `/api/v1/datasets/${d._id}/items`, { items: batch(0, 1_001) })).status).toBe(
      400,
    )
    for (let i = 0; i < 10; i++)
      ok(await as(me)('POST', `/api/v1/datasets/${d._id}/items`, { items: batch(i * 1_000, 1_000) }), 201)
    const over = await as(me)<ErrorReply>('POST', `/api/v1/datasets/${d._id}/items`, {
      items: batch(10_000, 1),
    })
    expect(over.status).toBe(409)
    expect(over.body.error.message).toMatch(/10000/)
    const overCsv = await upload(me, d._id, 'n\n10001\n', 'one.csv', 'text/csv')
    expect(overCsv.status).toBe(400)
    expect(ok<Dataset>(await as(me)('GET', `/api/v1/datasets/${d._id}`)).itemCount).toBe(10_000)
    ok(await as(me)('DELETE', `/api/v1/datasets/${d._id}`))
  }, 60_000)

  it('refuses an unknown evaluator, a pattern RE2 cannot run, a variant of another workspace, a dataset of another', async () => {
    const d = await dataset('Refusals', 2)
    const bad = async (body: Record<string, unknown>, status = 400) => {
      const r = await as(me)<ErrorReply>('POST', '/api/v1/experiments', {
        name: 'x',
        datasetId: d._id,
        connectionId,
        variants: [{ promptId, version: 1 }],
        evaluators: [{ type: 'exact' }],
        ...body,
      })
      expect(r.status, JSON.stringify(r.body)).toBe(status)
      return r.body.error
    }
    expect((await bad({ evaluators: [{ type: 'bleu' }] })).code).toBe('VALIDATION_ERROR')
    expect((await bad({ evaluators: [{ type: 'regex', pattern: '(a)\\1' }] })).message).toMatch(
      /evaluators\[0\]/,
    )
    expect((await bad({ variants: [{ promptId, version: 1, draft: true }] })).code).toBe('VALIDATION_ERROR')
    const theirs = ok<{ _id: string }>(
      await as(other)('POST', '/api/v1/prompts', { name: 'Theirs', template: 'x' }),
      201,
    )._id
    expect((await bad({ variants: [{ promptId }, { promptId: theirs, draft: true }] }, 404)).code).toBe(
      'NOT_FOUND',
    )
    expect((await bad({ variants: [{ promptId, version: 9 }] }, 404)).code).toBe('VERSION_NOT_FOUND')
    const r = await as(other)('POST', '/api/v1/experiments', {
      name: 'x',
      datasetId: d._id,
      connectionId,
      variants: [{ promptId: theirs, draft: true }],
      evaluators: [],
    })
    expect(r.status).toBe(404)
  })

  it('200 items × 2 variants: completes with the aggregates the answers imply, every unit once, then experiment.completed', async () => {
    const hook = ok<{ webhook: { _id: string } }>(
      await as(me)('POST', `/api/v1/organizations/${me.organizationId}/webhooks`, {
        url: `${receiver.base}/exp`,
        events: ['experiment.completed'],
      }),
      201,
    )
    expect(hook.webhook._id).toBeTruthy()
    const d = await dataset('Two hundred', 200)
    const calls = fake.calls.length
    const id = await start({ datasetId: d._id, concurrency: 8 })
    const exp = await ended(id)
    expect(exp.status).toBe('completed')
    expect(exp.progress).toEqual({ done: 400, total: 400 })
    expect(exp.summary.map(({ promptId: _p, label: _l, ...rest }) => rest)).toEqual(expectedSummary(200))
    expect(exp.summary.map((s) => s.label)).toEqual(['v1', 'draft'])
    expect(fake.calls.length - calls).toBe(400)
    const results = await allResults(id)
    expect(results).toHaveLength(400)
    expect(new Set(results.map((r) => `${r.itemId}:${r.variant}`)).size).toBe(400)
    const failed = ok<{ results: ExperimentResult[]; pagination: { total: number } }>(
      await as(me)('GET', `/api/v1/experiments/${id}/results?failed=true&variant=1&limit=5`),
    )
    expect(failed.pagination.total).toBe(50)
    expect(failed.results[0]).toMatchObject({
      variant: 1,
      output: 'wrong-4',
      expected: 'answer-4',
      scores: { exact: 0 },
      passed: false,
    })
    // The webhook event, with the aggregates.
    await vi.waitFor(() => expect(receiver.to('/exp')).toHaveLength(1), { timeout: 10_000 })
    const event = JSON.parse(receiver.to('/exp')[0]?.body ?? '{}') as {
      type: string
      data: { experimentId: string; status: string }
    }
    expect(event).toMatchObject({
      type: 'experiment.completed',
      data: { experimentId: id, status: 'completed' },
    })
    const listed = ok<{ experiments: Experiment[] }>(
      await as(me)('GET', `/api/v1/experiments?promptId=${promptId}`),
    )
    expect(listed.experiments.map((e) => e._id)).toContain(id)
  }, 60_000)

  it('a regex that would backtrack forever is bounded; a judge without a score errors its unit and the experiment completes', async () => {
    const d = await dataset('Hostile', 3, { long: true })
    const id = await start({
      datasetId: d._id,
      variants: [{ promptId, version: 1 }],
      evaluators: [
        { type: 'regex', pattern: '(a+)+b' },
        { type: 'llm-judge', rubric: 'judge-ok', name: 'judge' },
        { type: 'llm-judge', rubric: 'judge-mute', name: 'mute' },
      ],
    })
    const started = Date.now()
    const exp = await ended(id)
    expect(Date.now() - started).toBeLessThan(10_000)
    expect(exp.status).toBe('completed')
    expect(exp.summary[0]?.evaluators).toEqual({
      regex: { mean: 0, count: 3 },
      judge: { mean: 0.8, count: 3 },
      mute: { mean: null, count: 0 },
    })
    const results = await allResults(id)
    expect(
      results.every(
        (r) => r.error === null && r.scores.mute === null && /no score/.test(r.evaluatorErrors.mute ?? ''),
      ),
    ).toBe(true)
    // The judge's rubric got input, output and expected.
    const judged = fake.calls.find((c) => c.path === '/api/v1/prompts/slug/judge-ok/run')
    expect(Object.keys(judged?.body.variables ?? {}).sort()).toEqual(['expected', 'input', 'output'])
  }, 30_000)

  it('a provider 429 with Retry-After slows the job and loses nothing', async () => {
    const d = await dataset('Limited', 6, { limited: true })
    const before = fake.calls.length
    const t0 = Date.now()
    const id = await start({ datasetId: d._id, variants: [{ promptId, version: 1 }], concurrency: 2 })
    const exp = await ended(id)
    expect(exp.status).toBe('completed')
    expect(exp.summary[0]).toMatchObject({ done: 6, errors: 0, evaluators: { exact: { mean: 1, count: 6 } } })
    const calls = fake.calls.slice(before)
    const limited = calls.filter((c) => c.status === 502)
    expect(limited).toHaveLength(6)
    // Every n answered once after its 429; no call for it before a second had passed since the 429.
    for (const l of limited) {
      const retry = calls.find((c) => c.status === 200 && c.body.variables?.n === l.body.variables?.n)
      expect(retry).toBeDefined()
      expect((retry?.at ?? 0) - l.at).toBeGreaterThanOrEqual(950)
    }
    expect(Date.now() - t0).toBeGreaterThanOrEqual(1_000)
    expect(await allResults(id)).toHaveLength(6)
  }, 30_000)

  it('cancel stops new units within 2 s', async () => {
    const d = await dataset('Slow', 100)
    fake.delayMs = 100
    try {
      const id = await start({ datasetId: d._id, concurrency: 2 })
      await vi.waitFor(async () => expect((await get(id)).progress.done).toBeGreaterThanOrEqual(4), {
        timeout: 10_000,
        interval: 50,
      })
      const cancelledAt = Date.now()
      const exp = ok<Experiment>(await as(me)('POST', `/api/v1/experiments/${id}/cancel`))
      expect(exp.status).toBe('cancelled')
      await new Promise((r) => setTimeout(r, 2_500))
      const late = fake.calls.filter((c) => c.at > cancelledAt + 2_000 && c.body.variables?.n !== undefined)
      expect(late).toHaveLength(0)
      const after = await get(id)
      expect(after.status).toBe('cancelled')
      expect(after.progress.done).toBeLessThan(200)
      expect((await as(me)('POST', `/api/v1/experiments/${id}/cancel`)).status).toBe(409)
    } finally {
      fake.delayMs = 0
    }
  }, 30_000)
})
