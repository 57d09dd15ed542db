/**
 * Summarises V8 CPU profiles (`pnpm bench:invoke --cpu-prof` writes them to bench/profiles/):
 * the share of samples by where the code lives (a package, node's own code, the project's
 * apps and packages, GC, idle) and the functions with the most self time.
 *
 *   node bench/src/profile.ts bench/profiles/CPU.*.cpuprofile [--top 25] [--inclusive REGEX] [--from S]
 *
 * `--inclusive REGEX`: also the functions whose place matches REGEX (e.g. `apps/gateway|kit`)
 * by inclusive time (their callees counted), to see what one of the project's steps costs.
 * `--from S`: only the samples taken S seconds or more after the profile started (leaves the
 * start-up out of a short run's profile).
 *
 * Profiles of the bundled benches (PM_BENCH_BUNDLED, scripts/bench-pack.mjs) name the bundle's
 * file; where that file can be read here at the same path, each frame is put back in its source
 * module by the `// <path>` line rolldown writes above every module it bundles.
 */
import { readFileSync } from 'node:fs'
import { fileURLToPath } from 'node:url'
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
  options: {
    top: { type: 'string', default: '25' },
    inclusive: { type: 'string' },
    from: { type: 'string', default: '0' },
  },
})
const top = Number(values.top)

/** Per bundle file: the first line (0-based) of each bundled module and the module's path. */
const bundles = new Map<string, Array<{ line: number; path: string }>>()
function modulesOf(url: string): Array<{ line: number; path: string }> {
  let found = bundles.get(url)
  if (found) return found
  found = []
  if (url.startsWith('file://') && url.endsWith('.mjs')) {
    try {
      const lines = readFileSync(fileURLToPath(url), 'utf8').split('\n')
      for (const [line, text] of lines.entries()) {
        const m = /^\/\/ ((?:node_modules|apps|packages|bench)\/\S+)$/.exec(text)
        if (m) found.push({ line, path: m[1] as string })
      }
    } catch {
      // not here: the frame keeps the bundle's name
    }
  }
  bundles.set(url, found)
  return found
}

/** The source module of a frame of a bundle (the nearest module start above it), else the url. */
function sourceOf(url: string, lineNumber: number): string {
  const modules = modulesOf(url)
  let lo = 0
  let hi = modules.length - 1
  let at: string | undefined
  while (lo <= hi) {
    const mid = (lo + hi) >> 1
    const m = modules[mid] as { line: number; path: string }
    if (m.line <= lineNumber) {
      at = m.path
      lo = mid + 1
    } else hi = mid - 1
  }
  return at === undefined ? url : `/${at}`
}

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
  const fromUs = Number(values.from) * 1e6
  let elapsed = 0
  for (const [i, id] of profile.samples.entries()) {
    const delta = profile.timeDeltas[i] ?? 0
    elapsed += delta
    if (elapsed >= fromUs) self.set(id, (self.get(id) ?? 0) + delta)
  }
  let total = 0
  let idle = 0
  const places = new Map<string, number>()
  const functions = new Map<string, number>()
  for (const [id, us] of self) {
    const node = byId.get(id)
    if (!node) continue
    const { functionName, lineNumber } = node.callFrame
    const url = sourceOf(node.callFrame.url, lineNumber)
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
        const { functionName, lineNumber } = (byId.get(at) as ProfileNode).callFrame
        const place = placeOf(sourceOf((byId.get(at) as ProfileNode).callFrame.url, lineNumber), functionName)
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
