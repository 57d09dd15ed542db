import { PromptClient, PromptServiceError } from '@pm/client'
import type { OpenApiDocument } from '@pm/openapi'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call } from '../src/client.ts'
import { recordResponses, undocumentedResponses } from '../src/openapi.ts'
import { runSlice, type SliceResult } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

const VARS = { name: 'Ada', place: 'Paris' }

describe('developer experience against the distributed stack', () => {
  let stack: Stack
  let recorder: ReturnType<typeof recordResponses>
  let doc: OpenApiDocument
  let slice: SliceResult

  beforeAll(async () => {
    stack = await startStack()
    recorder = recordResponses(stack.gateway)
  }, 120_000)

  afterAll(async () => {
    recorder?.stop()
    await stack?.stop()
  })

  it('serves the OpenAPI document and its reference page without a credential', async () => {
    const res = await call<OpenApiDocument>(stack.gateway, 'GET', '/api/v1/openapi.json')
    expect(res.status).toBe(200)
    expect(res.body.openapi).toBe('3.1.0')
    doc = res.body
    const page = await fetch(`${stack.gateway}/api/v1/docs`)
    expect(page.status).toBe(200)
    expect(await page.text()).toContain('href="/api/v1/openapi.json"')
  })

  it('answers the slice, and its failures, exactly as the document describes', async () => {
    slice = await runSlice(stack.gateway)
    // A few refusals too: they must carry documented codes under documented statuses.
    const anonymous = await call(stack.gateway, 'GET', '/api/v1/prompts')
    expect(anonymous.status).toBe(401)
    const wrongKey = await call(stack.gateway, 'GET', '/api/v1/prompts', { token: `pk_${'a'.repeat(40)}` })
    expect(wrongKey.status).toBe(401)
    const missing = await call(stack.gateway, 'POST', `/api/v1/prompts/${slice.promptId}/invoke`, {
      token: slice.apiKey,
      body: { variables: {} },
    })
    expect(missing.status).toBe(400)
    const unknown = await call(stack.gateway, 'GET', `/api/v1/prompts/${'0'.repeat(24)}`, {
      token: slice.apiKey,
    })
    expect(unknown.status).toBe(404)
    const listed = await call(stack.gateway, 'GET', '/api/v1/prompts?limit=5', { token: slice.apiKey })
    expect(listed.status).toBe(200)
    const orgs = await call(stack.gateway, 'GET', '/api/v1/organizations', { token: slice.accessToken })
    expect(orgs.status).toBe(200)
    const keys = await call(stack.gateway, 'GET', `/api/v1/organizations/${slice.organizationId}/api-keys`, {
      token: slice.accessToken,
    })
    expect(keys.status).toBe(200)

    const api = recorder.seen.filter((s) => new URL(s.url).pathname.startsWith('/api/v1/'))
    expect(api.length).toBeGreaterThanOrEqual(15)
    expect(undocumentedResponses(doc, recorder.seen)).toEqual([])
  })

  it('client: serves a stale prompt while the stack is stopped and refreshes when it returns', async () => {
    const backgroundErrors: unknown[] = []
    const client = new PromptClient({
      baseUrl: stack.gateway,
      apiKey: slice.apiKey,
      cacheTtlMs: 300,
      retries: { retries: 1, baseDelayMs: 20 },
      timeoutMs: 2_000,
      onBackgroundError: (err) => backgroundErrors.push(err),
    })
    const first = await client.invoke(slice.promptId, VARS)
    expect(first).toMatchObject({
      renderedContent: 'Hello Ada, welcome to Paris!',
      version: 1,
      source: 'network',
    })
    expect(await client.invoke(slice.promptId, VARS)).toMatchObject({ source: 'cache' })

    for (const proc of Object.values(stack.processes)) await proc.stop()
    await expect(fetch(`${stack.gateway}/health/live`)).rejects.toThrow()

    // Once the TTL has passed the cached rendering is served stale, and refreshing it fails.
    await vi.waitFor(
      async () => {
        const stale = await client.invoke(slice.promptId, VARS)
        expect(stale).toMatchObject({ renderedContent: 'Hello Ada, welcome to Paris!', source: 'stale' })
      },
      { timeout: 5_000, interval: 50 },
    )
    await client.settled()
    expect(backgroundErrors.at(-1)).toBeInstanceOf(PromptServiceError)
    expect(backgroundErrors.at(-1)).toMatchObject({ code: 'NETWORK_ERROR' })
    // Nothing cached for other variables and no fallback: the failure is the caller's to see.
    await expect(client.invoke(slice.promptId, { name: 'Bo', place: 'Rome' })).rejects.toMatchObject({
      code: 'NETWORK_ERROR',
    })

    await stack.restartAll()

    // Publish a second version through the client's typed routes, as an operator would.
    const admin = new PromptClient({
      baseUrl: stack.gateway,
      accessToken: slice.accessToken,
      organizationId: slice.organizationId,
    })
    await admin.api.updatePrompt({
      params: { id: slice.promptId },
      body: { template: 'Hi {{name}}, this is {{place}} (v2)' },
    })
    const v2 = await admin.api.publishPrompt({
      params: { id: slice.promptId },
      body: { changeLog: 'second' },
    })
    expect(v2.version).toBe(2)

    await vi.waitFor(
      async () => {
        const fresh = await client.invoke(slice.promptId, VARS)
        expect(fresh).toMatchObject({ renderedContent: 'Hi Ada, this is Paris (v2)', version: 2 })
        expect(fresh.source).not.toBe('stale')
      },
      { timeout: 10_000, interval: 50 },
    )
    // The client's own traffic (invoke, update, publish) is what the document says too.
    const ops = new Set(recorder.seen.map((s) => `${s.method} ${s.status}`))
    expect(ops).toContain('PATCH 200')
    expect(undocumentedResponses(doc, recorder.seen)).toEqual([])
  }, 120_000) // stops and restarts the whole stack (seven processes) on a 2-core machine
})
