import { readFileSync } from 'node:fs'
import type { ChatMessage, ResolvedPrompt, Variable } from '@pm/contracts'
import { chatTemplate } from '@pm/template'
import { describe, expect, it } from 'vitest'
import { PromptClient, PromptServiceError, renderLocally } from '../src/index.ts'

const ID = '0123456789abcdef01234567'
const ORG = '0123456789abcdef0123456b'

interface Vector {
  name: string
  template?: string
  messages?: ChatMessage[]
  variables: Variable[]
  values: Record<string, unknown>
  expected?: { renderedContent: string; renderedMessages?: unknown[] }
  /** `status` 400 unless given; `details` compared whole when given, `names` otherwise. */
  error?: { code: string; status?: number; names?: string[]; details?: unknown }
}

const VECTORS = (
  JSON.parse(readFileSync(new URL('../../template/vectors/render.json', import.meta.url), 'utf8')) as {
    cases: Vector[]
  }
).cases

describe('renderLocally: the shared vectors (packages/template/vectors/render.json)', () => {
  it.each(VECTORS.map((v) => [v.name, v] as const))('%s', (_name, v) => {
    const source = {
      template: v.template ?? chatTemplate(v.messages ?? []),
      variables: v.variables,
      ...(v.messages ? { messages: v.messages } : {}),
    }
    if (v.expected) {
      const out = renderLocally(source, v.values)
      expect(out.renderedContent).toBe(v.expected.renderedContent)
      expect(out.renderedMessages).toEqual(v.expected.renderedMessages)
      return
    }
    let thrown: unknown
    try {
      renderLocally(source, v.values)
    } catch (err) {
      thrown = err
    }
    expect(thrown).toBeInstanceOf(PromptServiceError)
    const err = thrown as PromptServiceError
    expect(err.status).toBe(v.error?.status ?? 400)
    expect(err.code).toBe(v.error?.code)
    if (v.error?.details !== undefined) {
      expect(err.details).toEqual(v.error.details)
      return
    }
    const names =
      err.code === 'VALIDATION_ERROR'
        ? (err.details as { path: string }[]).map((d) => d.path.replace('/body/variables/', ''))
        : err.details
    expect(names).toEqual(v.error?.names)
  })
})

const RESOLVED: ResolvedPrompt = {
  promptId: ID,
  organizationId: ORG,
  versionId: '0123456789abcdef0123456a',
  version: 3,
  template: 'Hello {{name}}, you are {{n}}.',
  variables: [
    { name: 'name', required: true },
    { name: 'n', required: false, defaultValue: '?' },
  ],
  config: { model: 'm' },
}

/** A fetch that answers the resolve route (or fails like a dead network) and counts calls. */
function fakeFetch() {
  const state = { calls: [] as string[], down: false }
  const fetch = async (input: string | URL | Request): Promise<Response> => {
    const url = String(input instanceof Request ? input.url : input)
    state.calls.push(url)
    if (state.down) throw new TypeError('fetch failed')
    return new Response(JSON.stringify({ data: RESOLVED }), {
      status: 200,
      headers: { 'content-type': 'application/json', 'x-request-id': 'r' },
    })
  }
  return { state, fetch: fetch as typeof globalThis.fetch }
}

describe('getRenderable / renderLocally: fetched once per TTL, rendered here', () => {
  it('300 renders with distinct variables make 1 network call within the TTL', async () => {
    const { state, fetch } = fakeFetch()
    const client = new PromptClient({
      baseUrl: 'http://prompts.test',
      apiKey: 'pk_x',
      fetch,
      cacheTtlMs: 60_000,
    })
    for (let i = 0; i < 300; i++) {
      const out = await client.renderLocally(ID, { name: `user-${i}`, n: i })
      expect(out.renderedContent).toBe(`Hello user-${i}, you are ${i}.`)
      expect(out).toMatchObject({ promptId: ID, version: 3, config: { model: 'm' } })
      expect(out.source).toBe(i === 0 ? 'network' : 'cache')
    }
    expect(state.calls).toEqual([`http://prompts.test/api/v1/prompts/${ID}/resolve`])
    // By slug and with an env: their own entries, one call each.
    await client.renderLocallyBySlug('greeting', { name: 'a' }, { env: 'production' })
    await client.renderLocallyBySlug('greeting', { name: 'b' }, { env: 'production' })
    expect(state.calls.slice(1)).toEqual([
      'http://prompts.test/api/v1/prompts/slug/greeting/resolve?env=production',
    ])
    // A missing required variable is refused here, as invoke would.
    await expect(client.renderLocally(ID, {})).rejects.toMatchObject({
      code: 'MISSING_REQUIRED_VARIABLES',
      details: ['name'],
    })
  })

  it('an outage serves the cached template (stale, refreshed later), then the fallback when nothing is cached', async () => {
    const { state, fetch } = fakeFetch()
    let now = 1_000_000
    const client = new PromptClient({
      baseUrl: 'http://prompts.test',
      apiKey: 'pk_x',
      fetch,
      cacheTtlMs: 1_000,
      retries: 0,
      clock: { now: () => now },
      fallbackTemplates: { [ID]: 'Hi {{name}} (fallback)', other: 'Other {{name}}' },
    })
    expect((await client.renderLocally(ID, { name: 'Ada' })).source).toBe('network')
    state.down = true
    now += 5_000
    const stale = await client.renderLocally(ID, { name: 'Bo' })
    expect(stale).toMatchObject({ renderedContent: 'Hello Bo, you are ?.', source: 'stale', version: 3 })
    await client.settled()
    // Nothing cached for this one: its fallback template, rendered with the same rules.
    const fallback = await client.renderLocallyBySlug('other', { name: 'Cy' })
    expect(fallback).toMatchObject({ renderedContent: 'Other Cy', source: 'fallback', version: null })
    const renderable = await client.getRenderable('0123456789abcdef0123456f').catch((e: unknown) => e)
    expect(renderable).toMatchObject({ code: 'NETWORK_ERROR' })
    // Back up: the next call after the TTL refreshes in the background and the fresh entry serves.
    state.down = false
    await client.renderLocally(ID, { name: 'Di' })
    await client.settled()
    expect((await client.renderLocally(ID, { name: 'Ed' })).source).toBe('cache')
  })

  it('a write through the client drops the cached content (by id and by slug)', async () => {
    const { state, fetch } = fakeFetch()
    const client = new PromptClient({ baseUrl: 'http://prompts.test', apiKey: 'pk_x', fetch })
    await client.renderLocally(ID, { name: 'a' })
    await client.renderLocallyBySlug('greeting', { name: 'a' })
    client.invalidate(ID)
    await client.renderLocally(ID, { name: 'a' })
    await client.renderLocallyBySlug('greeting', { name: 'a' })
    expect(state.calls).toHaveLength(4)
  })
})

describe('renderLocally: references and the output cap', () => {
  it('a version that includes other prompts is rendered by the service (invoke), once per variables', async () => {
    const calls: string[] = []
    const fetch = (async (input: string | URL | Request) => {
      const url = String(input instanceof Request ? input.url : input)
      calls.push(url)
      const data = url.endsWith('/resolve')
        ? { ...RESOLVED, template: 'Intro: {{> intro@production}} {{name}}' }
        : {
            renderedContent: 'Intro: Welcome! Ada',
            variables: { name: 'Ada' },
            promptId: ID,
            versionId: RESOLVED.versionId,
            version: 3,
            references: [{ slug: 'intro', promptId: ORG, versionId: ORG, version: 1, via: 'production' }],
          }
      return new Response(JSON.stringify({ data }), {
        status: 200,
        headers: { 'content-type': 'application/json', 'x-request-id': 'r' },
      })
    }) as typeof globalThis.fetch
    const client = new PromptClient({ baseUrl: 'http://prompts.test', apiKey: 'pk_x', fetch })
    const renderable = await client.getRenderable(ID)
    expect(renderable.references).toBe(true)
    expect(() => renderable.render({ name: 'Ada' })).toThrow(
      expect.objectContaining({ code: 'REFERENCES_NOT_LOCAL', status: 400, details: ['intro@production'] }),
    )
    const out = await client.renderLocally(ID, { name: 'Ada' })
    expect(out).toMatchObject({ renderedContent: 'Intro: Welcome! Ada', source: 'network' })
    expect(out.references).toEqual([expect.objectContaining({ slug: 'intro', via: 'production' })])
    expect((await client.renderLocally(ID, { name: 'Ada' })).source).toBe('cache')
    expect(calls).toEqual([
      `http://prompts.test/api/v1/prompts/${ID}/resolve`,
      `http://prompts.test/api/v1/prompts/${ID}/invoke`,
    ])
  })

  it('renders logic in chat messages and refuses a chat version whose messages include other prompts', () => {
    const messages: ChatMessage[] = [
      { role: 'system', content: '{{#if vip}}Be extra kind.{{else}}Be kind.{{/if}}' },
      { role: 'user', content: 'Hi {{name}}' },
    ]
    const source = { template: chatTemplate(messages), variables: [], messages }
    expect(renderLocally(source, { vip: true, name: 'Ada' }).renderedMessages).toEqual([
      { role: 'system', content: 'Be extra kind.' },
      { role: 'user', content: 'Hi Ada' },
    ])
    const including: ChatMessage[] = [{ role: 'system', content: '{{> policy@production}}' }, ...messages]
    expect(() =>
      renderLocally(
        { template: chatTemplate(including), variables: [], messages: including },
        { name: 'Ada' },
      ),
    ).toThrow(expect.objectContaining({ code: 'REFERENCES_NOT_LOCAL', details: ['policy@production'] }))
  })

  it("applies the client's maxOutputBytes (the service's RENDER_MAX_OUTPUT_BYTES) with the service's 422", async () => {
    const { fetch } = fakeFetch()
    const client = new PromptClient({
      baseUrl: 'http://prompts.test',
      apiKey: 'pk_x',
      fetch,
      maxOutputBytes: 1024,
    })
    expect((await client.renderLocally(ID, { name: 'x'.repeat(1000) })).renderedContent).toHaveLength(1018)
    await expect(client.renderLocally(ID, { name: 'x'.repeat(1010) })).rejects.toMatchObject({
      status: 422,
      code: 'RENDER_TOO_LARGE',
      details: { maxOutputBytes: 1024 },
    })
    // Without the option: the service's default, 1 MiB.
    expect(() =>
      renderLocally({ template: '{{a}}{{a}}', variables: [] }, { a: 'x'.repeat(600_000) }),
    ).toThrow(expect.objectContaining({ code: 'RENDER_TOO_LARGE', details: { maxOutputBytes: 1024 * 1024 } }))
  })
})
