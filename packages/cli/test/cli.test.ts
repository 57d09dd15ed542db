import { mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { run } from '../src/cli.ts'
import { parseScopes } from '../src/context.ts'
import { ProgressBar, renderBar } from '../src/progress.ts'
import { readSession, writeSession } from '../src/session.ts'

const ID = '0123456789abcdef01234567'
const V1 = '0123456789abcdef0123456a'
const V2 = '0123456789abcdef0123456b'
const BATCH = '0123456789abcdef0123456c'
const ORG = '0123456789abcdef0123456d'

function capture(isTTY = false) {
  const chunks: string[] = []
  return { write: (t: string) => chunks.push(t), isTTY, text: () => chunks.join('') }
}

interface Seen {
  method: string
  url: string
  body: unknown
  authorization: string | undefined
}

describe('pm (in process, against a fake gateway)', () => {
  let app: FastifyInstance
  let base: string
  let dir: string
  const seen: Seen[] = []
  let polls = 0

  beforeAll(async () => {
    dir = mkdtempSync(join(tmpdir(), 'pm-cli-'))
    app = Fastify()
    app.addContentTypeParser('multipart/form-data', { parseAs: 'string' }, (_r, body, done) =>
      done(null, body),
    )
    app.addHook('onRequest', async (request) => {
      seen.push({
        method: request.method,
        url: request.url,
        body: undefined,
        authorization: request.headers.authorization,
      })
    })
    app.addHook('preHandler', async (request) => {
      const last = seen.at(-1)
      if (last) last.body = request.body
    })
    app.get('/api/v1/prompts/:id/versions', async () => ({
      data: {
        versions: [
          { _id: V2, version: 2 },
          { _id: V1, version: 1 },
        ],
      },
    }))
    app.post('/api/v1/prompts/:id/environments/:env/promote', async (request) => ({
      data: {
        versionId: (request.body as { versionId: string }).versionId,
        version: 1,
        promotedAt: new Date(0).toISOString(),
        promotedBy: ORG,
      },
    }))
    app.post('/api/v1/prompts/import', async (_request, reply) =>
      reply.code(202).send({ data: { batchId: BATCH, message: 'import accepted' } }),
    )
    app.get('/api/v1/prompts/import/:batchId', async () => {
      polls++
      const steps = [
        { status: 'processing', total: 3, created: 0, failed: 0, errors: [] },
        {
          status: 'processing',
          total: 3,
          created: 1,
          failed: 1,
          errors: [{ row: 3, message: 'template is required' }],
        },
        {
          status: 'completed',
          total: 3,
          created: 2,
          failed: 1,
          errors: [{ row: 3, message: 'template is required' }],
        },
      ]
      return { data: { batchId: BATCH, ...(steps[Math.min(polls - 1, 2)] ?? {}) } }
    })
    app.get('/api/v1/prompts', async (_request, reply) =>
      reply
        .code(401)
        .send({ error: { code: 'INVALID_CREDENTIALS', message: 'bad key', requestId: 'rid-7' } }),
    )
    await app.listen({ host: '127.0.0.1', port: 0 })
    const address = app.server.address()
    base = `http://127.0.0.1:${typeof address === 'object' && address ? address.port : 0}`
  })

  afterAll(async () => {
    await app.close()
    rmSync(dir, { recursive: true, force: true })
  })

  beforeEach(() => {
    seen.length = 0
    polls = 0
  })

  const env = (extra: Record<string, string> = {}) => ({
    PM_URL: base,
    PM_TOKEN: 'user-jwt',
    PM_ORG: ORG,
    PM_CONFIG: join(dir, 'session.json'),
    ...extra,
  })

  it('promote finds the version id from its number and pins it', async () => {
    const out = capture()
    const err = capture()
    const code = await run(['promote', ID, 'production', '--version', '1', '--json'], {
      stdout: out,
      stderr: err,
      env: env(),
    })
    expect(err.text()).toBe('')
    expect(code).toBe(0)
    expect(JSON.parse(out.text())).toMatchObject({ versionId: V1, version: 1 })
    const promote = seen.find((s) => s.url.includes('/promote'))
    expect(promote?.url).toBe(`/api/v1/prompts/${ID}/environments/production/promote?organizationId=${ORG}`)
    expect(promote?.body).toEqual({ versionId: V1 })
    expect(promote?.authorization).toBe('Bearer user-jwt')
  })

  it('import uploads the file, draws progress while polling, and reports the bad rows', async () => {
    const csv = join(dir, 'prompts.csv')
    writeFileSync(csv, 'name,template\nA,Hello {{x}}\nB,\n')
    const out = capture()
    const err = capture()
    const code = await run(['import', csv, '--interval', '1'], { stdout: out, stderr: err, env: env() })
    expect(code).toBe(1)
    expect(String(seen[0]?.body)).toContain('Hello {{x}}')
    expect(err.text().trim().split('\n')).toEqual([
      `[${'-'.repeat(30)}] 0/3 0% created 0, failed 0`,
      `[${'#'.repeat(20)}${'-'.repeat(10)}] 2/3 67% created 1, failed 1`,
      `[${'#'.repeat(30)}] 3/3 100% created 2, failed 1`,
    ])
    expect(out.text()).toContain(`Import ${BATCH} completed: 2 created, 1 failed of 3.`)
    expect(out.text()).toContain('row 3: template is required')
  })

  it('prints the service error with its code and request id, exit 1', async () => {
    const err = capture()
    const code = await run(['prompts', 'list'], {
      stdout: capture(),
      stderr: err,
      env: env({ PM_API_KEY: 'pk_wrong' }),
    })
    expect(code).toBe(1)
    expect(err.text()).toContain('error: INVALID_CREDENTIALS: bad key (request rid-7)')
    expect(seen[0]?.authorization).toBe('Bearer pk_wrong')
  })

  it('refuses bad usage with exit 2 before calling anything', async () => {
    const cases = [
      ['nope'],
      ['promote', ID, 'staging', '--version', '1'],
      ['promote', ID, 'preview'],
      ['invoke', ID, '--var', 'novalue'],
      ['keys', 'rotate'],
      ['prompts', 'list', '--limit', 'many'],
      ['init', '--email', 'a@b.co'],
    ]
    for (const args of cases) {
      const err = capture()
      expect(await run(args, { stdout: capture(), stderr: err, env: env() }), args.join(' ')).toBe(2)
      expect(err.text()).toContain('error:')
    }
    expect(seen).toEqual([])
    const noCredential = capture()
    expect(
      await run(['publish', ID], {
        stdout: capture(),
        stderr: noCredential,
        env: { PM_URL: base, PM_CONFIG: join(dir, 'none.json') },
      }),
    ).toBe(2)
    expect(noCredential.text()).toContain('pm login')
  })
})

describe('pieces', () => {
  it('renders a bar, redrawn in place on a terminal', () => {
    expect(renderBar(1, 4, 8)).toBe('[##------] 1/4 25%')
    expect(renderBar(0, 0, 4)).toBe('[----] 0/0 0%')
    const tty = capture(true)
    const bar = new ProgressBar(tty)
    bar.update(1, 2)
    bar.update(1, 2)
    bar.update(2, 2)
    bar.finish()
    expect(tty.text()).toBe(`\r${renderBar(1, 2)}\u001b[K\r${renderBar(2, 2)}\u001b[K\n`)
  })

  it('checks scopes', () => {
    expect(parseScopes('prompts:read, prompts:read,organization:read', [])).toEqual([
      'prompts:read',
      'organization:read',
    ])
    expect(parseScopes(undefined, ['prompts:read'])).toEqual(['prompts:read'])
    expect(() => parseScopes('prompts:admin', [])).toThrow(/unknown scope prompts:admin/)
  })

  it('keeps the session in a file only its owner can read', () => {
    const dir = mkdtempSync(join(tmpdir(), 'pm-session-'))
    const file = join(dir, 'nested', 'session.json')
    const session = {
      url: 'http://x',
      email: 'a@b.co',
      accessToken: 't',
      organizationId: null,
      expiresAt: new Date(0).toISOString(),
    }
    writeSession(file, session)
    expect(statSync(file).mode & 0o777).toBe(0o600)
    expect(readSession(file)).toEqual(session)
    expect(readSession(join(dir, 'missing.json'))).toBeNull()
    rmSync(dir, { recursive: true, force: true })
  })
})
