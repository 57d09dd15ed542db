import { existsSync, mkdtempSync, rmSync, statSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import Fastify, { type FastifyInstance } from 'fastify'
import { afterAll, beforeAll, beforeEach, describe, expect, it } from 'vitest'
import { PromptServiceError } from '@pm/client'
import { run, triedFor } from '../src/cli.ts'
import { parseExpires } from '../src/commands/session.ts'
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
  let refreshes = 0

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
    // A template with references: invoke answers what it included.
    app.post('/api/v1/prompts/:id/invoke', async () => ({
      data: {
        renderedContent: 'Policy. Hello',
        variables: {},
        promptId: ID,
        versionId: V2,
        version: 2,
        references: [
          { slug: 'policy', promptId: ORG, versionId: V1, version: 1, via: 'production' },
          { slug: 'footer', promptId: BATCH, versionId: V2, version: 3, via: 'latest' },
        ],
      },
    }))
    // A prompt others include: a change of slug or a delete is 409 unless forced.
    const included = async (
      request: { query: unknown },
      reply: { code(n: number): { send(b: unknown): unknown } },
      data: unknown,
    ) =>
      (request.query as { force?: string }).force === 'true'
        ? { data }
        : reply.code(409).send({
            error: {
              code: 'CONFLICT',
              message: 'other prompts include shared: user-1 (force=true to change its slug anyway)',
              details: { dependents: [{ promptId: V1, slug: 'user-1', name: 'User', in: ['draft'] }] },
              requestId: 'rid-9',
            },
          })
    app.patch('/api/v1/prompts/:id', async (request, reply) =>
      included(request, reply, { _id: ID, name: 'Shared', slug: 'renamed', type: 'text' }),
    )
    app.delete('/api/v1/prompts/:id', async (request, reply) =>
      included(request, reply, { _id: ID, deleted: true }),
    )
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
    // A user session whose access token has expired: only "fresh-N" tokens are accepted, and
    // each refresh rotates the refresh token.
    app.post('/api/v1/auth/refresh', async (request, reply) => {
      const { refreshToken } = request.body as { refreshToken: string }
      if (refreshToken !== `refresh-${refreshes}`) {
        return reply
          .code(401)
          .send({ error: { code: 'INVALID_CREDENTIALS', message: 'spent', requestId: 'r' } })
      }
      refreshes++
      return {
        data: {
          accessToken: `fresh-${refreshes}`,
          tokenType: 'Bearer',
          expiresIn: 900,
          refreshToken: `refresh-${refreshes}`,
          user: { _id: ORG, email: 'a@b.co', name: 'A', createdAt: new Date(0).toISOString() },
          organizationId: ORG,
        },
      }
    })
    app.get('/api/v1/organizations/:id/api-keys', async (request, reply) =>
      request.headers.authorization?.startsWith('Bearer fresh-')
        ? { data: { apiKeys: [] } }
        : reply
            .code(401)
            .send({ error: { code: 'INVALID_CREDENTIALS', message: 'expired', requestId: 'r' } }),
    )
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

  it('invoke prints the rendered text on stdout, the included prompts on stderr, and references with --json', async () => {
    const out = capture()
    const err = capture()
    expect(await run(['invoke', ID], { stdout: out, stderr: err, env: env() })).toBe(0)
    expect(out.text()).toBe('Policy. Hello\n')
    expect(err.text()).toBe('included: policy v1 (production), footer v3 (latest)\n')
    const json = capture()
    const quiet = capture()
    expect(await run(['invoke', ID, '--json'], { stdout: json, stderr: quiet, env: env() })).toBe(0)
    expect(JSON.parse(json.text()).references).toEqual([
      { slug: 'policy', promptId: ORG, versionId: V1, version: 1, via: 'production' },
      { slug: 'footer', promptId: BATCH, versionId: V2, version: 3, via: 'latest' },
    ])
    expect(quiet.text()).toBe('')
  })

  it('a change of slug or a delete of an included prompt: the 409 hints --force, which goes ahead', async () => {
    const err = capture()
    expect(
      await run(['prompts', 'update', ID, '--slug', 'renamed'], {
        stdout: capture(),
        stderr: err,
        env: env(),
      }),
    ).toBe(1)
    expect(err.text()).toContain('CONFLICT')
    expect(err.text()).toContain('user-1')
    expect(err.text()).toContain('hint: other prompts include this one by its slug: add --force')
    const out = capture()
    expect(
      await run(['prompts', 'update', ID, '--slug', 'renamed', '--force'], {
        stdout: out,
        stderr: capture(),
        env: env(),
      }),
    ).toBe(0)
    expect(out.text()).toContain('slug renamed')
    expect(
      await run(['prompts', 'delete', ID, '--yes'], { stdout: capture(), stderr: capture(), env: env() }),
    ).toBe(1)
    expect(
      await run(['prompts', 'delete', ID, '--yes', '--force'], {
        stdout: capture(),
        stderr: capture(),
        env: env(),
      }),
    ).toBe(0)
    expect(seen.map((s) => `${s.method} ${s.url}`)).toEqual([
      `PATCH /api/v1/prompts/${ID}?organizationId=${ORG}`,
      `PATCH /api/v1/prompts/${ID}?force=true&organizationId=${ORG}`,
      `DELETE /api/v1/prompts/${ID}?organizationId=${ORG}`,
      `DELETE /api/v1/prompts/${ID}?force=true&organizationId=${ORG}`,
    ])
    expect(seen[1]?.body).toEqual({ slug: 'renamed' })
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
    // The remedy for a refused key is a valid key, not signing in.
    expect(err.text()).toContain('hint: the API key in PM_API_KEY was refused')
    expect(err.text()).not.toContain('login')
  })

  it('a version that does not exist is a failure (exit 1), not a usage error', async () => {
    const err = capture()
    const code = await run(['promote', ID, 'production', '--version', '7'], {
      stdout: capture(),
      stderr: err,
      env: env(),
    })
    expect(code).toBe(1)
    expect(err.text()).toContain(`error: NOT_FOUND: prompt ${ID} has no version 7 (its versions: 2, 1)`)
    expect(seen.some((s) => s.url.includes('/promote'))).toBe(false)

    // The same for a split naming a version that does not exist (it was a usage error, exit 2).
    const splitErr = capture()
    const split = await run(['split', ID, 'production', '1=50', '9=50'], {
      stdout: capture(),
      stderr: splitErr,
      env: env(),
    })
    expect(split).toBe(1)
    expect(splitErr.text()).toContain(`error: NOT_FOUND: prompt ${ID} has no version 9 (its versions: 2, 1)`)
    expect(seen.some((s) => s.url.includes('/promote'))).toBe(false)
  })

  it('no command at all: the usage on stderr (a pipe reading stdout gets nothing), exit 2', async () => {
    const out = capture()
    const err = capture()
    expect(await run([], { stdout: out, stderr: err, env: env() })).toBe(2)
    expect(out.text()).toBe('')
    expect(err.text()).toContain('pm: operate a prompt service from the command line')
    const help = capture()
    expect(await run(['help'], { stdout: help, stderr: capture(), env: env() })).toBe(0)
    expect(help.text()).toContain('pm: operate a prompt service from the command line')
  })

  it('an unreachable service: the error names the URL', async () => {
    const closed = 'http://127.0.0.1:9'
    const err = capture()
    const code = await run(['prompts', 'list'], {
      stdout: capture(),
      stderr: err,
      env: env({ PM_URL: closed, PM_API_KEY: 'pk_x' }),
    })
    expect(code).toBe(1)
    expect(err.text()).toContain(
      `error: NETWORK_ERROR: listPrompts: the service cannot be reached at GET ${closed}/api/v1/prompts`,
    )
    expect(err.text()).toContain(`hint: is the service running at ${closed}?`)
    // The client retried it: the message says so (each attempt's limit alone misled, 10 s of 42).
    expect(err.text()).toMatch(/\(4 attempts, \d+\.\d s in all\)\n/)
  })

  it('hints name the command as the user ran it', async () => {
    const err = capture()
    expect(await run(['nope'], { stdout: capture(), stderr: err, env: env(), prog: 'npm run cli --' })).toBe(
      2,
    )
    expect(err.text()).toContain('Run "npm run cli -- help" for usage.')
  })

  describe('the login session', () => {
    const file = () => join(dir, 'refresh-session.json')
    const sessionEnv = () => ({ PM_URL: base, PM_CONFIG: file() })
    const save = (expiresAt: number, refreshToken = `refresh-${refreshes}`) =>
      writeSession(file(), {
        url: base,
        email: 'a@b.co',
        accessToken: 'expired-token',
        refreshToken,
        organizationId: ORG,
        expiresAt: new Date(expiresAt).toISOString(),
      })

    it('an expired access token is renewed with the refresh token before the command, and both are saved', async () => {
      refreshes = 0
      save(Date.now() - 1000)
      const out = capture()
      const err = capture()
      expect(await run(['keys', 'list'], { stdout: out, stderr: err, env: sessionEnv() })).toBe(0)
      expect(err.text()).toBe('')
      expect(seen.map((s) => `${s.method} ${s.url.split('?')[0]} ${s.authorization ?? ''}`)).toEqual([
        'POST /api/v1/auth/refresh ',
        `GET /api/v1/organizations/${ORG}/api-keys Bearer fresh-1`,
      ])
      expect(readSession(file())).toMatchObject({ accessToken: 'fresh-1', refreshToken: 'refresh-1' })
      expect(Date.parse(readSession(file())?.expiresAt ?? '')).toBeGreaterThan(Date.now() + 800_000)
    })

    it('a 401 to a token believed valid renews it and sends the request again', async () => {
      save(Date.now() + 600_000)
      expect(await run(['keys', 'list'], { stdout: capture(), stderr: capture(), env: sessionEnv() })).toBe(0)
      expect(seen.map((s) => `${s.method} ${s.url.split('?')[0]} ${s.authorization ?? ''}`)).toEqual([
        `GET /api/v1/organizations/${ORG}/api-keys Bearer expired-token`,
        'POST /api/v1/auth/refresh ',
        `GET /api/v1/organizations/${ORG}/api-keys Bearer fresh-2`,
      ])
      expect(readSession(file())).toMatchObject({ accessToken: 'fresh-2', refreshToken: 'refresh-2' })
    })

    it('two commands at once spend the refresh token once, and both succeed', async () => {
      save(Date.now() - 1000)
      const results = await Promise.all(
        [1, 2, 3].map(() =>
          run(['keys', 'list'], { stdout: capture(), stderr: capture(), env: sessionEnv() }),
        ),
      )
      expect(results).toEqual([0, 0, 0])
      expect(seen.filter((s) => s.url.startsWith('/api/v1/auth/refresh'))).toHaveLength(1)
    })

    it('the session goes only to the origin it signed in to: another --url or PM_URL is as no session', async () => {
      const other = 'http://other.example:8080'
      writeSession(file(), {
        url: other,
        email: 'a@b.co',
        accessToken: 'their-token',
        refreshToken: 'their-refresh',
        organizationId: ORG,
        expiresAt: new Date(Date.now() - 1000).toISOString(),
      })
      for (const [args, env] of [
        [['keys', 'list'], sessionEnv()],
        [['prompts', 'list', '--url', base], { PM_CONFIG: file() }],
      ] as const) {
        const err = capture()
        expect(await run([...args], { stdout: capture(), stderr: err, env }), args.join(' ')).toBe(2)
        expect(err.text()).toContain(
          `the saved session is for ${other}, not ${base}, and is sent nowhere else`,
        )
        expect(err.text()).toContain(`login --url ${base} --email <email>`)
      }
      // Neither the access token nor (expired as it is) the refresh token went anywhere.
      expect(seen).toEqual([])
      // The same origin written otherwise (a trailing slash) is the same gateway.
      refreshes = 0
      save(Date.now() + 600_000)
      const same = capture()
      await run(['keys', 'list', '--url', `${base}/`], {
        stdout: capture(),
        stderr: same,
        env: { PM_CONFIG: file() },
      })
      expect(same.text()).not.toContain('saved session')
      expect(seen[0]?.authorization).toBe('Bearer expired-token')
    })

    it('a session that cannot be renewed says to sign in again', async () => {
      save(0, 'spent')
      const err = capture()
      expect(await run(['keys', 'list'], { stdout: capture(), stderr: err, env: sessionEnv() })).toBe(1)
      expect(err.text()).toContain('INVALID_CREDENTIALS')
      expect(err.text()).toContain(
        'hint: your session has ended: sign in again with "pm login --email <email>"',
      )
    })
  })

  it('refuses bad usage with exit 2 before calling anything', async () => {
    const cases = [
      ['nope'],
      ['promote', ID, 'staging', '--version', '1'],
      ['promote', ID, 'preview'],
      ['invoke', ID, '--var', 'novalue'],
      ['keys', 'rotate'],
      ['keys', 'rename'],
      ['keys', 'rename', ID],
      ['keys', 'create', '--name', 'k', '--scopes', 'prompts:read', '--expires', 'garbage'],
      ['keys', 'create', '--name', 'k', '--scopes', 'prompts:read', '--expires', '2027-02-30'],
      ['keys', 'create', '--name', 'k', '--scopes', 'prompts:read', '--rate', 'fast'],
      ['prompts', 'list', '--limit', 'many'],
      ['init', '--email', 'a@b.co'],
      // An empty id or slug (it reached the client as none: exit 1 naming its operation).
      ['prompts', 'get', ''],
      ['prompts', 'get', '--slug', ''],
      ['invoke', ''],
      ['invoke', '--slug', ''],
      // Digits only, as everywhere else (Number() took these as 1).
      ['history', ID, 'production', '--page', '0x1'],
      ['history', ID, 'production', '--page', '1e0'],
      ['history', ID, 'production', '--limit', '1.0'],
      // Checked before the upload (the import ran, then exit 2 said nothing was done).
      ['import', join(dir, 'none.csv'), '--interval', '0'],
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

  it('names the empty argument, and the page flag', async () => {
    for (const [args, message] of [
      [['prompts', 'get', ''], 'error: <promptId> is empty'],
      [['invoke', '--slug', ''], 'error: --slug is empty'],
      [['history', ID, 'preview', '--page', '0x1'], 'error: --page must be a positive integer'],
    ] as const) {
      const err = capture()
      expect(await run([...args], { stdout: capture(), stderr: err, env: env() })).toBe(2)
      expect(err.text()).toContain(message)
    }
  })

  it("init refuses an address that is not one, as identity's API does, before opening the store", async () => {
    const dataDir = join(dir, 'init-data')
    for (const email of ['bad', 'a@', 'a b@c.co']) {
      const err = capture()
      const code = await run(
        ['init', '--email', email, '--org-name', 'Acme', '--password', 'long-enough-1'],
        { stdout: capture(), stderr: err, env: { ...env(), DATA_DIR: dataDir } },
      )
      expect(code, email).toBe(2)
      expect(err.text()).toContain(`error: --email "${email}" is not an email address`)
    }
    expect(existsSync(dataDir)).toBe(false)
  })

  it('init refuses a name the routes would refuse (blank, control characters), before opening the store', async () => {
    const dataDir = join(dir, 'init-names')
    const base = ['init', '--email', 'a@b.co', '--password', 'long-enough-1']
    for (const [flags, field] of [
      [['--org-name', '   '], 'orgName'],
      [['--org-name', 'Acme', '--name', 'Ada\u0007'], 'name'],
      [['--org-name', 'Acme', '--key-name', 'ci\nkey'], 'keyName'],
      [['--org-name', 'A\u2028cme'], 'orgName'],
    ] as const) {
      const err = capture()
      const code = await run([...base, ...flags], {
        stdout: capture(),
        stderr: err,
        env: { ...env(), DATA_DIR: dataDir },
      })
      expect(code, flags.join(' ')).toBe(2)
      expect(err.text()).toContain(
        `error: bootstrap: ${field}: must not be blank, and must hold no control characters or line breaks`,
      )
      expect(err.text()).not.toContain('long-enough-1')
    }
    expect(existsSync(dataDir)).toBe(false)
  })

  it('init refuses an empty name too (the settings reader takes an empty value for none)', async () => {
    const dataDir = join(dir, 'init-empty-name')
    const err = capture()
    const code = await run(
      ['init', '--email', 'a@b.co', '--password', 'long-enough-1', '--org-name', 'Acme', '--name', ''],
      { stdout: capture(), stderr: err, env: { ...env(), DATA_DIR: dataDir } },
    )
    expect(code).toBe(2)
    expect(err.text()).toContain('error: bootstrap: name: must not be empty')
    expect(existsSync(dataDir)).toBe(false)
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

  it('reads --expires as an ISO 8601 date or date and time, and names the format otherwise', () => {
    expect(parseExpires('2027-01-31')).toBe('2027-01-31T00:00:00.000Z')
    expect(parseExpires('2027-01-31T12:30:00+02:00')).toBe('2027-01-31T10:30:00.000Z')
    expect(parseExpires(undefined)).toBeUndefined()
    for (const text of ['garbage', '1', 'May 5', '2027-13-01', '2027-02-30', '2027-01-31T25:00'])
      expect(() => parseExpires(text), text).toThrow(/--expires is an ISO 8601 date.*2027-01-31/)
  })

  it("a failure to reach the service names its attempts and their time, not one attempt's limit", () => {
    const timeout = new PromptServiceError({
      status: 0,
      code: 'TIMEOUT',
      message: 'listPrompts: no answer from GET http://x/api/v1/prompts within 10000 ms',
    })
    expect(triedFor(timeout, { count: 4, startedAt: 1_000 }, 42_800)).toBe(' (4 attempts, 41.8 s in all)')
    expect(triedFor(timeout, { count: 1, startedAt: 1_000 }, 11_000)).toBe('')
    expect(triedFor(timeout, undefined)).toBe('')
    const refused = new PromptServiceError({ status: 401, code: 'INVALID_CREDENTIALS', message: 'no' })
    expect(triedFor(refused, { count: 4, startedAt: 0 }, 1)).toBe('')
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
