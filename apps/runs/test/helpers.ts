import { randomBytes } from 'node:crypto'
import { mkdtempSync, rmSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import type { Provider } from '@pm/contracts'
import { SecretBox } from '@pm/kit'
import Fastify from 'fastify'
import { Connections } from '../src/services/connections.ts'
import { Egress } from '../src/services/egress.ts'
import { OrgLimiter } from '../src/services/limiter.ts'
import { RenderClient } from '../src/services/render.ts'
import type { PreparedRun, RunsDeps } from '../src/services/runs.ts'
import { SqliteRunStore } from '../src/store/sqlite.ts'

export const ORG = 'a'.repeat(24)

/**
 * A run ready for `Runs.execute`, as `prepare` would make it: the text prompt `marker` + eight
 * words, sent to `baseUrl` (the OpenAI path appended for OpenAI's protocol).
 */
export function preparedRun(opts: {
  provider: Provider
  baseUrl: string
  marker: string
  model: string
  stream: boolean
  headers?: Record<string, string>
}): PreparedRun {
  const { provider, marker, model, stream } = opts
  const content = `${marker} one two three four five six seven eight`
  return {
    id: randomBytes(12).toString('hex'),
    who: {
      caller: {
        kind: 'user',
        userId: 'u1',
        organizationId: ORG,
        role: 'OWNER',
        scopes: ['runs:write'],
        requestId: 'req-1',
      },
      organizationId: ORG,
      contextHeader: '',
      requestId: 'req-1',
    },
    body: { connectionId: 'c'.repeat(24), variables: {}, stream },
    rendered: {
      promptId: 'p'.repeat(24),
      versionId: null,
      version: null,
      draft: true,
      renderedContent: content,
      references: [],
      config: {},
    },
    connection: {
      _id: 'c'.repeat(24),
      provider,
      baseUrl: provider === 'anthropic' ? opts.baseUrl : `${opts.baseUrl}/v1`,
      apiKey: 'sk-test-1234',
      headers: opts.headers ?? {},
      models: [],
      // Unique: the Runs service caches a client per connection revision.
      revision: `${provider}-${opts.baseUrl}`,
    },
    model,
    params: {},
    messages: [{ role: 'user', content }],
    release: () => {},
  }
}

/**
 * What a Runs service is made of, for driving `execute` with a prepared run: a SQLite run log
 * in a temporary folder, egress allowing 127.0.0.1 (the local provider), no render behind.
 */
export function runsHarness(name: string): { deps: () => RunsDeps; close: () => Promise<void> } {
  const dir = mkdtempSync(join(tmpdir(), `pm-runs-${name}-`))
  const store = new SqliteRunStore(join(dir, 'runs.db'))
  const egress = new Egress('127.0.0.1', 1_000)
  const render = new RenderClient('http://127.0.0.1:9', 'http://127.0.0.1:9')
  const log = Fastify({ logger: false }).log
  const secrets = new SecretBox(randomBytes(32))
  const connections = new Connections({ store, secrets, egress, maxPerOrganization: 5 })
  return {
    deps: () => ({
      store,
      connections,
      render,
      egress,
      limiter: new OrgLimiter(5),
      timeoutMs: 10_000,
      maxOutputBytes: 4 * 1024 * 1024,
      log,
    }),
    close: async () => {
      await egress.close()
      await render.close()
      await store.close()
      rmSync(dir, { recursive: true, force: true })
    },
  }
}
