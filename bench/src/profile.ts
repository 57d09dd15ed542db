/**
 * Summarises V8 CPU profiles (`pnpm bench:invoke --cpu-prof` writes them to bench/profiles/):
 * the share of samples by where the code lives (a package, node's own code, the project's
 * apps and packages, GC, idle) and the functions with the most self time.
 *
 *   node bench/src/profile.ts bench/profiles/CPU.*.cpuprofile [--top 25] [--inclusive REGEX]
 *
 * `--inclusive REGEX`: also the functions whose place matches REGEX (e.g. `apps/gateway|kit`)
 * by inclusive time (their callees counted), to see what one of the project's steps costs.
 */
import { readFileSync } from 'node:fs'
import { parseArgs } from 'node:util'

interface ProfileNode {
  id: number
  callFrame: { functionName: string; url: string; lineNumber: number }
  children?: number[]
}

interface Profile {
  nodes: ProfileNode[]
  samples: number[]
  timeDeltas: number[]
}

const { values, positionals } = parseArgs({
  allowPositionals: true,
  options: { top: { type: 'string', default: '25' }, inclusive: { type: 'string' } },
})
const top = Number(values.top)

/** Where a frame's code lives: a package name, node:internal, the project's own file, or V8. */
function placeOf(url: string, name: string): string {
  if (name === '(garbage collector)' || name === '(idle)' || name === '(program)') return name
  if (!url) return '(native)'
  const pkg = /node_modules\/(?:\.pnpm\/[^/]+\/node_modules\/)?((?:@[^/]+\/)?[^/]+)/.exec(url)
  if (pkg) return pkg[1] as string
  if (url.startsWith('node:')) return 'node:internal'
  const own = /\/(apps|packages)\/([^/]+)\//.exec(url)
  if (own) return `${own[1]}/${own[2]}`
  return url
}

function pct(n: number, total: number): string {
  return `${((100 * n) / total).toFixed(1).padStart(5)}%`
}

for (const file of positionals) {
  const profile = JSON.parse(readFileSync(file, 'utf8')) as Profile
  const byId = new Map(profile.nodes.map((n) => [n.id, n]))
  const self = new Map<number, number>()
  for (const [i, id] of profile.samples.entries()) {
    self.set(id, (self.get(id) ?? 0) + (profile.timeDeltas[i] ?? 0))
  }
  let total = 0
  let idle = 0
  const places = new Map<string, number>()
  const functions = new Map<string, number>()
  for (const [id, us] of self) {
    const node = byId.get(id)
    if (!node) continue
    const { functionName, url, lineNumber } = node.callFrame
    total += us
    if (functionName === '(idle)') {
      idle += us
      continue
    }
    const place = placeOf(url, functionName)
    places.set(place, (places.get(place) ?? 0) + us)
    const key = `${functionName || '(anonymous)'} ${place}${url ? `:${lineNumber + 1}` : ''}`
    functions.set(key, (functions.get(key) ?? 0) + us)
  }
  const busy = total - idle
  const inclusive = new Map<string, number>()
  if (values.inclusive) {
    const wanted = new RegExp(values.inclusive)
    const parent = new Map<number, number>()
    for (const n of profile.nodes) for (const c of n.children ?? []) parent.set(c, n.id)
    for (const [id, us] of self) {
      const seen = new Set<string>()
      for (let at: number | undefined = id; at !== undefined; at = parent.get(at)) {
        const { functionName, url, lineNumber } = (byId.get(at) as ProfileNode).callFrame
        const place = placeOf(url, functionName)
        if (!wanted.test(place)) continue
        const key = `${functionName || '(anonymous)'} ${place}:${lineNumber + 1}`
        if (seen.has(key)) continue
        seen.add(key)
        inclusive.set(key, (inclusive.get(key) ?? 0) + us)
      }
    }
  }
  console.log(`${file}: ${(busy / 1000).toFixed(0)} ms busy of ${(total / 1000).toFixed(0)} ms sampled`)
  console.log('  by place (share of busy time):')
  for (const [place, us] of [...places].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`    ${pct(us, busy)}  ${place}`)
  }
  console.log('  by function, self time:')
  for (const [name, us] of [...functions].sort((a, b) => b[1] - a[1]).slice(0, top)) {
    console.log(`    ${pct(us, busy)}  ${name}`)
  }
  if (inclusive.size > 0) {
    console.log(`  by function, inclusive, where the place matches ${values.inclusive}:`)
    for (const [name, us] of [...inclusive].sort((a, b) => b[1] - a[1]).slice(0, top)) {
      console.log(`    ${pct(us, busy)}  ${name}`)
    }
  }
}
