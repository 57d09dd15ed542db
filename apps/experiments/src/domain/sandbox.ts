import { existsSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
import { Worker } from 'node:worker_threads'
import type { EvalResult, HeavyEvaluator, HeavyRunner } from './evaluators.ts'
import type { WorkerJob } from './evaluatorWorker.ts'

/**
 * The worker's module: its TypeScript source beside this file (the sources, and the test bundles,
 * whose build gives `import.meta.resolve` this file's own place), else the built `.js` (dist/).
 */
function workerModule(): URL {
  const source = new URL(import.meta.resolve('./evaluatorWorker.ts'))
  return existsSync(fileURLToPath(source)) ? source : new URL(source.href.replace(/\.ts$/, '.js'))
}

export interface SandboxOptions {
  /** How long one evaluation may take (EXPERIMENT_EVALUATOR_TIMEOUT_MS). */
  timeoutMs: number
  /** The worker's heap, in MiB: an evaluation that needs more ends the worker, not the service. */
  maxHeapMb?: number
  /** The worker's module (tests give another). */
  module?: URL
}

interface Running {
  worker: Worker
  ready: Promise<void>
}

/**
 * Runs `regex` and `json-schema` evaluators in a worker thread, one at a time, each with a
 * deadline. Both are linear in the output but multiplied by the pattern or the schema: a 16 KiB
 * schema against an 800 KB output took 19.5 s, `[a-c]{1,1000}[d-f]` a minute on 1 MB, and on the
 * event loop that stopped the whole process (every service, in the embedded default). Past the
 * deadline the worker is terminated (the evaluation with it), the unit's evaluator gets an error,
 * and the next evaluation starts a fresh worker. The worker is started on first use and does not
 * keep the process alive.
 */
export class EvaluatorSandbox implements HeavyRunner {
  private readonly opts: SandboxOptions
  private running: Running | null = null
  private queue: Promise<unknown> = Promise.resolve()
  private next = 0
  private closed = false

  constructor(opts: SandboxOptions) {
    this.opts = opts
  }

  run(evaluator: HeavyEvaluator, output: string): Promise<EvalResult> {
    const job = this.queue.then(() => this.runNow(evaluator, output))
    this.queue = job.catch(() => undefined)
    return job
  }

  /** Ends the worker (the service's close). */
  async close(): Promise<void> {
    this.closed = true
    const running = this.running
    this.running = null
    await running?.worker.terminate()
  }

  private start(): Running {
    const worker = new Worker(this.opts.module ?? workerModule(), {
      resourceLimits: { maxOldGenerationSizeMb: this.opts.maxHeapMb ?? 256 },
    })
    worker.unref()
    // For the worker's whole life, not only while an evaluation waits: an 'error' nobody listens
    // to is thrown by Node (the whole process ends), and a worker that ended while idle must not
    // be handed the next evaluation (it would answer nothing until the deadline).
    worker.on('error', () => {})
    worker.once('exit', () => {
      if (this.running?.worker === worker) this.running = null
    })
    const ready = new Promise<void>((resolve, reject) => {
      const onMessage = (m: { ready?: boolean }) => {
        if (!m.ready) return
        worker.off('message', onMessage)
        worker.off('error', reject)
        worker.off('exit', onExit)
        resolve()
      }
      const onExit = (code: number) => reject(new Error(`it exited (code ${code}) before it was ready`))
      worker.on('message', onMessage)
      worker.once('error', reject)
      worker.once('exit', onExit)
    })
    // Never unhandled: runNow reports a worker that failed to start.
    ready.catch(() => {})
    return { worker, ready }
  }

  private async runNow(evaluator: HeavyEvaluator, output: string): Promise<EvalResult> {
    if (this.closed) return { error: 'the service is stopping' }
    this.running ??= this.start()
    const { worker, ready } = this.running
    try {
      await ready
    } catch (err) {
      this.running = null
      return { error: `the evaluator could not start: ${(err as Error).message}` }
    }
    const id = ++this.next
    return new Promise<EvalResult>((resolve) => {
      let settled = false
      const done = (result: EvalResult, dropWorker: boolean) => {
        if (settled) return
        settled = true
        clearTimeout(timer)
        worker.off('message', onMessage)
        worker.off('error', onError)
        worker.off('exit', onExit)
        if (dropWorker && this.running?.worker === worker) this.running = null
        resolve(result)
      }
      const onMessage = (m: { id?: number; result?: EvalResult }) => {
        if (m.id === id && m.result) done(m.result, false)
      }
      const onError = (err: Error) => done({ error: `the evaluator failed: ${err.message}` }, true)
      const onExit = () => done({ error: 'the evaluator stopped' }, true)
      const timer = setTimeout(() => {
        done(
          {
            error: `the evaluator took longer than ${this.opts.timeoutMs} ms (on ${output.length} characters of output) and was stopped`,
          },
          true,
        )
        void worker.terminate()
      }, this.opts.timeoutMs)
      worker.on('message', onMessage)
      worker.once('error', onError)
      worker.once('exit', onExit)
      const job: WorkerJob = { id, evaluator, output }
      worker.postMessage(job)
    })
  }
}
