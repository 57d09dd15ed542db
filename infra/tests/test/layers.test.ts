import { execFile } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const BIOME = join(ROOT, 'node_modules/.bin/biome')
const run = promisify(execFile)

/**
 * The layer rules of biome.json (noRestrictedImports overrides) fail on planted violations.
 * The planted files live in folders no workspace package lints (no package.json there), and
 * go away afterwards. Every planted file is linted in one Biome run (each run builds the whole
 * project's module graph for noImportCycles: seconds of CPU), its GitHub reporter lines read
 * per file.
 */
describe('layer rules', () => {
  const tag = `zz-layers-${process.pid}`
  const pkgDir = join(ROOT, 'packages', tag)
  const appDir = join(ROOT, 'apps', tag)
  const planted = {
    cycleA: [
      join(pkgDir, 'src/cycle-a.ts'),
      "import type { B } from './cycle-b.ts'\nexport type A = { b?: B }\n",
    ],
    cycleB: [
      join(pkgDir, 'src/cycle-b.ts'),
      "import type { A } from './cycle-a.ts'\nexport type B = { a?: A }\n",
    ],
    packageImportsApp: [
      join(pkgDir, 'src/planted.ts'),
      "import { buildApp } from '@pm/gateway'\nimport { x } from '../../../apps/prompts/src/app.ts'\nexport const y = [buildApp, x]\n",
    ],
    routeImportsStore: [
      join(appDir, 'src/routes/planted.ts'),
      "import type { PromptStore } from '../store/types.ts'\nimport type { buildApp } from '../app.ts'\nexport type Y = [PromptStore, typeof buildApp]\n",
    ],
    serviceImportsStore: [
      join(appDir, 'src/services/fine.ts'),
      "import type { PromptStore } from '../store/types.ts'\nexport type Y = PromptStore\n",
    ],
    routeImportsDeps: [
      join(appDir, 'src/routes/fine.ts'),
      "import type { PromptsDeps } from '../deps.ts'\nexport type Y = PromptsDeps\n",
    ],
  } satisfies Record<string, [file: string, text: string]>
  /** Biome's exit code, and each planted file's diagnostics ("<rule>: <message>" lines). */
  let code = 0
  const found = new Map<string, string[]>()

  beforeAll(async () => {
    for (const [file, text] of Object.values(planted)) {
      mkdirSync(join(file, '..'), { recursive: true })
      writeFileSync(file, text)
    }
    const files = Object.values(planted).map(([file]) => file)
    let out: string
    try {
      out = (
        await run(BIOME, ['lint', '--reporter=github', '--max-diagnostics=none', ...files], { cwd: ROOT })
      ).stdout
    } catch (err) {
      const e = err as { code: number; stdout: string }
      code = e.code
      out = e.stdout
    }
    for (const line of out.split('\n')) {
      const m = /^::\w+ title=lint\/\w+\/(\w+),file=([^,]+),[^:]*::(.*)$/.exec(line)
      if (!m?.[1] || !m[2]) continue
      found.set(m[2], [...(found.get(m[2]) ?? []), `${m[1]}: ${m[3]}`])
    }
  }, 120_000)

  afterAll(() => {
    rmSync(pkgDir, { recursive: true, force: true })
    rmSync(appDir, { recursive: true, force: true })
  })

  const of = (name: keyof typeof planted) => (found.get(planted[name][0]) ?? []).join('\n')

  it('fails the run: the planted violations are errors', () => {
    expect(code).not.toBe(0)
  })

  it('an import circle fails, type-only imports included (noImportCycles, ignoreTypes: false)', () => {
    expect(of('cycleA')).toContain('noImportCycles')
    expect(of('cycleB')).toContain('noImportCycles')
  })

  it('a package importing an app fails, by name or by path', () => {
    expect(of('packageImportsApp').match(/noRestrictedImports/g)).toHaveLength(2)
    expect(of('packageImportsApp')).toContain('a package never imports an app')
  })

  it('a route file importing a store or app.ts fails', () => {
    expect(of('routeImportsStore')).toContain('routes call service methods, never stores')
    expect(of('routeImportsStore')).toContain('never from app.ts')
  })

  it('the same imports outside routes, and deps.ts in a route, pass', () => {
    expect(of('serviceImportsStore')).not.toContain('noRestrictedImports')
    expect(of('routeImportsDeps')).not.toContain('noRestrictedImports')
    // Biome did read them: the lines above are not empty for want of a run.
    expect(found.size).toBeGreaterThanOrEqual(3)
  })
})
