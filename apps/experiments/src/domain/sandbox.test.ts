import { afterAll, describe, expect, it } from 'vitest'
import { compileEvaluators, type HeavyEvaluator, heavyScorer } from './evaluators.ts'
import { EvaluatorSandbox } from './sandbox.ts'

// One worker for the file (a fresh one after each deadline), as the service has.
const sandbox = new EvaluatorSandbox({ timeoutMs: 300 })
afterAll(() => sandbox.close())

const schema: HeavyEvaluator = {
  type: 'json-schema',
  schema: { type: 'object', required: ['city'], properties: { city: { type: 'string', pattern: '^[A-Z]' } } },
}
const regex: HeavyEvaluator = { type: 'regex', pattern: '^answer-\\d+$' }

describe('the evaluator sandbox (a worker thread with a deadline)', () => {
  it('scores as the evaluators do on the event loop', async () => {
    for (const [evaluator, output] of [
      [regex, 'answer-12'],
      [regex, 'wrong-12'],
      [schema, '{"city":"Paris"}'],
      [schema, '{"city":"paris"}'],
      [schema, 'not json'],
    ] as const) {
      expect(await sandbox.run(evaluator, output), output).toEqual(heavyScorer(evaluator)(output))
    }
    // Through compileEvaluators, as the runner calls it.
    const [compiled] = compileEvaluators([regex], sandbox)
    expect(
      await compiled?.evaluate({ output: 'answer-7', expected: null, variables: {} }, async () => ''),
    ).toEqual({
      score: 1,
    })
  })

  it('stops an evaluation past its deadline, the event loop free meanwhile, and goes on with a fresh worker', async () => {
    // Linear in the output but times the pattern: seconds on 100 KB (a hostile-input sweep's case).
    const slow: HeavyEvaluator = { type: 'regex', pattern: '[a-c]{1,1000}[d-f]' }
    let ticks = 0
    const ticker = setInterval(() => ticks++, 10)
    const started = performance.now()
    const result = await sandbox.run(slow, 'abc'.repeat(40_000))
    const took = performance.now() - started
    clearInterval(ticker)
    expect(result).toMatchObject({
      error: expect.stringMatching(/took longer than 300 ms \(on 120000 characters/),
    })
    expect(took).toBeLessThan(3_000)
    // The event loop ran its timers while the worker was busy (on it, none would have run).
    expect(ticks).toBeGreaterThanOrEqual(10)
    expect(await sandbox.run(regex, 'answer-1')).toEqual({ score: 1 })
  })

  it('queues evaluations one at a time, each with its own deadline, and answers an error once closed', async () => {
    const results = await Promise.all(
      Array.from({ length: 20 }, (_, i) => sandbox.run(regex, i % 2 === 0 ? `answer-${i}` : `x-${i}`)),
    )
    expect(results.map((r) => ('score' in r ? r.score : r.error))).toEqual(
      Array.from({ length: 20 }, (_, i) => (i % 2 === 0 ? 1 : 0)),
    )
    const closed = new EvaluatorSandbox({ timeoutMs: 300 })
    await closed.close()
    expect(await closed.run(regex, 'answer-1')).toEqual({ error: 'the service is stopping' })
  })

  it('a worker that fails while idle takes neither the process down nor the next evaluation', async () => {
    // Answers, then fails after its answer (an 'error' event with no evaluation waiting: had no
    // one listened, Node would throw it and end the process), and exits.
    const failsLate = new URL(
      `data:text/javascript,${encodeURIComponent(`
        import { parentPort } from 'node:worker_threads'
        parentPort.on('message', ({ id }) => {
          parentPort.postMessage({ id, result: { score: 1 } })
          setTimeout(() => { throw new Error('late') }, 20)
        })
        parentPort.postMessage({ ready: true })
      `)}`,
    )
    const late = new EvaluatorSandbox({ timeoutMs: 1_000, module: failsLate })
    try {
      expect(await late.run(regex, 'answer-1')).toEqual({ score: 1 })
      await new Promise((resolve) => setTimeout(resolve, 200))
      // A fresh worker, not the dead one (which would answer nothing until the deadline).
      const started = performance.now()
      expect(await late.run(regex, 'answer-2')).toEqual({ score: 1 })
      expect(performance.now() - started).toBeLessThan(900)
    } finally {
      await late.close()
    }
    // One that exits before it is ready: an error for that evaluation, not a wait for ever.
    const exitsAtOnce = new URL(`data:text/javascript,${encodeURIComponent('process.exit(0)')}`)
    const gone = new EvaluatorSandbox({ timeoutMs: 1_000, module: exitsAtOnce })
    try {
      expect(await gone.run(regex, 'answer-1')).toMatchObject({
        error: expect.stringMatching(/could not start/),
      })
    } finally {
      await gone.close()
    }
  })

  it('close() ends the evaluation running and those queued at once, not at their deadline', async () => {
    const closing = new EvaluatorSandbox({ timeoutMs: 10_000 })
    const slow: HeavyEvaluator = { type: 'regex', pattern: '[a-c]{1,1000}[d-f]' }
    const running = closing.run(slow, 'abc'.repeat(40_000))
    const queued = closing.run(regex, 'answer-1')
    // The first is under way in the worker (about 6 s of work at 120,000 characters).
    await new Promise((resolve) => setTimeout(resolve, 300))
    const started = performance.now()
    await closing.close()
    expect(await running).toEqual({ error: 'the evaluator stopped' })
    expect(await queued).toEqual({ error: 'the service is stopping' })
    expect(performance.now() - started).toBeLessThan(2_000)
  })
})
