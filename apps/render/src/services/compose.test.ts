import { AppError } from '@pm/contracts'
import { compileChat, compileLogicOrFlat, compileTemplate, MAX_BLOCK_DEPTH } from '@pm/template'
import { describe, expect, it } from 'vitest'
import { type FetchReference, renderComposed, renderComposedChat } from './compose.ts'
import type { Snapshot } from './resolver.ts'

/**
 * The bounds of composition at render (DESIGN section 12), for a child that changed after its
 * parent was saved: the prompts service refuses them at save, render refuses them again.
 */

let n = 0
function snapshot(template: string, extra: Partial<Snapshot> = {}): Snapshot {
  n++
  const id = n.toString(16).padStart(24, '0')
  const compiled = compileTemplate(template)
  return {
    promptId: id,
    versionId: id,
    version: 1,
    compiled,
    variables: [],
    logic: compileLogicOrFlat(template, compiled),
    ...extra,
  }
}

/** Prompts by slug; a missing one answers NOT_FOUND as the prompts service does. */
function fetcher(bySlug: Record<string, Snapshot>): FetchReference {
  return async (ref) => {
    const found = bySlug[ref.slug]
    if (!found) throw new AppError('NOT_FOUND', 'no such slug')
    return found
  }
}

const root = (template: string) => {
  const s = snapshot(template)
  return {
    slug: 'root',
    logic: s.logic as NonNullable<Snapshot['logic']>,
    promptId: s.promptId,
    variables: [],
  }
}

const refused = async (promise: Promise<unknown>) => {
  const err = await promise.then(
    () => undefined,
    (e: unknown) => e,
  )
  expect(err).toBeInstanceOf(AppError)
  return err as AppError
}

describe('render-time bounds of references', () => {
  it('depth 5 renders, depth 6 is INVALID_REFERENCE naming the chain', async () => {
    const chain: Record<string, Snapshot> = { d6: snapshot('leaf') }
    for (let i = 5; i >= 1; i--) chain[`d${i}`] = snapshot(`${i}{{> d${i + 1}}}`)
    const five = await renderComposed(root('{{> d2}}'), {}, 'invoke', fetcher(chain), 1_000)
    expect(five.renderedContent).toBe('2345leaf')
    const six = await refused(renderComposed(root('{{> d1}}'), {}, 'invoke', fetcher(chain), 1_000))
    expect(six.code).toBe('INVALID_REFERENCE')
    expect(six.details).toEqual({ chain: 'root -> d1 -> d2 -> d3 -> d4 -> d5 -> d6' })
  })

  it('50 includes render, 51 are INVALID_REFERENCE (counted over every message of a chat prompt)', async () => {
    const parts = { leaf: snapshot('x') }
    const many = (k: number) => '{{> leaf}}'.repeat(k)
    expect((await renderComposed(root(many(50)), {}, 'invoke', fetcher(parts), 1_000)).renderedContent).toBe(
      'x'.repeat(50),
    )
    const over = await refused(renderComposed(root(many(51)), {}, 'invoke', fetcher(parts), 1_000))
    expect(over).toMatchObject({
      code: 'INVALID_REFERENCE',
      message: expect.stringContaining('more than 50'),
    })
    const chat = compileChat([
      { role: 'system', content: many(25) },
      { role: 'user', content: many(26) },
    ])
    const overChat = await refused(
      renderComposedChat({ slug: 'root', chat, variables: [] }, {}, 'invoke', fetcher(parts), 1_000),
    )
    expect(overChat.code).toBe('INVALID_REFERENCE')
  })

  it('a cycle that appeared after save, an included chat prompt, a missing slug', async () => {
    const parts: Record<string, Snapshot> = {
      a: snapshot('A{{> b}}'),
      b: snapshot('B{{> a}}'),
      chat: snapshot('[user]\nhi', { chat: compileChat([{ role: 'user', content: 'hi' }]) }),
    }
    const cycle = await refused(renderComposed(root('{{> a}}'), {}, 'invoke', fetcher(parts), 1_000))
    expect(cycle.details).toEqual({ chain: 'root -> a -> b -> a' })
    const chat = await refused(renderComposed(root('{{> chat}}'), {}, 'invoke', fetcher(parts), 1_000))
    expect(chat).toMatchObject({ code: 'INVALID_REFERENCE', message: expect.stringContaining('chat prompt') })
    const missing = await refused(renderComposed(root('ok {{> gone}}'), {}, 'invoke', fetcher(parts), 1_000))
    expect(missing.details).toEqual({ chain: 'root -> gone', reason: 'NOT_FOUND' })
  })

  it('blocks nested through includes past MAX_BLOCK_DEPTH are 422 RENDER_TOO_LARGE, not a stack overflow', async () => {
    const nested = (n: number, inner: string) => `${'{{#if a}}'.repeat(n)}${inner}${'{{/if}}'.repeat(n)}`
    // Each part alone is within the bound (saved fine); together they are not.
    const parts = { mid: snapshot(nested(30, '{{> leaf}}')), leaf: snapshot(nested(30, 'x')) }
    const ok = await renderComposed(root('{{> leaf}}'), { a: 1 }, 'invoke', fetcher(parts), 1_000)
    expect(ok.renderedContent).toBe('x')
    const err = await refused(
      renderComposed(
        root(nested(MAX_BLOCK_DEPTH - 60, '{{> mid}}')),
        { a: 1 },
        'invoke',
        fetcher(parts),
        1_000,
      ),
    )
    expect(err).toMatchObject({ code: 'RENDER_TOO_LARGE', details: { maxDepth: MAX_BLOCK_DEPTH } })
    const chat = compileChat([{ role: 'user', content: nested(10, '{{> mid}}') }])
    const overChat = await refused(
      renderComposedChat({ slug: 'root', chat, variables: [] }, { a: 1 }, 'invoke', fetcher(parts), 1_000),
    )
    expect(overChat.code).toBe('RENDER_TOO_LARGE')
  })

  it('a reference in a branch not taken is resolved too (nothing depends on the variables)', async () => {
    const err = await refused(
      renderComposed(root('{{#if no}}{{> gone}}{{/if}}'), {}, 'invoke', fetcher({}), 1_000),
    )
    expect(err.code).toBe('INVALID_REFERENCE')
  })
})
