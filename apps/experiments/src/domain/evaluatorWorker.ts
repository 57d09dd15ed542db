/**
 * The sandbox's worker thread (sandbox.ts): runs `regex` and `json-schema` evaluators on one
 * output at a time, so that a slow one holds this thread, never the service's event loop, and can
 * be ended by terminating the thread. Compiled evaluators are kept for the next units.
 */
import { parentPort } from 'node:worker_threads'
import { type EvalResult, EvaluatorConfigError, type HeavyEvaluator, heavyScorer } from './evaluators.ts'

/** A job from the sandbox: its number, the evaluator and the output. */
export interface WorkerJob {
  id: number
  evaluator: HeavyEvaluator
  output: string
}

const CACHED = 64
const compiled = new Map<string, (output: string) => EvalResult>()

function scorerFor(evaluator: HeavyEvaluator): (output: string) => EvalResult {
  const key = JSON.stringify(evaluator)
  let scorer = compiled.get(key)
  if (!scorer) {
    scorer = heavyScorer(evaluator)
    compiled.set(key, scorer)
    if (compiled.size > CACHED) compiled.delete(compiled.keys().next().value as string)
  }
  return scorer
}

const port = parentPort
if (port) {
  port.on('message', ({ id, evaluator, output }: WorkerJob) => {
    let result: EvalResult
    try {
      result = scorerFor(evaluator)(output)
    } catch (err) {
      const what = err instanceof EvaluatorConfigError ? err.message : `failed: ${(err as Error).message}`
      result = { error: `the evaluator ${what}` }
    }
    port.postMessage({ id, result })
  })
  // Loaded: the sandbox starts its deadline from here, not from the thread's start.
  port.postMessage({ ready: true })
}
