// The first route's JavaScript budget: what the browser must download before the sign-in page
// or the prompts list can run (the entry chunk and its static imports), gzipped. The build
// fails above the limit.
import { readFileSync, rmSync } from 'node:fs'
import { join } from 'node:path'
import { gzipSync } from 'node:zlib'

const LIMIT_KIB = 250
const dist = join(import.meta.dirname, '..', 'dist')

interface Chunk {
  file: string
  isEntry?: boolean
  imports?: string[]
}
const manifest = JSON.parse(readFileSync(join(dist, '.vite', 'manifest.json'), 'utf8')) as Record<
  string,
  Chunk
>
// Read once here; it is not part of what the gateway serves.
rmSync(join(dist, '.vite'), { recursive: true, force: true })
const entry = Object.entries(manifest).find(([, c]) => c.isEntry)
if (!entry) throw new Error('no entry chunk in the Vite manifest')

// The entry and everything it imports statically (lazy routes are dynamic imports: not counted).
const files = new Set<string>()
const visit = (key: string) => {
  const chunk = manifest[key]
  if (!chunk || files.has(chunk.file)) return
  files.add(chunk.file)
  for (const next of chunk.imports ?? []) visit(next)
}
visit(entry[0])

let gzipped = 0
for (const file of files) gzipped += gzipSync(readFileSync(join(dist, file)), { level: 9 }).length
const kib = gzipped / 1024
const line = `dashboard: first route JavaScript ${kib.toFixed(1)} KiB gzipped (${files.size} files; budget ${LIMIT_KIB} KiB)`
if (kib > LIMIT_KIB) {
  console.error(`${line}: OVER BUDGET`)
  process.exit(1)
}
console.log(line)
