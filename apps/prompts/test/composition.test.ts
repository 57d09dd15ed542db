import { type PromptDependencyChangedEvent, SUBJECTS } from '@pm/contracts'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { type Harness, harness } from './helpers.ts'

/** `prompt.dependency.changed` through the outbox (DESIGN section 12). */
describe('prompt.dependency.changed', () => {
  let t: Harness
  const received: PromptDependencyChangedEvent[] = []

  beforeAll(async () => {
    t = await harness()
    await t.bus.consume(SUBJECTS.promptDependencyChanged, 'test-dependency', async (data) => {
      received.push(data as PromptDependencyChangedEvent)
    })
  })
  afterAll(async () => {
    await t?.close()
  })

  const req = async (method: 'POST' | 'PATCH', url: string, payload: unknown, status: number) => {
    const res = await t.app.inject({ method, url, headers: t.as(), payload: payload as object })
    expect(res.statusCode, res.body).toBe(status)
    return res.json<{ _id: string }>()
  }
  const create = (slug: string, template: string) =>
    req('POST', '/api/v1/prompts', { name: slug, slug, template }, 201)
  const publish = (id: string) => req('POST', `/api/v1/prompts/${id}/publish`, {}, 201)

  it('is written for the prompts whose render moves with a publish or promote of one they include', async () => {
    const child = await create('child', 'child')
    const latest = await create('uses-latest', '{{> child}}')
    const prod = await create('uses-production', '{{> child@production}}')
    await create('uses-v1', '{{> child@v1}}')
    const v1 = await publish(child._id)
    await vi.waitFor(() => expect(received).toHaveLength(1))
    expect(received[0]?.data).toEqual({
      promptId: latest._id,
      slug: 'uses-latest',
      includedSlug: 'child',
      via: 'latest',
    })
    await req(
      'POST',
      `/api/v1/prompts/${child._id}/environments/production/promote`,
      { versionId: v1._id },
      200,
    )
    await vi.waitFor(() => expect(received).toHaveLength(2))
    expect(received[1]?.data).toMatchObject({ promptId: prod._id, via: 'production' })
    expect(received[1]?.type).toBe('prompt.dependency.changed')
  })
})
