import { NatsBus } from '@pm/bus'
import { EVENTS_STREAM, SUBJECTS, type VersionPublishedEvent } from '@pm/contracts'
import { existsSync, readFileSync } from 'node:fs'
import { join } from 'node:path'
import { DatabaseSync } from 'node:sqlite'
import { newId, SecretBox, loadSecretBox } from '@pm/kit'
import { natsUrl } from '@pm/testkit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call } from '../src/client.ts'
import { runSlice, type SliceResult } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

describe('distributed mode: five processes, real NATS and Redis', () => {
  let stack: Stack
  let consumerBus: NatsBus
  const received: VersionPublishedEvent[] = []
  let slice: SliceResult | undefined

  beforeAll(async () => {
    // Every route's schemas (the internal ones too) compile before each process is ready: a schema
    // that does not compile fails this start, not a user's first request (schemaCompilers.ts).
    stack = await startStack({ SCHEMA_COMPILE: 'eager' })
    consumerBus = await NatsBus.connect({
      url: await natsUrl(),
      stream: EVENTS_STREAM,
      streamSubjects: ['pm.events.>'],
      name: 'e2e-consumer',
    })
    await consumerBus.consume(SUBJECTS.versionPublished, `e2e-${newId()}`, async (data) => {
      received.push(data as VersionPublishedEvent)
    })
  }, 120_000)

  afterAll(async () => {
    await consumerBus?.close()
    await stack?.stop()
  })

  it('runs the slice through the gateway and delivers version.published over JetStream', async () => {
    const result = await runSlice(stack.gateway)
    slice = result
    await vi.waitFor(
      () => {
        const event = received.find((e) => e.data.versionId === result.versionId)
        expect(event).toBeDefined()
        expect(event?.type).toBe('version.published')
        expect(event?.organizationId).toBe(result.organizationId)
        expect(event?.data).toMatchObject({
          promptId: result.promptId,
          version: 1,
          changeLog: 'first',
          slug: 'greeting-prompt',
        })
      },
      { timeout: 10_000, interval: 50 },
    )
    expect(received.filter((e) => e.data.versionId === result.versionId)).toHaveLength(1)
  })

  it('seals webhook signing secrets with SECRETS_KEY: no key file, no clear secret in the store', async () => {
    const token = slice?.accessToken
    const org = slice?.organizationId
    expect(token).toBeDefined()
    const created = await call<{ data: { webhook: { _id: string }; secret: string } }>(
      stack.gateway,
      'POST',
      `/api/v1/organizations/${org}/webhooks`,
      { token, body: { url: 'http://127.0.0.1:9/hook' } },
    )
    expect(created.status).toBe(201)
    const { webhook, secret } = created.body.data
    expect(existsSync(join(stack.dataDir, 'secret.key'))).toBe(false)
    for (const name of ['webhooks.db', 'webhooks.db-wal']) {
      const file = join(stack.dataDir, name)
      if (existsSync(file)) expect(readFileSync(file).includes(Buffer.from(secret))).toBe(false)
    }
    // What is stored opens with the configured key only.
    const db = new DatabaseSync(join(stack.dataDir, 'webhooks.db'), { readOnly: true })
    const row = db.prepare('SELECT secret FROM subscriptions WHERE id = ?').get(webhook._id)
    db.close()
    const stored = String(row?.secret)
    expect(SecretBox.isSealed(stored)).toBe(true)
    expect(loadSecretBox({ SECRETS_KEY: stack.env.SECRETS_KEY }).open(stored, webhook._id)).toBe(secret)
  })

  it('shapes errors and refuses forged internal headers', async () => {
    const missing = await call<{ error: { code: string; requestId: string } }>(
      stack.gateway,
      'GET',
      '/api/v1/prompts',
    )
    expect(missing.status).toBe(401)
    expect(missing.body.error.code).toBe('AUTH_REQUIRED')
    expect(missing.body.error.requestId).toBe(missing.headers.get('x-request-id'))

    const unknown = await call<{ error: { code: string } }>(stack.gateway, 'GET', '/api/v1/nothing-here')
    expect(unknown.status).toBe(404)
    expect(unknown.body.error.code).toBe('NOT_FOUND')

    const forged = await call<{ error: { code: string } }>(stack.gateway, 'GET', '/api/v1/prompts', {
      headers: { 'x-pm-context': 'forged.context' },
    })
    expect(forged.status).toBe(401)

    // A service reached directly, without the gateway's signed context, refuses.
    const direct = await call<{ error: { code: string } }>(
      `http://127.0.0.1:${stack.ports.prompts}`,
      'GET',
      '/api/v1/prompts',
      { headers: { 'x-pm-context': 'forged.context' } },
    )
    expect(direct.status).toBe(401)
    expect(direct.body.error.code).toBe('INVALID_CREDENTIALS')

    const requestId = 'e2e-request-id-123'
    const echoed = await call(stack.gateway, 'GET', '/api/v1/prompts', {
      headers: { 'x-request-id': requestId },
    })
    expect(echoed.headers.get('x-request-id')).toBe(requestId)
  })

  it('answers 503 SERVICE_UNAVAILABLE when an upstream is down', async () => {
    const token = slice?.apiKey
    expect(token).toBeDefined()
    await stack.processes.prompts?.stop()
    try {
      const res = await call<{ error: { code: string } }>(stack.gateway, 'GET', '/api/v1/prompts', { token })
      expect(res.status).toBe(503)
      expect(res.body.error.code).toBe('SERVICE_UNAVAILABLE')
    } finally {
      await stack.restart('prompts')
    }
    const back = await call(stack.gateway, 'GET', '/api/v1/prompts', { token })
    expect(back.status).toBe(200)
  })
})
