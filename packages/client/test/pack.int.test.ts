import { execFile } from 'node:child_process'
import { mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { promisify } from 'node:util'
import { findNode, freePort, REPO_ROOT, type RunningProcess, startProcess, waitForHttp } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'

const run = promisify(execFile)
const ADMIN = { email: 'pack@example.com', password: 'correct horse battery staple', org: 'Pack Inc' }
const NODE20 = findNode(20)

/** The `// example.mjs` block of a README, as a user would copy it. */
function readmeExample(file: string): string {
  const text = readFileSync(join(REPO_ROOT, file), 'utf8')
  const match = /```js\n(\/\/ example\.mjs[\s\S]*?)```/.exec(text)
  if (!match?.[1]) throw new Error(`${file} has no example.mjs block`)
  return match[1]
}

async function api<T>(base: string, path: string, token: string, body?: unknown): Promise<T> {
  const res = await fetch(`${base}${path}`, {
    method: body === undefined ? 'GET' : 'POST',
    headers: { authorization: `Bearer ${token}`, 'content-type': 'application/json' },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  })
  const json = (await res.json()) as { data: T }
  if (!res.ok) throw new Error(`${path}: ${res.status} ${JSON.stringify(json)}`)
  return json.data
}

describe('the packed @pm/client, installed with npm outside the workspace', () => {
  let dir: string
  let project: string
  let base: string
  let proc: RunningProcess
  let env: Record<string, string>

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pm-client-pack-'))
    project = join(dir, 'app')
    // 1. Pack as the README's `npm run pack` does (prepack builds dist/ with tsdown), for the
    //    client only, and install the tarball the way a user would. That command packs the CLI
    //    too, whose prepack cleans and rebuilds apps/cli/dist: beside the CLI's own pack test
    //    (apps/cli/test/pack.int.test.ts) it emptied that folder under the other pack, whose
    //    tarball then had no dist/ ("pm: not built yet", a full `npm test`, 2026-11-28).
    const packDir = join(dir, 'tarballs')
    await run('pnpm', ['--filter', '@pm/client', 'pack', '--pack-destination', packDir], {
      cwd: REPO_ROOT,
      timeout: 540_000,
    })
    const tarball = readdirSync(packDir).find((f) => f.startsWith('pm-client-') && f.endsWith('.tgz'))
    if (!tarball) throw new Error('pnpm pack wrote no tarball')
    await run('mkdir', ['-p', project])
    writeFileSync(
      join(project, 'package.json'),
      JSON.stringify({ name: 'app', private: true, type: 'module' }, null, 2),
    )
    await run(
      'npm',
      ['install', '--prefer-offline', '--no-audit', '--no-fund', '--loglevel=error', join(packDir, tarball)],
      { cwd: project, timeout: 180_000 },
    )

    // 2. The service, a key and a published prompt.
    base = `http://127.0.0.1:${await freePort()}`
    proc = startProcess('embedded', join(REPO_ROOT, 'apps/embedded/src/main.ts'), {
      PORT: new URL(base).port,
      DATA_DIR: join(dir, 'data'),
      BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
      BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
      BOOTSTRAP_ORG_NAME: ADMIN.org,
    })
    await waitForHttp(`${base}/health/ready`, 60_000, proc)
    const login = await fetch(`${base}/api/v1/auth/login`, {
      method: 'POST',
      headers: { 'content-type': 'application/json' },
      body: JSON.stringify({ email: ADMIN.email, password: ADMIN.password }),
    })
    const { accessToken, organizationId } = (
      (await login.json()) as {
        data: { accessToken: string; organizationId: string }
      }
    ).data
    const { key } = await api<{ key: string }>(
      base,
      `/api/v1/organizations/${organizationId}/api-keys`,
      accessToken,
      { name: 'pack', scopes: ['prompts:read', 'prompts:write'] },
    )
    const prompt = await api<{ _id: string }>(base, '/api/v1/prompts', key, {
      name: 'Greeting',
      template: 'Hello {{ name }}!',
    })
    await api(base, `/api/v1/prompts/${prompt._id}/publish`, accessToken, {})
    env = { PATH: process.env.PATH ?? '', PROMPTS_URL: base, PROMPTS_API_KEY: key, PROMPT_ID: prompt._id }
  }, 900_000)

  afterAll(async () => {
    await proc?.stop()
    if (dir) rmSync(dir, { recursive: true, force: true })
  })

  it('ships only what runs outside the workspace', () => {
    const manifest = JSON.parse(
      readFileSync(join(project, 'node_modules/@pm/client/package.json'), 'utf8'),
    ) as { dependencies?: Record<string, string>; exports: Record<string, Record<string, string>> }
    expect(Object.keys(manifest.dependencies ?? {})).toEqual(['@sinclair/typebox'])
    expect(manifest.exports['.']).toEqual({ types: './dist/index.d.ts', default: './dist/index.js' })
    const files = readdirSync(join(project, 'node_modules/@pm/client/dist'))
    expect(files).toEqual(expect.arrayContaining(['index.js', 'index.d.ts']))
    // Nothing refers to a workspace package any more.
    for (const file of ['index.js', 'index.d.ts']) {
      const text = readFileSync(join(project, 'node_modules/@pm/client/dist', file), 'utf8')
      expect(text, file).not.toMatch(/from ["']@pm\//)
    }
  })

  it('the README example runs as written (both READMEs hold the same one)', async () => {
    const example = readmeExample('packages/client/README.md')
    expect(readmeExample('README.md')).toBe(example)
    writeFileSync(join(project, 'example.mjs'), example)
    const nodes = [process.execPath, ...(NODE20 ? [NODE20] : [])]
    for (const node of nodes) {
      const { stdout } = await run(node, ['example.mjs'], { cwd: project, env, timeout: 60_000 })
      expect(stdout, node).toBe('Hello Ada! 1 network\n')
    }
    // Down: the fallback template stands in.
    const down = await run(process.execPath, ['example.mjs'], {
      cwd: project,
      env: { ...env, PROMPTS_URL: 'http://127.0.0.1:9' },
      timeout: 60_000,
    })
    expect(down.stdout).toBe('Hello Ada! null fallback\n')
  }, 120_000)

  it.skipIf(!NODE20)('runs on Node.js 20', async () => {
    const { stdout } = await run(NODE20 ?? 'node', ['-p', 'process.versions.node'])
    expect(stdout.split('.')[0]).toBe('20')
  })

  it('its declarations type-check a strict consumer on their own', async () => {
    writeFileSync(
      join(project, 'consumer.ts'),
      `import { PromptClient, PromptServiceError, type RenderedPrompt } from '@pm/client'
const client = new PromptClient({ baseUrl: 'http://localhost:8080', apiKey: 'pk_x' })
const rendered: RenderedPrompt = await client.invoke('id', { name: 'Ada' }, { env: 'production' })
const source: 'network' | 'cache' | 'stale' | 'fallback' = rendered.source
const page = await client.api.listPrompts({ query: { search: 'greeting', limit: 10 } })
const total: number = page.pagination.total
// @ts-expect-error: not a query field of listPrompts
await client.api.listPrompts({ query: { nope: 1 } })
// @ts-expect-error: createPrompt needs a body
await client.api.createPrompt({})
const error = new PromptServiceError({ status: 0, code: 'NETWORK_ERROR', message: 'down' })
console.log(source, total, error.code)
`,
    )
    const tsc = join(REPO_ROOT, 'node_modules/typescript/bin/tsc')
    const result = await run(
      process.execPath,
      [
        tsc,
        '--noEmit',
        '--strict',
        '--skipLibCheck',
        'false',
        '--module',
        'nodenext',
        '--moduleResolution',
        'nodenext',
        '--target',
        'es2022',
        'consumer.ts',
      ],
      { cwd: project, timeout: 120_000 },
    ).catch((err: { stdout?: string; message: string }) => ({ stdout: err.stdout ?? err.message }))
    expect(result.stdout).toBe('')
  }, 150_000)
})
