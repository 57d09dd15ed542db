import { existsSync, globSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { fileURLToPath } from 'node:url'
import { describe, expect, it } from 'vitest'
import rootConfig from '../../../vitest.config.ts'

const ROOT = fileURLToPath(new URL('../../..', import.meta.url))

/** The workspace's package folders (pnpm-workspace.yaml's `packages` globs). */
function workspaceDirs(): string[] {
  const yaml = readFileSync(join(ROOT, 'pnpm-workspace.yaml'), 'utf8')
  const block = /^packages:\n((?:\s+- .+\n)+)/m.exec(yaml)?.[1] ?? ''
  const globs = [...block.matchAll(/- (.+)/g)].map((m) => (m[1] ?? '').trim())
  return globs
    .flatMap((g) => globSync(g, { cwd: ROOT }))
    .filter((d) => existsSync(join(ROOT, d, 'package.json')))
}

/**
 * `npm test` runs every package's tests in one Vitest run at the root (vitest.config.ts): a
 * package whose tests are Vitest's but whose config no project glob there matches would be
 * left out of it without a word.
 */
describe("the root's Vitest run", () => {
  it("takes every package whose scripts run Vitest, by the package's vitest.config.ts", () => {
    const projects = (rootConfig.test?.projects ?? []) as string[]
    const matched = new Set(projects.flatMap((g) => globSync(g, { cwd: ROOT })))
    const withVitest = workspaceDirs().filter((dir) => {
      const scripts = JSON.parse(readFileSync(join(ROOT, dir, 'package.json'), 'utf8')).scripts ?? {}
      return Object.values(scripts).some((s) => typeof s === 'string' && /\bvitest\b/.test(s))
    })
    expect(withVitest.length).toBeGreaterThan(10)
    expect(withVitest.filter((dir) => !matched.has(join(dir, 'vitest.config.ts')))).toEqual([])
  })
})
