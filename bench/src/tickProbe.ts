/**
 * Loaded into a service by bench/src/ticks.ts (`node --import`): on SIGUSR2, times 20,000
 * `process.nextTick` calls five times, outside any AsyncLocalStorage store of its own and inside
 * one, and writes the least of each (ns a tick) to stderr as `tick probe: <outside> <inside>`.
 */
import { AsyncLocalStorage } from 'node:async_hooks'

const store = new AsyncLocalStorage<number>()
const noop = () => {}

function least(inside: boolean): number {
  let best = Number.POSITIVE_INFINITY
  for (let k = 0; k < 5; k++) {
    const time = () => {
      const started = process.hrtime.bigint()
      for (let i = 0; i < 20_000; i++) process.nextTick(noop)
      return Number(process.hrtime.bigint() - started) / 20_000
    }
    best = Math.min(best, inside ? store.run(k, time) : time())
  }
  return best
}

process.on('SIGUSR2', () => {
  const outside = least(false)
  const inside = least(true)
  // After the ticks queued above have run.
  setImmediate(() => process.stderr.write(`tick probe: ${outside.toFixed(0)} ${inside.toFixed(0)}\n`))
})
