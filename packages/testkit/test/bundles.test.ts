import { readdirSync, readFileSync } from 'node:fs'
import { dirname, join } from 'node:path'
import { afterEach, describe, expect, it } from 'vitest'
import { BUNDLED, entryArgs } from '../src/bundles.ts'
import { REPO_ROOT } from '../src/root.ts'

const wanted = process.env.PM_TEST_BUNDLES

afterEach(() => {
  if (wanted === undefined) delete process.env.PM_TEST_BUNDLES
  else process.env.PM_TEST_BUNDLES = wanted
})

describe('entryArgs', () => {
  const prompts = join(REPO_ROOT, 'apps/prompts/src/server.ts')

  it('starts the TypeScript source unless PM_TEST_BUNDLES=1', () => {
    for (const value of [undefined, '0', 'true']) {
      if (value === undefined) delete process.env.PM_TEST_BUNDLES
      else process.env.PM_TEST_BUNDLES = value
      expect(entryArgs(prompts)).toEqual([
        '--conditions=source',
        '--disable-warning=ExperimentalWarning',
        prompts,
      ])
    }
  })

  it('starts an entry that is not bundled from its source, bundles or not', () => {
    process.env.PM_TEST_BUNDLES = '1'
    const other = join(REPO_ROOT, 'apps/cli/src/cli.ts')
    expect(entryArgs(other).at(-1)).toBe(other)
  })

  it('with PM_TEST_BUNDLES=1, starts a bundle of each entry, import.meta.resolve kept to its source file', () => {
    process.env.PM_TEST_BUNDLES = '1'
    const args = entryArgs(prompts)
    expect(args.slice(0, -1)).toEqual([
      '--conditions=source',
      '--experimental-import-meta-resolve',
      '--disable-warning=ExperimentalWarning',
    ])
    const dir = dirname(args.at(-1) as string)
    expect(args.at(-1)).toBe(join(dir, 'prompts.mjs'))
    const files = readdirSync(dir)
    for (const { name } of BUNDLED) expect(files).toContain(`${name}.mjs`)
    // The gateway's calls resolve from apps/gateway/src, wherever the bundle lies.
    const code = files.map((f) => readFileSync(join(dir, f), 'utf8')).join('\n')
    expect(code).toContain(
      `import.meta.resolve(specifier, "file://${join(REPO_ROOT, 'apps/gateway/src/docs.ts')}")`,
    )
    expect(code).not.toMatch(/import\.meta\.resolve\((?!specifier, ")/)
  })
})
