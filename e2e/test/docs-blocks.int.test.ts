import { execFile } from 'node:child_process'
import { mkdtempSync, readFileSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)

/** A fenced shell block of a doc, with the skip reason its marker gives (if any). */
export interface DocBlock {
  file: string
  line: number
  lang: string
  code: string
  skip?: string
}

const SKIP = /^<!--\s*docs-test:\s*skip\s*\((.+)\)\s*-->$/

/**
 * Every fenced block of a Markdown file, in order. A block whose previous non-blank line is
 * `<!-- docs-test: skip (reason) -->` is marked skipped with that reason: it needs something a
 * test machine lacks (a browser, MongoDB, Docker, your own ids).
 */
export function docBlocks(file: string): DocBlock[] {
  const lines = readFileSync(join(REPO_ROOT, file), 'utf8').split('\n')
  const blocks: DocBlock[] = []
  for (let i = 0; i < lines.length; i++) {
    const open = /^```(\w*)\s*$/.exec(lines[i] ?? '')
    if (!open) continue
    let end = i + 1
    while (end < lines.length && !/^```\s*$/.test(lines[end] ?? '')) end++
    let before = i - 1
    while (before >= 0 && (lines[before] ?? '').trim() === '') before--
    const skip = SKIP.exec((lines[before] ?? '').trim())?.[1]
    blocks.push({
      file,
      line: i + 1,
      lang: open[1] ?? '',
      code: lines.slice(i + 1, end).join('\n'),
      ...(skip ? { skip } : {}),
    })
    i = end
  }
  return blocks
}

/**
 * README.md's shell blocks run verbatim, in order, in one bash session (later blocks use the
 * variables of earlier ones) against a fresh embedded default with the README's bootstrap
 * admin; only `localhost:8080` is replaced by the test's port. Blocks marked skipped are listed
 * with their reasons. A failing command fails the test with the block's line and its output.
 */
describe('README.md and clients/python/README.md: the blocks work as written', () => {
  const blocks = docBlocks('README.md')
  let proc: RunningProcess
  let base: string
  let dataDir: string

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'pm-docs-'))
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    // The README's first block, with the test's port and data folder.
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: dataDir,
      BOOTSTRAP_ADMIN_EMAIL: 'admin@example.com',
      BOOTSTRAP_ADMIN_PASSWORD: 'change-me-please',
      BOOTSTRAP_ORG_NAME: 'Acme',
    })
    await waitForHttp(`${base}/health/ready`, 60_000, proc)
  }, 90_000)

  afterAll(async () => {
    await proc?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  it('every unmarked sh block runs without an error; each marked one says why', async () => {
    const shell = blocks.filter((b) => b.lang === 'sh' || b.lang === 'bash')
    const skipped = blocks.filter((b) => b.skip).map((b) => `README.md:${b.line} ${b.skip}`)
    // Every block is either run or marked: a new block must be made runnable or say why not.
    expect(blocks.filter((b) => !b.skip && b.lang !== 'sh' && b.lang !== 'bash' && b.lang !== '')).toEqual([])
    const runnable = shell.filter((b) => !b.skip)
    expect(runnable.length).toBeGreaterThanOrEqual(2)
    let script = 'set -euo pipefail\n'
    for (const b of runnable) {
      script += `echo "--- README.md:${b.line}" >&2\n${b.code.replaceAll('http://localhost:8080', base)}\n`
    }
    // Then the Python client's README, with the key and the prompt the walk-through made
    // (its PROMPTS_URL, PROMPTS_API_KEY and PROMPT_ID) and the client from this checkout.
    const python = docBlocks('clients/python/README.md')
    expect(python.filter((b) => !b.skip && b.lang !== 'python' && b.lang !== '')).toEqual([])
    // One Python process for all of them: later blocks use the client the first one made.
    const pythonCode = python
      .filter((b) => b.lang === 'python' && !b.skip)
      .map((b) => `# clients/python/README.md:${b.line}\n${b.code}`)
      .join('\n')
    script += `echo "--- clients/python/README.md" >&2\nPROMPTS_URL=$BASE PROMPTS_API_KEY=$KEY PROMPT_ID=$PROMPT PYTHONPATH=clients/python/src python3 - <<'PYTHON_BLOCK'\n${pythonCode}\nPYTHON_BLOCK\n`
    const out = await run('bash', ['-c', script], {
      cwd: REPO_ROOT,
      timeout: 60_000,
      maxBuffer: 8 << 20,
    }).catch((err: { stdout?: string; stderr?: string; code?: number }) => {
      throw new Error(`a README block failed (exit ${err.code}):\n${err.stderr}\n${err.stdout}`)
    })
    // The walk-through's answers, as its comments show them.
    expect(out.stdout).toContain('"renderedContent":"Hello Ada!"')
    expect(out.stdout).toContain('"renderedMessages":[{"role":"system","content":"You help Ada."}')
    expect(out.stdout).not.toContain('"error"')
    // The Python README's example: the latest version rendered, then a 404 with a UUID request id.
    expect(out.stdout).toMatch(/Hello Ada! 1 network\n/)
    expect(out.stdout).toMatch(/404 NOT_FOUND [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n/)
    expect(out.stdout).toContain('Hello Bo!')
    expect(skipped.length).toBeGreaterThan(0)
  }, 90_000)
})
