/**
 * What a `process.nextTick` costs in the embedded service after it has served a load, tracing
 * off, at ratio 0 and at 0.1: the probe (tickProbe.ts, loaded with `--import`) times 20,000
 * ticks on SIGUSR2, five times, and reports the least, in ns a tick. V8 compiles `nextTick`
 * by what it has seen; in some processes where the tick's async context frame was sometimes
 * undefined and sometimes an object it took about 250 ns a tick instead of 23-43 (kit's
 * contextFrame.ts; bench/README.md, "nextTick and the context frame"). Also the service's CPU a
 * request over the load.
 *
 *   pnpm --filter @pm/bench bench:ticks [--invokes 15000] [--processes 2] [--ratios off,0,0.1]
 */
import { mkdirSync, mkdtempSync, readFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { parseArgs } from 'node:util'
import { freePort, REPO_ROOT } from '@pm/testkit'
import { invoker, prepare, serviceEnv, startSink, tracedEnv } from './invokeSetup.ts'
import { cpuSeconds, startChild, waitReady } from './processes.ts'

const { values: args } = parseArgs({
  options: {
    invokes: { type: 'string', default: '15000' },
    processes: { type: 'string', default: '2' },
    ratios: { type: 'string', default: 'off,0,0.1' },
  },
})
const total = Number(args.invokes)
const processes = Number(args.processes)
const ratios = String(args.ratios).split(',')
if (
  !(total > 0) ||
  !(processes > 0) ||
  ratios.some((r) => r !== 'off' && !(Number(r) >= 0 && Number(r) <= 1))
)
  throw new Error('usage: --invokes N --processes P --ratios off,0,0.1')

const workDir = mkdtempSync(join(tmpdir(), 'pm-bench-ticks-'))
const sink = await startSink()

async function probe(ratio: string, index: number) {
  const name = `${ratio === 'off' ? 'off' : `ratio${ratio}`}-${index}`
  const dataDir = join(workDir, `data-${name}`)
  mkdirSync(dataDir)
  const port = await freePort()
  const proc = startChild(
    name,
    'apps/embedded/src/main.ts',
    { ...serviceEnv(dataDir), ...(ratio === 'off' ? {} : tracedEnv(sink.url, ratio)), PORT: String(port) },
    workDir,
    [`--import=${join(REPO_ROOT, 'bench/src/tickProbe.ts')}`],
  )
  try {
    const gateway = `http://127.0.0.1:${port}`
    await waitReady(`${gateway}/health/ready`, proc)
    const invokes = invoker(name, gateway, await prepare(gateway), 8)
    const before = cpuSeconds(proc.child.pid)
    await invokes.load(total)
    await invokes.close()
    const cpuPerInvoke = ((cpuSeconds(proc.child.pid) - before) / total) * 1e6
    proc.child.kill('SIGUSR2')
    const deadline = Date.now() + 10_000
    let line: RegExpExecArray | null = null
    while (!line && Date.now() < deadline) {
      await new Promise((r) => setTimeout(r, 200))
      line = /tick probe: (\d+) (\d+)/.exec(readFileSync(proc.logFile, 'utf8'))
    }
    if (!line) throw new Error(`${name}: no probe line in ${proc.logFile}`)
    return { name, outside: Number(line[1]), inside: Number(line[2]), cpuPerInvoke }
  } finally {
    await proc.stop()
  }
}

console.log(
  `bench ticks: embedded, ${total} invokes (8 at a time) then the probe; ${processes} process(es) of each of ${ratios.join(', ')}`,
)
try {
  for (let p = 1; p <= processes; p++) {
    for (const ratio of ratios) {
      const r = await probe(ratio, p)
      console.log(
        `${r.name}: nextTick ${r.outside} ns a tick (${r.inside} ns inside a store), service CPU ${r.cpuPerInvoke.toFixed(0)} µs an invoke`,
      )
    }
  }
} finally {
  sink.close()
}
