import { type CallerContext, CONTEXT_HEADER } from '@pm/contracts'
import { signContext } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call, type Reply } from '../src/client.ts'
import { runSlice, type SliceResult } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

/** Composition and template logic (issue 26, DESIGN section 12), through the gateway. */

interface ErrorAnswer {
  error?: { code: string; message: string; details?: unknown }
}
interface Rendered extends ErrorAnswer {
  data?: {
    renderedContent: string
    version: number
    unresolvedVariables?: string[]
    references?: Array<{ slug: string; promptId: string; versionId: string; version: number; via: string }>
  }
}
interface Created extends ErrorAnswer {
  data?: { _id: string; slug: string; currentVersionId?: string | null }
}

const REPLICAS = ['render', 'render2'] as const
/** Long enough that only the prompts service's change events can make a replica see a change. */
const POINTER_TTL_MS = 600_000
const PROMPTLY = { timeout: 3_000, interval: 10 }

describe('composition: logic blocks and references', () => {
  let stack: Stack
  let slice: SliceResult
  let n = 0

  beforeAll(async () => {
    stack = await startStack({ RESOLVE_CACHE_TTL_MS: String(POINTER_TTL_MS) }, { renderReplicas: 2 })
    slice = await runSlice(stack.gateway)
  }, 180_000)

  afterAll(async () => {
    await stack?.stop()
  })

  const tag = () => `${Date.now().toString(36)}${(n++).toString(36)}`
  const api = <T>(method: string, path: string, body?: unknown, token = slice.apiKey) =>
    call<T>(stack.gateway, method, path, { token, ...(body !== undefined ? { body } : {}) })

  const create = (slug: string, template: string, extra: Record<string, unknown> = {}) =>
    api<Created>('POST', '/api/v1/prompts', { name: slug, slug, template, ...extra })

  const mustCreate = async (slug: string, template: string, extra: Record<string, unknown> = {}) => {
    const res = await create(slug, template, extra)
    expect(res.status, JSON.stringify(res.body)).toBe(201)
    return res.body.data as NonNullable<Created['data']>
  }

  const publish = async (id: string) => {
    const res = await api<{ data: { _id: string; version: number } }>(
      'POST',
      `/api/v1/prompts/${id}/publish`,
      {},
      slice.accessToken,
    )
    expect(res.status).toBe(201)
    return res.body.data
  }

  const promote = async (id: string, env: 'preview' | 'production', versionId: string) => {
    const res = await api('POST', `/api/v1/prompts/${id}/environments/${env}/promote`, { versionId })
    expect(res.status).toBe(200)
  }

  const invoke = (id: string, variables: Record<string, unknown> = {}) =>
    api<Rendered>('POST', `/api/v1/prompts/${id}/invoke`, { variables })

  const refused = (res: Reply<ErrorAnswer>, code: string, status = 400) => {
    expect(res.status, JSON.stringify(res.body)).toBe(status)
    expect(res.body.error?.code).toBe(code)
    return res.body.error as NonNullable<ErrorAnswer['error']>
  }

  type Detail = { path: string; message: string; chain?: string }
  const detail = (err: { details?: unknown }): Detail => (err.details as Detail[])[0] as Detail

  describe('refused at save (400 VALIDATION_ERROR naming the path)', () => {
    it('an unclosed block and an {{else}} outside a block', async () => {
      const t = tag()
      const unclosed = refused(await create(`u-${t}`, 'Hi {{#if vip}}VIP'), 'VALIDATION_ERROR')
      expect(detail(unclosed)).toMatchObject({ path: '/body/template' })
      expect(detail(unclosed).message).toContain('{{#if}} is never closed')
      const stray = refused(await create(`e-${t}`, 'a {{else}} b'), 'VALIDATION_ERROR')
      expect(detail(stray).message).toContain('{{else}} outside a block')
      // The same on an update; the draft is kept as it was.
      const ok = await mustCreate(`ok-${t}`, 'fine {{name}}')
      refused(
        await api('PATCH', `/api/v1/prompts/${ok._id}`, { template: '{{#each xs}}' }),
        'VALIDATION_ERROR',
      )
      const kept = await api<{ data: { template: string } }>('GET', `/api/v1/prompts/${ok._id}`)
      expect(kept.body.data.template).toBe('fine {{name}}')
    })

    it('a missing slug, a chat prompt, a prompt of another workspace', async () => {
      const t = tag()
      const missing = refused(await create(`m-${t}`, `x {{> nowhere-${t}}}`), 'VALIDATION_ERROR')
      expect(detail(missing).chain).toBe(`m-${t} -> nowhere-${t}`)
      await mustCreate(`chat-${t}`, '', {
        type: 'chat',
        template: undefined,
        messages: [{ role: 'system', content: 'hi' }],
      })
      const chat = refused(await create(`c-${t}`, `{{> chat-${t}}}`), 'VALIDATION_ERROR')
      expect(detail(chat).message).toContain('chat prompt')
      // A prompt of another workspace of the same user is not found from this one.
      const other = await api<{ data: { _id: string } }>(
        'POST',
        '/api/v1/organizations',
        { name: `Other ${t}` },
        slice.accessToken,
      )
      expect(other.status).toBe(201)
      const elsewhere = await api<Created>(
        'POST',
        '/api/v1/prompts',
        { organizationId: other.body.data._id, name: `there-${t}`, slug: `there-${t}`, template: 'secret' },
        slice.accessToken,
      )
      expect(elsewhere.status).toBe(201)
      const cross = refused(await create(`x-${t}`, `{{> there-${t}}}`), 'VALIDATION_ERROR')
      expect(detail(cross).message).toContain(`no prompt with slug there-${t}`)
    })

    it('a cycle of 2 and of 3, named by its chain', async () => {
      const t = tag()
      const a = await mustCreate(`a-${t}`, 'A')
      await mustCreate(`b-${t}`, `B {{> a-${t}}}`)
      const two = refused(
        await api('PATCH', `/api/v1/prompts/${a._id}`, { template: `A {{> b-${t}}}` }),
        'VALIDATION_ERROR',
      )
      expect(detail(two).chain).toBe(`a-${t} -> b-${t} -> a-${t}`)
      expect(two.message).toContain(`a-${t} -> b-${t} -> a-${t}`)

      const c1 = await mustCreate(`c1-${t}`, 'one')
      await mustCreate(`c2-${t}`, `two {{> c1-${t}@production}}`)
      await mustCreate(`c3-${t}`, `three {{> c2-${t}}}`)
      const three = refused(
        await api('PATCH', `/api/v1/prompts/${c1._id}`, { template: `{{#if x}}{{> c3-${t}}}{{/if}}` }),
        'VALIDATION_ERROR',
      )
      expect(detail(three).chain).toBe(`c1-${t} -> c3-${t} -> c2-${t} -> c1-${t}`)
      // A prompt including itself.
      const self = refused(
        await api('PATCH', `/api/v1/prompts/${a._id}`, { template: `{{> a-${t}}}` }),
        'VALIDATION_ERROR',
      )
      expect(detail(self).chain).toBe(`a-${t} -> a-${t}`)
    })

    it('depth 6 is refused, depth 5 accepted; 51 includes refused, 50 accepted', async () => {
      const t = tag()
      await mustCreate(`d6-${t}`, 'leaf')
      for (let i = 5; i >= 1; i--) await mustCreate(`d${i}-${t}`, `[${i} {{> d${i + 1}-${t}}}]`)
      const deep = refused(await create(`d0-${t}`, `{{> d1-${t}}}`), 'VALIDATION_ERROR')
      expect(detail(deep).message).toContain('deeper than 5')
      expect(detail(deep).chain).toBe(
        [`d0-${t}`, ...[1, 2, 3, 4, 5, 6].map((i) => `d${i}-${t}`)].join(' -> '),
      )
      await mustCreate(`leaf-${t}`, 'x')
      const many = (k: number) => Array.from({ length: k }, () => `{{> leaf-${t}}}`).join('')
      const over = refused(await create(`many-${t}`, many(51)), 'VALIDATION_ERROR')
      expect(detail(over).message).toContain('more than 50 includes')
      await mustCreate(`fifty-${t}`, many(50))
    })
  })

  describe('invoke', () => {
    it('renders blocks, loops and references, and says what it included', async () => {
      const t = tag()
      const header = await mustCreate(`header-${t}`, 'Policy for {{company}}.')
      const headerV1 = await publish(header._id)
      const sig = await mustCreate(`sig-${t}`, '-- {{#if signer}}{{signer}}{{else}}the team{{/if}}', {
        variables: [{ name: 'signer', required: false }],
      })
      const sigV1 = await publish(sig._id)
      await promote(sig._id, 'production', sigV1._id)
      const parent = await mustCreate(
        `parent-${t}`,
        `{{> header-${t}}}\n{{#unless quiet}}Items:{{/unless}}{{#each items}} {{@index}}={{this.name}}{{#if this.vip}}*{{/if}}{{/each}}\n{{> sig-${t}@production}}`,
        { variables: [{ name: 'quiet', required: false }] },
      )
      await publish(parent._id)
      const res = await invoke(parent._id, {
        company: 'Acme',
        items: [{ name: 'a', vip: true }, { name: 'b' }],
      })
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(res.body.data?.renderedContent).toBe('Policy for Acme.\nItems: 0=a* 1=b\n-- the team')
      expect(res.body.data?.references).toEqual([
        { slug: `header-${t}`, promptId: header._id, versionId: headerV1._id, version: 1, via: 'latest' },
        { slug: `sig-${t}`, promptId: sig._id, versionId: sigV1._id, version: 1, via: 'production' },
      ])
      // The included prompt's required variable is the parent's too.
      const missing = refused(await invoke(parent._id, { items: [] }), 'MISSING_REQUIRED_VARIABLES')
      expect(missing.details).toEqual(['company'])
      // Inject previews the draft with the same references.
      const preview = await api<Rendered>('POST', `/api/v1/prompts/${parent._id}/inject`, {
        variables: { items: [] },
      })
      expect(preview.status).toBe(200)
      expect(preview.body.data?.renderedContent).toBe('Policy for {{company}}.\nItems:\n-- the team')
      expect(preview.body.data?.unresolvedVariables).toEqual(['company', 'quiet', 'signer'])
      expect(preview.body.data?.references?.map((r) => r.slug)).toEqual([`header-${t}`, `sig-${t}`])
      // A template without references has no `references` field (its answer is as before).
      const plain = await mustCreate(`plain-${t}`, 'Hello {{name}}')
      await publish(plain._id)
      const plainRes = await invoke(plain._id, { name: 'Ann' })
      expect(plainRes.body.data).not.toHaveProperty('references')
    })

    it('an unset environment, a deleted prompt: 400 INVALID_REFERENCE with the chain', async () => {
      const t = tag()
      const child = await mustCreate(`child-${t}`, 'child text')
      await publish(child._id)
      const parent = await mustCreate(`parent-${t}`, `P {{> child-${t}@production}}`)
      await publish(parent._id)
      const unset = refused(await invoke(parent._id), 'INVALID_REFERENCE')
      expect(unset.details).toEqual({ chain: `parent-${t} -> child-${t}`, reason: 'ENVIRONMENT_NOT_SET' })
      const v3 = await mustCreate(`v3-${t}`, `{{> child-${t}@v3}}`)
      await publish(v3._id)
      expect(refused(await invoke(v3._id), 'INVALID_REFERENCE').details).toMatchObject({
        reason: 'VERSION_NOT_FOUND',
      })

      const gone = await mustCreate(`gone-${t}`, 'soon gone')
      await publish(gone._id)
      const user = await mustCreate(`user-${t}`, `U {{> gone-${t}}}`)
      await publish(user._id)
      expect((await invoke(user._id)).status).toBe(200)
      // Deleting an included prompt: 409 listing its dependents, unless forced.
      const conflict = refused(await api('DELETE', `/api/v1/prompts/${gone._id}`), 'CONFLICT', 409)
      expect(conflict.details).toEqual({
        dependents: [{ promptId: user._id, slug: `user-${t}`, name: `user-${t}`, in: ['draft', 'current'] }],
      })
      const dependents = await api<{ data: { dependents: Array<{ slug: string }> } }>(
        'GET',
        `/api/v1/prompts/${gone._id}/dependents`,
      )
      expect(dependents.body.data.dependents.map((d) => d.slug)).toEqual([`user-${t}`])
      expect((await api('DELETE', `/api/v1/prompts/${gone._id}?force=true`)).status).toBe(200)
      const deleted = refused(await invoke(user._id), 'INVALID_REFERENCE')
      expect(deleted.details).toEqual({ chain: `user-${t} -> gone-${t}`, reason: 'NOT_FOUND' })
    })

    it('a loop over a non-array is a 400; a 1 MB expansion is answered by the output cap', async () => {
      const t = tag()
      const loop = await mustCreate(`loop-${t}`, '{{#each items}}{{pad}}{{/each}}')
      await publish(loop._id)
      const notList = refused(await invoke(loop._id, { items: 'abc', pad: 'x' }), 'VALIDATION_ERROR')
      expect(notList.details).toEqual([{ path: '/body/variables/items', message: 'items must be an array' }])
      const started = Date.now()
      const big = await invoke(loop._id, {
        items: Array.from({ length: 20_000 }, () => 0),
        pad: 'x'.repeat(100),
      })
      refused(big, 'RENDER_TOO_LARGE', 422)
      expect(Date.now() - started).toBeLessThan(5_000)
    })

    it("a chat prompt's messages take logic and references, checked at save and resolved at invoke", async () => {
      const t = tag()
      const bad = refused(
        await create(`cb-${t}`, '', {
          type: 'chat',
          template: undefined,
          messages: [
            { role: 'system', content: 'ok' },
            { role: 'user', content: `{{> nowhere-${t}}}` },
          ],
        }),
        'VALIDATION_ERROR',
      )
      expect(detail(bad)).toMatchObject({
        path: '/body/messages/1/content',
        chain: `cb-${t} -> nowhere-${t}`,
      })
      const policy = await mustCreate(`policy-${t}`, 'Answer in {{lang}}.')
      const policyV1 = await publish(policy._id)
      const chat = await mustCreate(`chat-${t}`, '', {
        type: 'chat',
        template: undefined,
        messages: [
          { role: 'system', content: `{{> policy-${t}}}{{#if vip}} Be quick.{{/if}}` },
          { role: 'user', content: '{{#each qs}}{{@index}}. {{this}}\n{{/each}}' },
        ],
      })
      await publish(chat._id)
      const res = await api<Rendered & { data?: { renderedMessages?: unknown } }>(
        'POST',
        `/api/v1/prompts/${chat._id}/invoke`,
        { variables: { lang: 'French', vip: true, qs: ['why', 'how'] } },
      )
      expect(res.status, JSON.stringify(res.body)).toBe(200)
      expect(res.body.data?.renderedMessages).toEqual([
        { role: 'system', content: 'Answer in French. Be quick.' },
        { role: 'user', content: '0. why\n1. how\n' },
      ])
      expect(res.body.data?.references).toEqual([
        { slug: `policy-${t}`, promptId: policy._id, versionId: policyV1._id, version: 1, via: 'latest' },
      ])
      expect(
        refused(await invoke(chat._id, { vip: false, qs: [] }), 'MISSING_REQUIRED_VARIABLES').details,
      ).toEqual(['lang'])
    })

    it('a public prompt never shows a private one it includes', async () => {
      const t = tag()
      const secret = await mustCreate(`secret-${t}`, 'private text')
      await publish(secret._id)
      const open = await mustCreate(`open-${t}`, `Open {{> secret-${t}}}`)
      await publish(open._id)
      expect((await api('PATCH', `/api/v1/prompts/${open._id}`, { isPublic: true })).status).toBe(200)
      const publicInvoke = () =>
        call<Rendered>(stack.gateway, 'POST', `/api/v1/public/prompts/${open._id}/invoke`, { body: {} })
      const hidden = refused(await publicInvoke(), 'INVALID_REFERENCE')
      expect(JSON.stringify(hidden)).not.toContain('private text')
      expect((await api('PATCH', `/api/v1/prompts/${secret._id}`, { isPublic: true })).status).toBe(200)
      await vi.waitFor(async () => {
        const shown = await publicInvoke()
        expect(shown.body.data?.renderedContent).toBe('Open private text')
      }, PROMPTLY)
    })
  })

  describe('two render replicas', () => {
    const secret = () => stack.env.INTERNAL_AUTH_SECRET ?? ''
    const direct = async (replica: (typeof REPLICAS)[number], path: string): Promise<Reply<Rendered>> => {
      const context: CallerContext = {
        kind: 'apiKey',
        organizationId: slice.organizationId,
        scopes: ['prompts:read'],
        requestId: 'e2e',
      }
      const res = await call<unknown>(`http://127.0.0.1:${stack.ports[replica]}`, 'POST', path, {
        body: { variables: {} },
        headers: { [CONTEXT_HEADER]: signContext(context, secret()) },
      })
      const wrapped = res.status === 200 ? { data: res.body as Rendered['data'] } : (res.body as Rendered)
      return { ...res, body: wrapped }
    }

    it("a parent including child@production renders the child's new text on both replicas right after its promote", async () => {
      const t = tag()
      const child = await mustCreate(`child-${t}`, 'child one')
      const v1 = await publish(child._id)
      await promote(child._id, 'production', v1._id)
      const parent = await mustCreate(`parent-${t}`, `Parent: {{> child-${t}@production}}`)
      await publish(parent._id)
      const path = `/api/v1/prompts/${parent._id}/invoke`
      for (const replica of REPLICAS) {
        for (let i = 0; i < 2; i++) {
          const res = await direct(replica, path)
          expect(res.body.data?.renderedContent).toBe('Parent: child one')
        }
      }
      expect((await api('PATCH', `/api/v1/prompts/${child._id}`, { template: 'child two' })).status).toBe(200)
      const v2 = await publish(child._id)
      // Published but not promoted: production still renders v1.
      for (const replica of REPLICAS) {
        expect((await direct(replica, path)).body.data?.renderedContent).toBe('Parent: child one')
      }
      await promote(child._id, 'production', v2._id)
      for (const replica of REPLICAS) {
        await vi.waitFor(async () => {
          const res = await direct(replica, path)
          expect(res.body.data?.renderedContent).toBe('Parent: child two')
          expect(res.body.data?.references?.[0]).toMatchObject({
            versionId: v2._id,
            version: 2,
            via: 'production',
          })
        }, PROMPTLY)
      }
    })
  })
})
