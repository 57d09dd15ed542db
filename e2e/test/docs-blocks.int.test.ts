import { execFile } from 'node:child_process'
import {
  chmodSync,
  existsSync,
  mkdirSync,
  mkdtempSync,
  readdirSync,
  readFileSync,
  rmSync,
  symlinkSync,
  writeFileSync,
} from 'node:fs'
import { tmpdir } from 'node:os'
import { dirname, join } from 'node:path'
import { promisify } from 'node:util'
import { entryArgs, freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
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

const SHELL = new Set(['sh', 'bash'])
/** Blocks that show a file's content or a layout, not something to run. */
const CONTENT = new Set(['', 'text', 'json', 'yaml', 'handlebars'])

/** The shell blocks of a doc to run, after checking that every other block is content or says why it is skipped. */
function shellBlocks(
  file: string,
  runs: ReadonlySet<string> = SHELL,
): { run: DocBlock[]; skipped: string[] } {
  const blocks = docBlocks(file)
  const unmarked = blocks.filter((b) => !b.skip && !runs.has(b.lang) && !CONTENT.has(b.lang))
  // Every block is run, is content, or is marked: a new block must be made runnable or say why not.
  expect(unmarked.map((b) => `${b.file}:${b.line} ${b.lang}`)).toEqual([])
  return {
    run: blocks.filter((b) => !b.skip && SHELL.has(b.lang)),
    skipped: blocks.filter((b) => b.skip).map((b) => `${b.file}:${b.line} ${b.skip}`),
  }
}

/**
 * The blocks of README.md, clients/python/README.md, packages/client/README.md,
 * apps/cli/README.md and docs/*.md run verbatim, in that order, against one fresh embedded
 * default with the README's bootstrap admin; only `localhost:8080` is replaced by the test's
 * port. Each doc's shell blocks run in one bash session (later blocks use the variables of
 * earlier ones); the README walk-through's variables (BASE, TOKEN, ORG, KEY, PROMPT) carry over
 * to the later docs, as they would in a reader's terminal. The reader's environment is a fresh
 * HOME (the CLI's session file), `PM_URL` pointing at the service (the CLI's default is
 * localhost:8080), and `pm` on PATH for the docs that assume the CLI installed (the sources of
 * apps/cli, as the packed `pm` runs its build). Blocks marked skipped are listed with their
 * reasons. A failing command fails the test with the block's line and its output.
 */
describe('the docs: every block works as written', () => {
  let proc: RunningProcess
  let base: string
  let dataDir: string
  let home: string
  /** The README walk-through's variables, as `declare -p` wrote them. */
  let state: string
  let env: NodeJS.ProcessEnv
  const skipped: string[] = []

  beforeAll(async () => {
    dataDir = mkdtempSync(join(tmpdir(), 'pm-docs-'))
    home = join(dataDir, 'home')
    mkdirSync(home)
    state = join(dataDir, 'walkthrough.sh')
    const port = await freePort()
    base = `http://127.0.0.1:${port}`
    // README.md's first block, with the test's port and data folder.
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: String(port),
      DATA_DIR: join(dataDir, 'data'),
      BOOTSTRAP_ADMIN_EMAIL: 'admin@example.com',
      BOOTSTRAP_ADMIN_PASSWORD: 'change-me-please',
      BOOTSTRAP_ORG_NAME: 'Acme',
    })
    // `pm`, as installed from the packed CLI.
    const bin = join(dataDir, 'bin')
    mkdirSync(bin)
    writeFileSync(
      join(bin, 'pm'),
      `#!/usr/bin/env bash\nexec "${process.execPath}" ${entryArgs(join(REPO_ROOT, 'apps/cli/src/main.ts'))
        .map((arg) => `"${arg}"`)
        .join(' ')} "$@"\n`,
    )
    chmodSync(join(bin, 'pm'), 0o755)
    env = {
      ...process.env,
      HOME: home,
      PM_URL: base,
      DATA_DIR: join(dataDir, 'data'),
      PATH: `${bin}:${dirname(process.execPath)}:${process.env.PATH ?? ''}`,
    }
    delete env.PM_API_KEY
    delete env.PM_TOKEN
    delete env.PM_ORG
    delete env.PM_CONFIG
    await waitForHttp(`${base}/health/ready`, 90_000, proc)
  }, 90_000)

  afterAll(async () => {
    await proc?.stop()
    if (dataDir) rmSync(dataDir, { recursive: true, force: true })
  })

  /** Runs a bash script (set -euo pipefail, the walk-through's variables loaded when saved). */
  async function bash(
    label: string,
    script: string,
    cwd = REPO_ROOT,
    more: NodeJS.ProcessEnv = {},
  ): Promise<string> {
    const prelude = `set -euo pipefail\nif [ -f '${state}' ]; then source '${state}'; fi\n`
    const out = await run('bash', ['-c', prelude + script.replaceAll('http://localhost:8080', base)], {
      cwd,
      env: { ...env, ...more },
      timeout: 60_000,
      maxBuffer: 8 << 20,
    }).catch((err: { stdout?: string; stderr?: string; code?: number }) => {
      throw new Error(`a block of ${label} failed (exit ${err.code}):\n${err.stderr}\n${err.stdout}`)
    })
    return out.stdout
  }

  function script(blocks: readonly DocBlock[]): string {
    return blocks.map((b) => `echo "--- ${b.file}:${b.line}" >&2\n${b.code}\n`).join('')
  }

  it('README.md and clients/python/README.md', async () => {
    const readme = shellBlocks('README.md')
    skipped.push(...readme.skipped)
    expect(readme.run.length).toBeGreaterThanOrEqual(2)
    let text = script(readme.run)
    // What the walk-through defined, for the docs after it.
    text += `declare -p BASE TOKEN ORG KEY PROMPT > '${state}'\n`
    // Then the Python client's README, with the key and the prompt the walk-through made
    // (its PROMPTS_URL, PROMPTS_API_KEY and PROMPT_ID) and the client from this checkout.
    const python = shellBlocks('clients/python/README.md', new Set(['python']))
    skipped.push(...python.skipped)
    // One Python process for all of them: later blocks use the client the first one made.
    const pythonCode = docBlocks('clients/python/README.md')
      .filter((b) => b.lang === 'python' && !b.skip)
      .map((b) => `# clients/python/README.md:${b.line}\n${b.code}`)
      .join('\n')
    text += `echo "--- clients/python/README.md" >&2\nPROMPTS_URL=$BASE PROMPTS_API_KEY=$KEY PROMPT_ID=$PROMPT PYTHONPATH=clients/python/src python3 - <<'PYTHON_BLOCK'\n${pythonCode}\nPYTHON_BLOCK\n`
    const out = await bash('README.md / clients/python/README.md', text)
    // The walk-through's answers, as its comments show them.
    expect(out).toContain('"renderedContent":"Hello Ada!"')
    expect(out).toContain('"renderedMessages":[{"role":"system","content":"You help Ada."}')
    expect(out).not.toContain('"error"')
    // The Python README's example: the latest version rendered, then a 404 with a UUID request id.
    expect(out).toMatch(/Hello Ada! 1 network\n/)
    expect(out).toMatch(/404 NOT_FOUND [0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}\n/)
    expect(out).toContain('Hello Bo!')
  }, 90_000)

  it('packages/client/README.md: the example runs in an app that has the client', async () => {
    const doc = shellBlocks('packages/client/README.md', new Set(['sh', 'js']))
    skipped.push(...doc.skipped)
    expect(doc.run).toEqual([])
    const examples = docBlocks('packages/client/README.md').filter((b) => b.lang === 'js' && !b.skip)
    expect(examples).toHaveLength(1)
    // The app: example.mjs beside node_modules/@pm/client (this checkout's, by its sources).
    const app = join(dataDir, 'my-app')
    mkdirSync(join(app, 'node_modules/@pm'), { recursive: true })
    symlinkSync(join(REPO_ROOT, 'packages/client'), join(app, 'node_modules/@pm/client'))
    writeFileSync(join(app, 'example.mjs'), examples[0]?.code ?? '')
    const out = await bash(
      'packages/client/README.md',
      `PROMPTS_URL=$BASE PROMPTS_API_KEY=$KEY PROMPT_ID=$PROMPT node --conditions=source example.mjs\n`,
      app,
    )
    // As its comment shows.
    expect(out).toBe('Hello Ada! 1 network\n')
  }, 90_000)

  it('apps/cli/README.md', async () => {
    const doc = shellBlocks('apps/cli/README.md')
    skipped.push(...doc.skipped)
    expect(doc.run.length).toBeGreaterThan(0)
    const out = await bash('apps/cli/README.md', script(doc.run))
    expect(out).toContain('Welcome')
    expect(out).toContain('You help Ada.')
  }, 90_000)

  it('docs/*.md: the command examples', async () => {
    const files = readdirSync(join(REPO_ROOT, 'docs'))
      .filter((f) => f.endsWith('.md'))
      .sort()
    let ran = 0
    for (const name of files) {
      const doc = shellBlocks(`docs/${name}`)
      skipped.push(...doc.skipped)
      if (doc.run.length === 0) continue
      // `npm run cli` runs in the repository, as the docs say; `pm` anywhere, so such a doc
      // gets a folder of its own (prompts-as-code pulls files into ./prompts).
      const text = script(doc.run)
      let cwd = REPO_ROOT
      if (!text.includes('npm run ')) {
        cwd = join(dataDir, `docs-${name}`)
        mkdirSync(cwd)
      }
      await bash(`docs/${name}`, text, cwd, { PM_PASSWORD: 'change-me-please' })
      ran += doc.run.length
    }
    expect(ran).toBeGreaterThanOrEqual(2)
    // deploy.md's backup, where it says.
    const backups = readdirSync(join(home, 'pm-backups'))
    expect(backups).toHaveLength(1)
    expect(backups[0]).toMatch(/^pm-\d{4}-\d\d-\d\d\.pmbak$/)
    // prompts-as-code.md's pull, into its folder.
    expect(existsSync(join(dataDir, 'docs-prompts-as-code.md/prompts/support-bot.prompt'))).toBe(true)
  }, 90_000)

  it('every skipped block says why', () => {
    expect(skipped.length).toBeGreaterThan(5)
    for (const s of skipped) expect(s).toMatch(/^\S+:\d+ .{8,}/)
  })
})
