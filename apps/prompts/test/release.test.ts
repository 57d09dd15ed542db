import type { EnvironmentHistory, Environments, Pin, Prompt, PromptVersion } from '@pm/contracts'
import { newId } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { promoteDate } from '../src/services/prompts.ts'
import { type Harness, harness } from './helpers.ts'

// One service for the file; each test makes its own prompt.
let t: Harness
beforeAll(async () => {
  t = await harness()
})
afterAll(async () => {
  await t.close()
})

async function promptWithVersions(n: number): Promise<{ prompt: Prompt; versions: PromptVersion[] }> {
  const created = await t.app.inject({
    method: 'POST',
    url: '/api/v1/prompts',
    headers: t.as(),
    payload: { name: `Release ${newId()}`, template: 'v0 {{name}}' },
  })
  const prompt = created.json<Prompt>()
  const versions: PromptVersion[] = []
  for (let i = 1; i <= n; i++) {
    await t.app.inject({
      method: 'PATCH',
      url: `/api/v1/prompts/${prompt._id}`,
      headers: t.as(),
      payload: { template: `v${i} {{name}}` },
    })
    const res = await t.app.inject({
      method: 'POST',
      url: `/api/v1/prompts/${prompt._id}/publish`,
      headers: t.as(),
    })
    versions.push(res.json<PromptVersion>())
  }
  return { prompt, versions }
}

function promote(id: string, body: unknown, headers = t.as(), env = 'production') {
  return t.app.inject({
    method: 'POST',
    url: `/api/v1/prompts/${id}/environments/${env}/promote`,
    headers,
    payload: body as Record<string, unknown>,
  })
}

describe('promote: by id, by number, or a split; exactly one', () => {
  it('promotes by version number', async () => {
    const { prompt, versions } = await promptWithVersions(2)
    const res = await promote(prompt._id, { version: 1 })
    expect(res.statusCode).toBe(200)
    expect(res.json<Pin>()).toMatchObject({ versionId: versions[0]?._id, version: 1 })
    expect((await promote(prompt._id, { version: 9 })).json().error.code).toBe('VERSION_NOT_FOUND')
  })

  it('refuses none, two, or an unknown field with 400 VALIDATION_ERROR', async () => {
    const { prompt, versions } = await promptWithVersions(1)
    for (const body of [
      {},
      { version: 1, versionId: versions[0]?._id },
      { version: 1, other: 1 },
      { version: 0 },
    ]) {
      const res = await promote(prompt._id, body)
      expect(res.statusCode, JSON.stringify(body)).toBe(400)
      expect(res.json().error.code).toBe('VALIDATION_ERROR')
    }
  })

  it('validates a split: count, sum, duplicates, unpublished or foreign versions', async () => {
    const { prompt, versions } = await promptWithVersions(3)
    const other = await promptWithVersions(1)
    const [a, b, c] = versions.map((v) => v._id) as [string, string, string]
    const cases: [unknown, number, string][] = [
      [{ split: [{ versionId: a, weight: 100 }] }, 400, 'VALIDATION_ERROR'],
      [
        {
          split: [
            { versionId: a, weight: 50 },
            { versionId: b, weight: 40 },
          ],
        },
        400,
        'VALIDATION_ERROR',
      ],
      [
        {
          split: [
            { versionId: a, weight: 50 },
            { versionId: a, weight: 50 },
          ],
        },
        400,
        'VALIDATION_ERROR',
      ],
      [
        {
          split: [
            { versionId: a, weight: 50.5 },
            { versionId: b, weight: 49.5 },
          ],
        },
        400,
        'VALIDATION_ERROR',
      ],
      [
        {
          split: [
            { versionId: a, weight: 0 },
            { versionId: b, weight: 100 },
          ],
        },
        400,
        'VALIDATION_ERROR',
      ],
      [{ split: Array.from({ length: 6 }, () => ({ versionId: a, weight: 1 })) }, 400, 'VALIDATION_ERROR'],
      [
        {
          split: [
            { versionId: a, weight: 50 },
            { versionId: other.versions[0]?._id, weight: 50 },
          ],
        },
        404,
        'VERSION_NOT_FOUND',
      ],
    ]
    for (const [body, status, code] of cases) {
      const res = await promote(prompt._id, body)
      expect(res.statusCode, JSON.stringify(body)).toBe(status)
      expect(res.json().error.code).toBe(code)
    }
    const ok = await promote(prompt._id, {
      split: [
        { versionId: a, weight: 20 },
        { versionId: b, weight: 30 },
        { versionId: c, weight: 50 },
      ],
    })
    expect(ok.statusCode).toBe(200)
    const pin = ok.json<Pin>()
    expect(pin.split?.variants.map((v) => [v.version, v.weight])).toEqual([
      [1, 20],
      [2, 30],
      [3, 50],
    ])
    const envs = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/environments`,
      headers: t.as(),
    })
    expect(envs.json<Environments>().production?.split?.variants.map((v) => v.invocations)).toEqual([0, 0, 0])
    // Render's counts show per variant.
    await t.store.addSplitCounts([
      { splitId: pin.split?.id ?? '', variant: 0, count: 2 },
      { splitId: pin.split?.id ?? '', variant: 2, count: 5 },
    ])
    const counted = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/environments`,
      headers: t.as(),
    })
    expect(counted.json<Environments>().production?.split?.variants.map((v) => v.invocations)).toEqual([
      2, 0, 5,
    ])
    // A plain promote ends the split.
    const plain = await promote(prompt._id, { version: 2 })
    expect(plain.json<Pin>().split).toBeUndefined()
  })
})

describe('protected environments', () => {
  it('lets an OWNER/ADMIN or a scoped key promote, and refuses a MEMBER or a key without the scope', async () => {
    const { prompt } = await promptWithVersions(1)
    t.orgSettings.set(t.org, ['production'])
    try {
      const member = await promote(prompt._id, { version: 1 }, t.as({ role: 'MEMBER' }))
      expect(member.statusCode).toBe(403)
      expect(member.json().error).toMatchObject({ code: 'FORBIDDEN' })
      expect(member.json().error.message).toMatch(/protected environment/)
      const key = { kind: 'apiKey' as const, userId: undefined, apiKeyId: newId(), role: undefined }
      const plainKey = await promote(prompt._id, { version: 1 }, t.as({ ...key, scopes: ['prompts:write'] }))
      expect(plainKey.statusCode).toBe(403)
      // preview is not protected: a MEMBER may promote there.
      expect(
        (await promote(prompt._id, { version: 1 }, t.as({ role: 'MEMBER' }), 'preview')).statusCode,
      ).toBe(200)
      expect((await promote(prompt._id, { version: 1 }, t.as({ role: 'ADMIN' }))).statusCode).toBe(200)
      const scoped = await promote(
        prompt._id,
        { version: 1 },
        t.as({ ...key, scopes: ['prompts:write', 'environments:promote-protected'] }),
      )
      expect(scoped.statusCode).toBe(200)
      expect(scoped.json<Pin>().promotedBy).toBe(key.apiKeyId)
    } finally {
      t.orgSettings.set(t.org, [])
    }
  })
})

describe('history and rollback', () => {
  it('lists every promote newest first with who and when; a rollback is a promote of the earlier version', async () => {
    const { prompt, versions } = await promptWithVersions(2)
    await promote(prompt._id, { versionId: versions[0]?._id })
    await promote(prompt._id, { version: 2 })
    await promote(prompt._id, { version: 1 }) // roll back
    const res = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/environments/production/history?limit=2`,
      headers: t.as(),
    })
    expect(res.statusCode).toBe(200)
    const history = res.json<EnvironmentHistory>()
    expect(history.pagination).toMatchObject({ total: 3, limit: 2 })
    expect(history.entries.map((e) => e.version)).toEqual([1, 2])
    expect(history.entries[0]).toMatchObject({ promotedBy: t.user, promotedByType: 'user' })
    expect(Date.parse(history.entries[0]?.promotedAt ?? '')).toBeGreaterThan(0)
    const page2 = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/environments/production/history?limit=2&page=2`,
      headers: t.as(),
    })
    expect(page2.json<EnvironmentHistory>().entries.map((e) => e.version)).toEqual([1])
    const preview = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/environments/preview/history`,
      headers: t.as(),
    })
    expect(preview.json<EnvironmentHistory>().entries).toEqual([])
  })

  it('racing promotes leave the pin equal to the newest history entry', async () => {
    const { prompt } = await promptWithVersions(2)
    // Promote A is held just before its write while promote B runs whole, as on two replicas.
    let reached!: () => void
    const atWrite = new Promise<void>((resolve) => {
      reached = resolve
    })
    let release!: () => void
    const held = new Promise<void>((resolve) => {
      release = resolve
    })
    const setPin = t.store.setPin.bind(t.store)
    const spy = vi.spyOn(t.store, 'setPin').mockImplementationOnce(async (...args) => {
      reached()
      await held
      return setPin(...args)
    })
    // One millisecond for both: A's date, read before B's promote, is no later than B's.
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-12-04T12:00:00.000Z') })
    try {
      const a = promote(prompt._id, { version: 1 })
      await atWrite
      expect((await promote(prompt._id, { version: 2 })).statusCode).toBe(200)
      release()
      expect((await a).statusCode).toBe(200)
    } finally {
      vi.useRealTimers()
      spy.mockRestore()
    }
    const get = (url: string) => t.app.inject({ method: 'GET', url, headers: t.as() })
    const pin = (await get(`/api/v1/prompts/${prompt._id}/environments`)).json<Environments>().production
    const { entries } = (
      await get(`/api/v1/prompts/${prompt._id}/environments/production/history`)
    ).json<EnvironmentHistory>()
    expect(pin).toMatchObject({ version: 1 })
    expect(entries.map((e) => e.version)).toEqual([1, 2])
    expect(entries[0]?.promotedAt).toBe(pin?.promotedAt)
    expect(Date.parse(entries[0]?.promotedAt ?? '')).toBeGreaterThan(Date.parse(entries[1]?.promotedAt ?? ''))
  })

  it('dates a promote after the pin it replaces, even one dated ahead of this clock', () => {
    const now = Date.parse('2026-12-04T12:00:00.000Z')
    const pin = (promotedAt: string): Pin => ({
      versionId: newId(),
      version: 1,
      promotedAt,
      promotedBy: newId(),
    })
    expect(promoteDate(null, now)).toBe('2026-12-04T12:00:00.000Z')
    expect(promoteDate(pin('2026-12-04T11:00:00.000Z'), now)).toBe('2026-12-04T12:00:00.000Z')
    expect(promoteDate(pin('2026-12-04T12:00:00.000Z'), now)).toBe('2026-12-04T12:00:00.001Z')
    // Another replica's clock ran ahead: still after it.
    expect(promoteDate(pin('2026-12-04T12:00:05.000Z'), now)).toBe('2026-12-04T12:00:05.001Z')
  })

  it('lists promotes made within one millisecond in the order they were made', async () => {
    const { prompt } = await promptWithVersions(3)
    // The clock stands still: every promote below is made at the same millisecond.
    vi.useFakeTimers({ toFake: ['Date'], now: new Date('2026-11-27T12:00:00.000Z') })
    try {
      for (const version of [1, 2, 3, 1, 3, 2]) {
        expect((await promote(prompt._id, { version })).statusCode).toBe(200)
      }
    } finally {
      vi.useRealTimers()
    }
    const res = await t.app.inject({
      method: 'GET',
      url: `/api/v1/prompts/${prompt._id}/environments/production/history`,
      headers: t.as(),
    })
    const entries = res.json<EnvironmentHistory>().entries
    expect(entries.map((e) => e.version)).toEqual([2, 3, 1, 3, 2, 1])
    // Each a millisecond after the one before it.
    expect(entries.map((e) => e.promotedAt).reverse()).toEqual(
      [0, 1, 2, 3, 4, 5].map((ms) => new Date(Date.parse('2026-11-27T12:00:00.000Z') + ms).toISOString()),
    )
  })
})

describe('two saves of one draft at once: neither writes back what the other changed', () => {
  /** Runs `between` once, after the next save has read the draft and before it writes. */
  function landBetween(between: () => Promise<unknown>) {
    const original = t.store.updatePrompt.bind(t.store)
    let pending = true
    const spy = vi.spyOn(t.store, 'updatePrompt').mockImplementation(async (...args) => {
      if (pending) {
        pending = false
        await between()
      }
      return original(...args)
    })
    let calls = 0
    return {
      calls: () => calls,
      restore: () => {
        calls = spy.mock.calls.length
        spy.mockRestore()
      },
    }
  }
  const patch = (id: string, url: string, payload: Record<string, unknown>) =>
    t.app.inject({ method: 'PATCH', url: `/api/v1/prompts/${id}${url}`, headers: t.as(), payload })

  it('two variables changed at once both stay changed', async () => {
    const { prompt } = await promptWithVersions(0)
    await patch(prompt._id, '', { template: 'Hi {{a}} and {{b}}' })
    const race = landBetween(() => patch(prompt._id, '/variables/b', { description: 'from B' }))
    const a = await patch(prompt._id, '/variables/a', { required: false })
    race.restore()
    expect(a.statusCode, a.body).toBe(200)
    // A's first write found the draft changed by B, read it again and wrote once more.
    expect(race.calls()).toBe(3)
    const variables = a.json<Prompt>().variables
    expect(variables.find((v) => v.name === 'a')).toMatchObject({ required: false })
    expect(variables.find((v) => v.name === 'b')).toMatchObject({ description: 'from B' })
  })

  it('a change of variables only keeps the template another save wrote meanwhile', async () => {
    const { prompt } = await promptWithVersions(0)
    const race = landBetween(() => patch(prompt._id, '', { template: 'Saved by B {{name}}' }))
    const a = await patch(prompt._id, '', { variables: [{ name: 'name', description: 'who' }] })
    race.restore()
    expect(a.statusCode, a.body).toBe(200)
    expect(a.json<Prompt>()).toMatchObject({
      template: 'Saved by B {{name}}',
      variables: [{ name: 'name', description: 'who' }],
    })
  })

  it('answers 409 CONFLICT when the draft keeps changing, and 404 when it went', async () => {
    const { prompt } = await promptWithVersions(0)
    const original = t.store.updatePrompt.bind(t.store)
    // Every write finds the draft changed since it was read.
    let other = Date.now() + 60_000
    const spy = vi.spyOn(t.store, 'updatePrompt').mockImplementation(async (...args) => {
      await original(args[0], args[1], { updatedAt: new Date(++other).toISOString() })
      return original(...args)
    })
    const busy = await patch(prompt._id, '', { description: 'never' })
    spy.mockRestore()
    expect([busy.statusCode, busy.json().error.code]).toEqual([409, 'CONFLICT'])
    const race = landBetween(() =>
      t.app.inject({ method: 'DELETE', url: `/api/v1/prompts/${prompt._id}`, headers: t.as() }),
    )
    const gone = await patch(prompt._id, '', { description: 'late' })
    race.restore()
    expect([gone.statusCode, gone.json().error.code]).toEqual([404, 'NOT_FOUND'])
  })

  it('a restore in the same millisecond as the draft it replaces is not undone by a save that read that draft', async () => {
    const { prompt, versions } = await promptWithVersions(1)
    const draft = (await patch(prompt._id, '', { template: 'Draft {{name}}' })).json<Prompt>()
    // The restore's clock reads the draft's updatedAt (a write in the same millisecond, or a
    // replica whose clock is a little behind): only a later updatedAt tells the save it changed.
    const race = landBetween(async () => {
      vi.useFakeTimers({ toFake: ['Date'] })
      vi.setSystemTime(Date.parse(draft.updatedAt))
      try {
        return await t.app.inject({
          method: 'POST',
          url: `/api/v1/prompts/${prompt._id}/versions/${versions[0]?._id}/restore`,
          headers: t.as(),
          payload: {},
        })
      } finally {
        vi.useRealTimers()
      }
    })
    const a = await patch(prompt._id, '', { variables: [{ name: 'name', description: 'who' }] })
    race.restore()
    expect(a.statusCode, a.body).toBe(200)
    expect(a.json<Prompt>()).toMatchObject({
      template: 'v1 {{name}}',
      variables: [{ name: 'name', description: 'who' }],
    })
  })

  it('a publish, a promote or an unpublish on a clock behind the draft does not take its updatedAt back', async () => {
    // A save that read the draft at T; another save at T (written as T + 1, later than the one it
    // read); then a write dated from a clock reading T again (the same millisecond, or a replica a
    // little behind). Had that write set updatedAt back to T, the first save's compare-and-set
    // would find "its" draft and write back the template it read, undoing the second save.
    const steps: [string, (id: string) => Promise<unknown>][] = [
      [
        'publish',
        (id) => t.app.inject({ method: 'POST', url: `/api/v1/prompts/${id}/publish`, headers: t.as() }),
      ],
      ['promote', (id) => promote(id, { version: 1 })],
      [
        'unpublish',
        (id) => t.app.inject({ method: 'DELETE', url: `/api/v1/prompts/${id}/publish`, headers: t.as() }),
      ],
    ]
    for (const [label, step] of steps) {
      const { prompt } = await promptWithVersions(1)
      if (label === 'unpublish')
        expect((await patch(prompt._id, '', { isPublic: true })).statusCode).toBe(200)
      const draft = (await patch(prompt._id, '', { template: 'Draft {{name}}' })).json<Prompt>()
      const race = landBetween(async () => {
        vi.useFakeTimers({ toFake: ['Date'] })
        vi.setSystemTime(Date.parse(draft.updatedAt))
        try {
          expect((await patch(prompt._id, '', { template: 'Saved by B {{name}}' })).statusCode).toBe(200)
          expect(((await step(prompt._id)) as { statusCode: number }).statusCode, label).toBeLessThan(300)
        } finally {
          vi.useRealTimers()
        }
      })
      const a = await patch(prompt._id, '', { variables: [{ name: 'name', description: 'who' }] })
      race.restore()
      expect(a.statusCode, a.body).toBe(200)
      expect(a.json<Prompt>(), label).toMatchObject({
        template: 'Saved by B {{name}}',
        variables: [{ name: 'name', description: 'who' }],
      })
    }
  })
})
