/**
 * What the invoke benches share: the bootstrap admin, the prompt and its variables, the setup of
 * one invoke (an API key, a published prompt), a load of such invokes, and an OTLP sink for the
 * traced variants.
 */
import { randomBytes } from 'node:crypto'
import { createServer } from 'node:http'
import { Pool } from 'undici'

/** What invoke names: the current version, the production pin, or production under a 50/50 split. */
export type InvokeTarget = 'current' | 'env' | 'split'

export const ADMIN = { email: 'bench@example.com', password: 'bench password 0123456789' }
/** What every service process of a bench gets: its own internal secret and data folder, the bootstrap admin. */
export function serviceEnv(dataDir: string): Record<string, string> {
  return {
    INTERNAL_AUTH_SECRET: randomBytes(32).toString('hex'),
    DATA_DIR: dataDir,
    BOOTSTRAP_ADMIN_EMAIL: ADMIN.email,
    BOOTSTRAP_ADMIN_PASSWORD: ADMIN.password,
    BOOTSTRAP_ORG_NAME: 'Bench',
  }
}

/** A traced variant's settings: spans to `sinkUrl`, the gateway's decision at `ratio` followed downstream. */
export function tracedEnv(sinkUrl: string, ratio: string): Record<string, string> {
  return {
    OTEL_EXPORTER_OTLP_ENDPOINT: sinkUrl,
    OTEL_TRACES_SAMPLER: 'parentbased_traceidratio',
    OTEL_TRACES_SAMPLER_ARG: ratio,
  }
}

export const TEMPLATE =
  'You are a helpful assistant for {{company}}. Answer the customer {{ name }} in {{language}}, ' +
  'in a friendly tone, in at most {{limit}} words. Their question: {{question}}'
export const VARIABLES = {
  company: 'Acme',
  name: 'Ada',
  language: 'English',
  limit: 120,
  question: 'How do I reset my password?',
}

export interface Json {
  data?: Record<string, unknown>
  error?: { code: string; message: string }
}

export async function api(base: string, method: string, path: string, token?: string, body?: unknown) {
  const res = await fetch(`${base}${path}`, {
    method,
    headers: {
      ...(token ? { authorization: `Bearer ${token}` } : {}),
      ...(body === undefined ? {} : { 'content-type': 'application/json' }),
    },
    body: body === undefined ? undefined : JSON.stringify(body),
  })
  const json = (await res.json()) as Json
  if (!res.ok) throw new Error(`${method} ${path}: ${res.status} ${JSON.stringify(json.error)}`)
  return json.data ?? {}
}

/** Signs in, creates a rate-limited API key and a published prompt, and checks one invoke. */
export async function prepare(gateway: string, target: InvokeTarget = 'current') {
  const login = await api(gateway, 'POST', '/api/v1/auth/login', undefined, ADMIN)
  const token = String(login.accessToken)
  const org = String(login.organizationId)
  // A limit high enough never to be hit, so the limiter is on the path but never refuses.
  const created = await api(gateway, 'POST', `/api/v1/organizations/${org}/api-keys`, token, {
    name: 'bench',
    scopes: ['prompts:read', 'prompts:write'],
    rateLimit: { points: 1_000_000, durationSeconds: 60 },
  })
  const apiKey = String(created.key)
  const prompt = await api(gateway, 'POST', '/api/v1/prompts', apiKey, {
    name: 'Bench prompt',
    template: TEMPLATE,
  })
  const promptId = String(prompt._id)
  const v1 = await api(gateway, 'POST', `/api/v1/prompts/${promptId}/publish`, token, {})
  if (target === 'env') {
    await api(gateway, 'POST', `/api/v1/prompts/${promptId}/environments/production/promote`, token, {
      version: 1,
    })
  } else if (target === 'split') {
    const v2 = await api(gateway, 'POST', `/api/v1/prompts/${promptId}/publish`, token, {})
    await api(gateway, 'POST', `/api/v1/prompts/${promptId}/environments/production/promote`, token, {
      split: [
        { versionId: String(v1._id), weight: 50 },
        { versionId: String(v2._id), weight: 50 },
      ],
    })
  }

  const path = `/api/v1/prompts/${promptId}/invoke${target === 'current' ? '' : '?env=production'}`
  const body = JSON.stringify(
    target === 'split' ? { variables: VARIABLES, subject: 'bench-subject' } : { variables: VARIABLES },
  )
  const headers = { authorization: `Bearer ${apiKey}`, 'content-type': 'application/json' }
  const first = await fetch(`${gateway}${path}`, { method: 'POST', headers, body })
  const expected = await first.text()
  if (first.status !== 200 || first.headers.get('x-service-version') === null) {
    throw new Error(`invoke answered ${first.status}: ${expected}`)
  }
  return { token, apiKey, promptId, path, body, headers, expected }
}

export /** An OTLP/HTTP endpoint that reads and counts what it is sent, answering an empty success. */
async function startSink() {
  const counts = { requests: 0, bytes: 0 }
  const server = createServer((req, res) => {
    req.on('data', (chunk: Buffer) => {
      counts.bytes += chunk.length
    })
    req.on('end', () => {
      counts.requests++
      res.writeHead(200, { 'content-type': 'application/json' }).end('{}')
    })
  })
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve))
  const address = server.address()
  if (!address || typeof address === 'string') throw new Error('sink: no address')
  return { url: `http://127.0.0.1:${address.port}`, counts, close: () => server.close() }
}

/** A prepared invoke sent through a pool of `concurrency` connections to `url`. */
export interface Invoker {
  /** One invoke; its status and body are checked against the first one's. */
  invoke(): Promise<void>
  /** `total` invokes, `concurrency` at a time. */
  load(total: number): Promise<void>
  close(): Promise<void>
}

export function invoker(
  name: string,
  url: string,
  prepared: Awaited<ReturnType<typeof prepare>>,
  concurrency: number,
): Invoker {
  const pool = new Pool(url, { connections: concurrency })
  const invoke = async () => {
    const res = await pool.request({
      method: 'POST',
      path: prepared.path,
      headers: prepared.headers,
      body: prepared.body,
    })
    const text = await res.body.text()
    if (res.statusCode !== 200 || text !== prepared.expected)
      throw new Error(`${name}: invoke answered ${res.statusCode}: ${text.slice(0, 200)}`)
  }
  return {
    invoke,
    load: async (total) => {
      let next = 0
      await Promise.all(
        Array.from({ length: concurrency }, async () => {
          while (next < total) {
            next++
            await invoke()
          }
        }),
      )
    },
    close: () => pool.close(),
  }
}
