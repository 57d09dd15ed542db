import type { Prompt, PromptVersion, ResolvedPrompt } from '@pm/contracts'
import { afterAll, beforeAll, describe, expect, it } from 'vitest'
import { type Harness, harness } from './helpers.ts'

/** GET /prompts/:id/resolve and /prompts/slug/:slug/resolve: what clients render locally. */
describe('resolve', () => {
  let t: Harness
  let prompt: Prompt
  let v1: PromptVersion

  beforeAll(async () => {
    t = await harness()
    const created = await t.app.inject({
      method: 'POST',
      url: '/api/v1/prompts',
      headers: t.as(),
      payload: {
        name: 'Support',
        type: 'chat',
        config: { model: 'm' },
        messages: [
          { role: 'system', content: 'You help {{customer}}.' },
          { type: 'placeholder', name: 'history' },
        ],
      },
    })
    prompt = created.json<Prompt>()
    const published = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${prompt._id}/publish`,
      headers: t.as(),
      payload: {},
    })
    v1 = published.json<PromptVersion>()
  })
  afterAll(() => t.close())

  it('answers the published version with its messages, variables and config, by id or slug', async () => {
    for (const url of [
      `/api/v1/prompts/${prompt._id}/resolve`,
      '/api/v1/prompts/slug/support/resolve?version=1',
    ]) {
      const res = await t.app.inject({ method: 'GET', url, headers: t.as() })
      expect(res.statusCode).toBe(200)
      expect(res.json<ResolvedPrompt>()).toMatchObject({
        promptId: prompt._id,
        versionId: v1._id,
        version: 1,
        config: { model: 'm' },
        messages: [
          { role: 'system', content: 'You help {{customer}}.' },
          { type: 'placeholder', name: 'history' },
        ],
        variables: [
          { name: 'customer', required: true },
          { name: 'history', required: true },
        ],
      })
    }
  })

  it('refuses an unset environment, a missing version, and version with env', async () => {
    const env = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/resolve?env=production`,
      headers: t.as(),
    })
    expect(env.statusCode).toBe(404)
    expect(env.json()).toMatchObject({ error: { code: 'ENVIRONMENT_NOT_SET' } })
    const missing = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/resolve?version=9`,
      headers: t.as(),
    })
    expect(missing.json()).toMatchObject({ error: { code: 'VERSION_NOT_FOUND' } })
    const both = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/resolve?version=1&env=preview`,
      headers: t.as(),
    })
    expect(both.statusCode).toBe(400)
  })

  it('answers 400 NO_PUBLISHED_VERSION for a prompt never published, with a selector too', async () => {
    const draft = (
      await t.app.inject({
        method: 'POST',
        url: '/api/v1/prompts',
        headers: t.as(),
        payload: { name: 'Never published', template: 'hi' },
      })
    ).json<Prompt>()
    // By id and by slug, on the route clients use and on the ones render invokes through.
    for (const path of [
      `/api/v1/prompts/${draft._id}/resolve`,
      `/api/v1/prompts/slug/${draft.slug}/resolve`,
      `/internal/prompts/${draft._id}/resolve`,
      `/internal/prompts/slug/${draft.slug}/resolve`,
    ]) {
      for (const query of ['', '?version=1', '?env=production']) {
        const res = await t.app.inject({ method: 'GET', url: `${path}${query}`, headers: t.as() })
        expect(res.statusCode, `${path}${query}`).toBe(400)
        expect(res.json(), `${path}${query}`).toMatchObject({ error: { code: 'NO_PUBLISHED_VERSION' } })
      }
    }
  })
})
