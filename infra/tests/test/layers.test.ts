import { execFile } from 'node:child_process'
import { mkdirSync, rmSync, writeFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { promisify } from 'node:util'
import { afterAll, describe, expect, it } from 'vitest'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))
const BIOME = join(ROOT, 'node_modules/.bin/biome')
const run = promisify(execFile)

/**
 * The layer rules of biome.json (noRestrictedImports overrides) fail on planted violations.
 * The planted files live in folders no workspace package lints (no package.json there), and
 * go away afterwards.
 */
describe('layer rules', () => {
  const tag = `zz-layers-${process.pid}`
  const pkgDir = join(ROOT, 'packages', tag)
  const appDir = join(ROOT, 'apps', tag)
  afterAll(() => {
    rmSync(pkgDir, { recursive: true, force: true })
    rmSync(appDir, { recursive: true, force: true })
  })

  async function lint(file: string, text: string): Promise<{ code: number; out: string }> {
    mkdirSync(join(file, '..'), { recursive: true })
    writeFileSync(file, text)
    try {
      const { stdout, stderr } = await run(BIOME, ['lint', '--max-diagnostics=50', file], { cwd: ROOT })
      return { code: 0, out: stdout + stderr }
    } catch (err) {
      const e = err as { code: number; stdout: string; stderr: string }
      return { code: e.code, out: e.stdout + e.stderr }
    }
  }

  it('an import circle fails, type-only imports included (noImportCycles, ignoreTypes: false)', async () => {
    const a = join(pkgDir, 'src/cycle-a.ts')
    const b = join(pkgDir, 'src/cycle-b.ts')
    mkdirSync(join(a, '..'), { recursive: true })
    writeFileSync(b, "import type { A } from './cycle-a.ts'\nexport type B = { a?: A }\n")
    const r = await lint(a, "import type { B } from './cycle-b.ts'\nexport type A = { b?: B }\n")
    expect(r.code).not.toBe(0)
    expect(r.out).toContain('noImportCycles')
    rmSync(b, { force: true })
    rmSync(a, { force: true })
  })

  it('a package importing an app fails, by name or by path', async () => {
    const r = await lint(
      join(pkgDir, 'src/planted.ts'),
      "import { buildApp } from '@pm/gateway'\nimport { x } from '../../../apps/prompts/src/app.ts'\nexport const y = [buildApp, x]\n",
    )
    expect(r.code).not.toBe(0)
    expect(r.out.match(/noRestrictedImports/g)).toHaveLength(2)
    expect(r.out).toContain('a package never imports an app')
  })

  it('a route file importing a store or app.ts fails', async () => {
    const r = await lint(
      join(appDir, 'src/routes/planted.ts'),
      "import type { PromptStore } from '../store/types.ts'\nimport type { buildApp } from '../app.ts'\nexport type Y = [PromptStore, typeof buildApp]\n",
    )
    expect(r.code).not.toBe(0)
    expect(r.out).toContain('routes call service methods, never stores')
    expect(r.out).toContain('never from app.ts')
  })

  it('the same imports outside routes, and deps.ts in a route, pass', async () => {
    const service = await lint(
      join(appDir, 'src/services/fine.ts'),
      "import type { PromptStore } from '../store/types.ts'\nexport type Y = PromptStore\n",
    )
    expect(service.out).not.toContain('noRestrictedImports')
    const route = await lint(
      join(appDir, 'src/routes/fine.ts'),
      "import type { PromptsDeps } from '../deps.ts'\nexport type Y = PromptsDeps\n",
    )
    expect(route.out).not.toContain('noRestrictedImports')
  })
})
