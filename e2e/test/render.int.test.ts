import { type CallerContext, CONTEXT_HEADER } from '@pm/contracts'
import { signContext } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call, type Reply } from '../src/client.ts'
import { runSlice, type SliceResult } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

interface Rendered {
  data?: {
    renderedContent: string
    version: number
    versionId: string
    unresolvedVariables?: string[]
    renderedMessages?: Array<{ role: string; content: string }>
    config?: Record<string, unknown>
  }
  error?: { code: string; details?: unknown }
}

const REPLICAS = ['render', 'render2'] as const
/** Long enough that only the prompts service's change events can make a replica see a change here. */
const POINTER_TTL_MS = 600_000
/** How long a test waits for both replicas to see a change (the target is 100 ms; this is the failure bound). */
const PROMPTLY = { timeout: 3_000, interval: 10 }

describe('render: two replicas behind the gateway, real NATS and Redis', () => {
  let stack: Stack
  let slice: SliceResult

  beforeAll(async () => {
    stack = await startStack({ RESOLVE_CACHE_TTL_MS: String(POINTER_TTL_MS) }, { renderReplicas: 2 })
    slice = await runSlice(stack.gateway)
  }, 180_000)

  afterAll(async () => {
    await stack?.stop()
  })

  const secret = () => stack.env.INTERNAL_AUTH_SECRET ?? ''

  /** Asks one replica directly, with the context the gateway would have signed. */
  const direct = async (
    replica: (typeof REPLICAS)[number],
    path: string,
    body: unknown = {},
    caller: Partial<CallerContext> = {},
  ): Promise<Reply<Rendered>> => {
    const context: CallerContext = {
      kind: 'apiKey',
      organizationId: slice.organizationId,
      scopes: ['prompts:read'],
      requestId: 'e2e',
      ...caller,
    }
    const res = await call<unknown>(`http://127.0.0.1:${stack.ports[replica]}`, 'POST', path, {
      body,
      headers: { [CONTEXT_HEADER]: signContext(context, secret()) },
    })
    // Services answer bare payloads; wrap them like the gateway does so assertions read the same.
    const wrapped = res.status === 200 ? { data: res.body as Rendered['data'] } : (res.body as Rendered)
    return { ...res, body: wrapped }
  }

  const anonymous: Partial<CallerContext> = { kind: 'anonymous', organizationId: undefined, scopes: [] }

  const newPrompt = async (template: string): Promise<string> => {
    const created = await call<{ data: { _id: string } }>(stack.gateway, 'POST', '/api/v1/prompts', {
      token: slice.apiKey,
      body: { name: `Render ${Math.random().toString(36).slice(2)}`, template },
    })
    expect(created.status).toBe(201)
    return created.body.data._id
  }

  const publish = async (promptId: string): Promise<{ _id: string; version: number }> => {
    const res = await call<{ data: { _id: string; version: number } }>(
      stack.gateway,
      'POST',
      `/api/v1/prompts/${promptId}/publish`,
      { token: slice.accessToken, body: {} },
    )
    expect(res.status).toBe(201)
    return res.body.data
  }

  const setTemplate = async (promptId: string, template: string) => {
    const res = await call(stack.gateway, 'PATCH', `/api/v1/prompts/${promptId}`, {
      token: slice.apiKey,
      body: { template },
    })
    expect(res.status).toBe(200)
  }

  /** Invokes on every replica so that each has the answer cached (two identical answers in a row). */
  const warm = async (path: string, caller: Partial<CallerContext> = {}) => {
    for (const replica of REPLICAS) {
      const first = await direct(replica, path, { variables: { who: 'x' } }, caller)
      const second = await direct(replica, path, { variables: { who: 'x' } }, caller)
      expect(first.status).toBe(200)
      expect(second.body).toEqual(first.body)
    }
  }

  it('spreads invoke traffic over both replicas', async () => {
    const marker = `spread-${Date.now()}`
    for (let i = 0; i < 10; i++) {
      const res = await call<Rendered>(stack.gateway, 'POST', `/api/v1/prompts/${slice.promptId}/invoke`, {
        token: slice.apiKey,
        body: { variables: { name: 'Ada', place: 'Paris' } },
        headers: { 'x-request-id': `${marker}-${i}` },
      })
      expect(res.status).toBe(200)
      expect(res.body.data?.renderedContent).toBe('Hello Ada, welcome to Paris!')
      expect(res.headers.get('x-service-version')).toBe('1')
    }
    // Services write their logs in batches (at most 200 ms late): poll for them.
    for (const replica of REPLICAS) {
      await vi.waitFor(() => {
        const served = (stack.processes[replica]?.logs ?? []).filter((line) =>
          line.includes(`"requestId":"${marker}-`),
        )
        expect(served.length, `${replica} served some of the invokes`).toBeGreaterThan(0)
      }, PROMPTLY)
    }
  })

  it('both replicas see a publish promptly', async () => {
    const promptId = await newPrompt('v1 for {{who}}')
    await publish(promptId)
    await warm(`/api/v1/prompts/${promptId}/invoke`)
    await setTemplate(promptId, 'v2 for {{who}}')
    await publish(promptId)
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const res = await direct(replica, `/api/v1/prompts/${promptId}/invoke`, { variables: { who: 'x' } })
        expect(res.body.data).toMatchObject({ renderedContent: 'v2 for x', version: 2 })
        expect(res.headers.get('x-service-version')).toBe('2')
      }, PROMPTLY)
    }
    // version N stays reachable, from cache or not.
    const v1 = await call<Rendered>(stack.gateway, 'POST', `/api/v1/prompts/${promptId}/invoke?version=1`, {
      token: slice.apiKey,
      body: { variables: { who: 'y' } },
    })
    expect(v1.body.data).toMatchObject({ renderedContent: 'v1 for y', version: 1 })
  })

  it('both replicas see visibility changes promptly (public invoke)', async () => {
    const promptId = await newPrompt('public {{who}}')
    await publish(promptId)
    const path = `/api/v1/public/prompts/${promptId}/invoke`
    for (const replica of REPLICAS) {
      expect((await direct(replica, path, { variables: { who: 'x' } }, anonymous)).status).toBe(404)
    }
    const shown = await call(stack.gateway, 'PATCH', `/api/v1/prompts/${promptId}`, {
      token: slice.apiKey,
      body: { isPublic: true },
    })
    expect(shown.status).toBe(200)
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const res = await direct(replica, path, { variables: { who: 'x' } }, anonymous)
        expect(res.body.data?.renderedContent).toBe('public x')
      }, PROMPTLY)
    }
    // Without credentials through the gateway too.
    const viaGateway = await call<Rendered>(stack.gateway, 'POST', path, {
      body: { variables: { who: 'y' } },
    })
    expect(viaGateway.status).toBe(200)
    expect(viaGateway.body.data?.renderedContent).toBe('public y')
    await warm(path, anonymous)

    const hidden = await call(stack.gateway, 'PATCH', `/api/v1/prompts/${promptId}`, {
      token: slice.apiKey,
      body: { isPublic: false },
    })
    expect(hidden.status).toBe(200)
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const res = await direct(replica, path, { variables: { who: 'x' } }, anonymous)
        expect(res.status).toBe(404)
        expect(res.body.error?.code).toBe('NOT_FOUND')
      }, PROMPTLY)
    }
  })

  it('both replicas see a delete promptly', async () => {
    const promptId = await newPrompt('doomed {{who}}')
    await publish(promptId)
    await warm(`/api/v1/prompts/${promptId}/invoke`)
    const deleted = await call(stack.gateway, 'DELETE', `/api/v1/prompts/${promptId}`, {
      token: slice.apiKey,
    })
    expect(deleted.status).toBe(200)
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const res = await direct(replica, `/api/v1/prompts/${promptId}/invoke`, { variables: { who: 'x' } })
        expect(res.status).toBe(404)
        expect(res.body.error?.code).toBe('NOT_FOUND')
      }, PROMPTLY)
    }
  })

  it('answers ENVIRONMENT_NOT_SET for an environment nothing was promoted to', async () => {
    const res = await call<Rendered>(
      stack.gateway,
      'POST',
      `/api/v1/prompts/${slice.promptId}/invoke?env=production`,
      { token: slice.apiKey, body: { variables: { name: 'a', place: 'b' } } },
    )
    expect(res.status).toBe(404)
    expect(res.body.error?.code).toBe('ENVIRONMENT_NOT_SET')
  })

  it('renders the draft on inject and enforces required variables on invoke', async () => {
    const inject = await call<Rendered>(stack.gateway, 'POST', `/api/v1/prompts/${slice.promptId}/inject`, {
      token: slice.apiKey,
      body: { variables: { name: 'Ada' } },
    })
    expect(inject.status).toBe(200)
    expect(inject.body.data).toMatchObject({
      renderedContent: 'Hello Ada, welcome to {{place}}!',
      unresolvedVariables: ['place'],
    })
    const missing = await call<Rendered>(stack.gateway, 'POST', `/api/v1/prompts/${slice.promptId}/invoke`, {
      token: slice.apiKey,
      body: { variables: { name: 'Ada' } },
    })
    expect(missing.status).toBe(400)
    expect(missing.body.error).toMatchObject({ code: 'MISSING_REQUIRED_VARIABLES', details: ['place'] })
  })

  it('both replicas see a promote promptly (env=production follows the pin)', async () => {
    const promptId = await newPrompt('pinned v1 {{who}}')
    const v1 = await publish(promptId)
    await setTemplate(promptId, 'pinned v2 {{who}}')
    const v2 = await publish(promptId)
    const path = `/api/v1/prompts/${promptId}/invoke?env=production`
    const promote = async (versionId: string) => {
      const res = await call(
        stack.gateway,
        'POST',
        `/api/v1/prompts/${promptId}/environments/production/promote`,
        {
          token: slice.apiKey,
          body: { versionId },
        },
      )
      expect(res.status).toBe(200)
    }
    for (const replica of REPLICAS) {
      const unset = await direct(replica, path, { variables: { who: 'x' } })
      expect(unset.body.error?.code).toBe('ENVIRONMENT_NOT_SET')
    }
    await promote(v1._id)
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const res = await direct(replica, path, { variables: { who: 'x' } })
        expect(res.body.data).toMatchObject({ renderedContent: 'pinned v1 x', version: 1 })
        expect(res.headers.get('x-service-version')).toBe('1')
      }, PROMPTLY)
    }
    await warm(path)
    await promote(v2._id)
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const res = await direct(replica, path, { variables: { who: 'x' } })
        expect(res.body.data).toMatchObject({ renderedContent: 'pinned v2 x', version: 2 })
      }, PROMPTLY)
    }
  })

  it('a chat prompt promoted to production renders the same messages by slug on both replicas right after the promote', async () => {
    const slug = `chat-${Math.random().toString(36).slice(2)}`
    const messages = (greeting: string) => [
      { role: 'system', content: `${greeting} You help {{who}}.` },
      { type: 'placeholder', name: 'history' },
      { role: 'user', content: '{{question}}' },
    ]
    const created = await call<{ data: { _id: string } }>(stack.gateway, 'POST', '/api/v1/prompts', {
      token: slice.apiKey,
      body: { name: `Chat ${slug}`, slug, type: 'chat', messages: messages('v1.'), config: { model: 'm1' } },
    })
    expect(created.status).toBe(201)
    const promptId = created.body.data._id
    const v1 = await publish(promptId)
    const edited = await call(stack.gateway, 'PATCH', `/api/v1/prompts/${promptId}`, {
      token: slice.apiKey,
      body: { messages: messages('v2.'), config: { model: 'm2' } },
    })
    expect(edited.status).toBe(200)
    const v2 = await publish(promptId)
    const promote = async (versionId: string) => {
      const res = await call(
        stack.gateway,
        'POST',
        `/api/v1/prompts/${promptId}/environments/production/promote`,
        {
          token: slice.apiKey,
          body: { versionId },
        },
      )
      expect(res.status).toBe(200)
    }
    const path = `/api/v1/prompts/slug/${slug}/invoke?env=production`
    const body = {
      variables: { who: 'Ada', question: 'Why?', history: [{ role: 'assistant', content: 'Earlier.' }] },
    }
    const expected = (greeting: string) => [
      { role: 'system', content: `${greeting} You help Ada.` },
      { role: 'assistant', content: 'Earlier.' },
      { role: 'user', content: 'Why?' },
    ]
    await promote(v1._id)
    // Each replica has the v1 answer cached by slug (two identical answers in a row).
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const first = await direct(replica, path, body)
        const second = await direct(replica, path, body)
        expect(first.body.data).toMatchObject({ version: 1, config: { model: 'm1' } })
        expect(first.body.data?.renderedMessages).toEqual(expected('v1.'))
        expect(second.body).toEqual(first.body)
      }, PROMPTLY)
    }
    await promote(v2._id)
    const seen: Rendered['data'][] = []
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const res = await direct(replica, path, body)
        expect(res.body.data).toMatchObject({ version: 2, versionId: v2._id, config: { model: 'm2' } })
        expect(res.body.data?.renderedMessages).toEqual(expected('v2.'))
        expect(res.headers.get('x-service-version')).toBe('2')
        seen.push(res.body.data)
      }, PROMPTLY)
    }
    expect(seen[0]).toEqual(seen[1])
    // Through the gateway too, by slug, as a client calls it.
    const viaGateway = await call<Rendered>(stack.gateway, 'POST', path, { token: slice.apiKey, body })
    expect(viaGateway.body.data?.renderedMessages).toEqual(expected('v2.'))
  })

  it('both replicas see an unpublish promptly (public invoke becomes 404)', async () => {
    const promptId = await newPrompt('listed {{who}}')
    await publish(promptId)
    const shown = await call(stack.gateway, 'PATCH', `/api/v1/prompts/${promptId}`, {
      token: slice.apiKey,
      body: { isPublic: true },
    })
    expect(shown.status).toBe(200)
    const path = `/api/v1/public/prompts/${promptId}/invoke`
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        expect((await direct(replica, path, { variables: { who: 'x' } }, anonymous)).status).toBe(200)
      }, PROMPTLY)
    }
    await warm(path, anonymous)
    const unpublished = await call(stack.gateway, 'DELETE', `/api/v1/prompts/${promptId}/publish`, {
      token: slice.apiKey,
    })
    expect(unpublished.status).toBe(200)
    for (const replica of REPLICAS) {
      await vi.waitFor(async () => {
        const res = await direct(replica, path, { variables: { who: 'x' } }, anonymous)
        expect(res.status).toBe(404)
      }, PROMPTLY)
    }
    // Its versions stay: invoking with credentials still works.
    const invoked = await direct('render', `/api/v1/prompts/${promptId}/invoke`, { variables: { who: 'y' } })
    expect(invoked.body.data?.renderedContent).toBe('listed y')
  })
})
