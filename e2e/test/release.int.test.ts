import { type CallerContext, CONTEXT_HEADER } from '@pm/contracts'
import { signContext } from '@pm/kit'
import { afterAll, beforeAll, describe, expect, it, vi } from 'vitest'
import { call } from '../src/client.ts'
import { runSlice, type SliceResult } from '../src/slice.ts'
import { type Stack, startStack } from '../src/stack.ts'

/**
 * Release safety through the gateway (issue 29, DESIGN section 15): protected environments,
 * history and rollback, promote by number, and a split served the same on two render replicas.
 */

interface Data<T> {
  data: T
}
interface ErrorBody {
  error: { code: string; message: string }
}
interface PinBody {
  versionId: string
  version: number
  promotedBy: string
  split?: {
    id: string
    variants: { versionId: string; version: number; weight: number; invocations?: number }[]
  }
}
interface Invoked {
  renderedContent: string
  version: number
  versionId: string
  variant?: number
}

const MEMBER = { email: 'member-release@example.com', password: 'member password 1', name: 'Mia Member' }
const ADMIN2 = { email: 'admin-release@example.com', password: 'admin password 12', name: 'Ada Admin' }

describe('release safety: protected environments, history, rollback, splits', () => {
  let stack: Stack
  let slice: SliceResult
  let member: string
  let admin: string
  let plainKey: string
  let readKey: string
  let scopedKey: string
  let promptId: string
  const versions: { _id: string; version: number }[] = []

  const api = <T>(
    method: string,
    path: string,
    token: string,
    body?: unknown,
    headers?: Record<string, string>,
  ) =>
    call<T>(stack.gateway, method, path, {
      token,
      ...(body !== undefined ? { body } : {}),
      ...(headers ? { headers } : {}),
    })

  const login = async (person: { email: string; password: string }): Promise<string> => {
    const res = await call<Data<{ accessToken: string }>>(stack.gateway, 'POST', '/api/v1/auth/login', {
      body: { email: person.email, password: person.password },
    })
    expect(res.status).toBe(200)
    return res.body.data.accessToken
  }

  const key = async (scopes: string[]): Promise<string> => {
    const res = await api<Data<{ key: string }>>(
      'POST',
      `/api/v1/organizations/${slice.organizationId}/api-keys`,
      slice.accessToken,
      { name: `release ${scopes.join(' ')}`, scopes },
    )
    expect(res.status).toBe(201)
    return res.body.data.key
  }

  const promote = (token: string, body: Record<string, unknown>, env = 'production') =>
    api<Data<PinBody> & ErrorBody>('POST', `/api/v1/prompts/${promptId}/environments/${env}/promote`, token, {
      ...body,
      organizationId: slice.organizationId,
    })

  beforeAll(async () => {
    stack = await startStack(
      { AUTH_ALLOW_SIGNUP: 'true', SPLIT_COUNTS_FLUSH_MS: '200' },
      { renderReplicas: 2 },
    )
    slice = await runSlice(stack.gateway)
    for (const [person, role] of [
      [MEMBER, 'MEMBER'],
      [ADMIN2, 'ADMIN'],
    ] as const) {
      expect((await call(stack.gateway, 'POST', '/api/v1/auth/register', { body: person })).status).toBe(201)
      const added = await api(
        'POST',
        `/api/v1/organizations/${slice.organizationId}/members`,
        slice.accessToken,
        {
          email: person.email,
          role,
        },
      )
      expect(added.status).toBe(201)
    }
    member = await login(MEMBER)
    admin = await login(ADMIN2)
    plainKey = await key(['prompts:read', 'prompts:write'])
    readKey = await key(['prompts:read'])
    scopedKey = await key(['prompts:read', 'prompts:write', 'environments:promote-protected'])
    const created = await api<Data<{ _id: string }>>('POST', '/api/v1/prompts', slice.apiKey, {
      name: 'Release notes',
      template: 'v0 {{name}}',
    })
    promptId = created.body.data._id
    for (let i = 1; i <= 3; i++) {
      await api('PATCH', `/api/v1/prompts/${promptId}`, slice.apiKey, { template: `v${i} {{name}}` })
      const published = await api<Data<{ _id: string; version: number }>>(
        'POST',
        `/api/v1/prompts/${promptId}/publish`,
        slice.accessToken,
        {},
      )
      expect(published.status).toBe(201)
      versions.push(published.body.data)
    }
  }, 180_000)

  afterAll(async () => {
    await stack?.stop()
  })

  it('lets only an OWNER/ADMIN set protected environments', async () => {
    const path = `/api/v1/organizations/${slice.organizationId}`
    const byKey = await api<ErrorBody>('PATCH', path, plainKey, { protectedEnvironments: ['production'] })
    expect(byKey.status).toBe(403)
    const byMember = await api<ErrorBody>('PATCH', path, member, {
      protectedEnvironments: [],
      organizationId: slice.organizationId,
    })
    expect(byMember.status).toBe(403)
    const bad = await api<ErrorBody>('PATCH', path, slice.accessToken, { protectedEnvironments: ['staging'] })
    expect(bad.status).toBe(400)
    expect(bad.body.error.code).toBe('VALIDATION_ERROR')
    const set = await api<Data<{ protectedEnvironments: string[] }>>('PATCH', path, slice.accessToken, {
      protectedEnvironments: ['production'],
    })
    expect(set.status).toBe(200)
    expect(set.body.data.protectedEnvironments).toEqual(['production'])
    const read = await api<Data<{ protectedEnvironments: string[] }>>('GET', path, slice.accessToken)
    expect(read.body.data.protectedEnvironments).toEqual(['production'])
  })

  it('refuses a protected promote to a member, a read-only key and a write key without the scope; an admin and a scoped key succeed', async () => {
    const v1 = versions[0]?._id
    const byMember = await promote(member, { versionId: v1 })
    expect(byMember.status).toBe(403)
    expect(byMember.body.error.code).toBe('FORBIDDEN')
    expect(byMember.body.error.message).toMatch(/production is a protected environment/)
    const byReadKey = await promote(readKey, { versionId: v1 })
    expect(byReadKey.status).toBe(403)
    const byPlainKey = await promote(plainKey, { versionId: v1 })
    expect(byPlainKey.status).toBe(403)
    expect(byPlainKey.body.error.code).toBe('FORBIDDEN')
    // The unprotected environment stays open to a member.
    expect((await promote(member, { version: 1 }, 'preview')).status).toBe(200)

    const byAdmin = await promote(admin, { versionId: v1 })
    expect(byAdmin.status).toBe(200)
    expect(byAdmin.body.data.version).toBe(1)
    const byScopedKey = await promote(scopedKey, { version: 2 })
    expect(byScopedKey.status).toBe(200)
    expect(byScopedKey.body.data.version).toBe(2)
    // The owner, by number (issue 31); exactly one of versionId | version | split.
    expect((await promote(slice.accessToken, { version: 3 })).body.data.version).toBe(3)
    const both = await promote(slice.accessToken, { version: 3, versionId: v1 })
    expect(both.status).toBe(400)
    expect(both.body.error.code).toBe('VALIDATION_ERROR')
  })

  it('lists every promote with actor and time, newest first; rollback restores the earlier pin', async () => {
    const history = await api<
      Data<{ entries: { version: number; promotedBy: string; promotedByType: string; promotedAt: string }[] }>
    >('GET', `/api/v1/prompts/${promptId}/environments/production/history`, slice.apiKey)
    expect(history.status).toBe(200)
    const entries = history.body.data.entries
    expect(entries.map((e) => [e.version, e.promotedByType])).toEqual([
      [3, 'user'],
      [2, 'apiKey'],
      [1, 'user'],
    ])
    for (const e of entries) expect(Date.parse(e.promotedAt)).toBeGreaterThan(Date.now() - 600_000)
    expect(new Set(entries.map((e) => e.promotedBy)).size).toBe(3)

    // "Roll back to v1": a promote of that version.
    expect((await promote(slice.accessToken, { version: 1 })).status).toBe(200)
    const invoked = await api<Data<Invoked>>(
      'POST',
      `/api/v1/prompts/${promptId}/invoke?env=production`,
      slice.apiKey,
      { variables: { name: 'x' } },
    )
    expect(invoked.body.data).toMatchObject({ version: 1, renderedContent: 'v1 x' })
    expect(invoked.headers.get('x-prompt-version')).toBe('1')
  })

  it('serves a split stickily per subject, the same on both render replicas, counts it, and a plain promote ends it', async () => {
    const [a, b] = versions as unknown as [{ _id: string }, { _id: string }]
    const bad = await promote(slice.accessToken, {
      split: [
        { versionId: a._id, weight: 70 },
        { versionId: b._id, weight: 20 },
      ],
    })
    expect(bad.status).toBe(400)
    const split = await promote(slice.accessToken, {
      split: [
        { versionId: a._id, weight: 30 },
        { versionId: b._id, weight: 70 },
      ],
    })
    expect(split.status).toBe(200)
    expect(split.body.data.split?.variants.map((v) => v.weight)).toEqual([30, 70])

    let total = 0
    // A render replica drops its cached pin when the prompt's change event reaches it, over NATS:
    // soon after the promote, not with it. Wait until both serve the split (the gateway takes them
    // in turn); a probe the split served is counted like any other invoke.
    await vi.waitFor(
      async () => {
        for (let i = 0; i < 2; i++) {
          const res = await api<Data<Invoked>>(
            'POST',
            `/api/v1/prompts/${promptId}/invoke?env=production`,
            slice.apiKey,
            { variables: { name: 'x' }, subject: 'probe' },
          )
          if (res.body.data.variant !== undefined) total++
          expect(res.body.data.variant).toBeDefined()
        }
      },
      { timeout: 10_000, interval: 50 },
    )

    // Through the gateway: 40 subjects, 3 times each (body subject or X-Subject-Id).
    const seen = new Map<string, number>()
    for (let round = 0; round < 3; round++) {
      for (let s = 0; s < 40; s++) {
        const subject = `user-${s}`
        const res = await api<Data<Invoked>>(
          'POST',
          `/api/v1/prompts/${promptId}/invoke?env=production`,
          slice.apiKey,
          round === 1 ? { variables: { name: 'x' } } : { variables: { name: 'x' }, subject },
          round === 1 ? { 'x-subject-id': subject } : undefined,
        )
        expect(res.status).toBe(200)
        total++
        const { version, variant } = res.body.data
        expect(variant).toBe(version === 1 ? 0 : 1)
        expect(res.headers.get('x-prompt-version')).toBe(String(version))
        const before = seen.get(subject)
        if (before === undefined) seen.set(subject, version)
        else expect(version, subject).toBe(before)
      }
    }
    expect(new Set(seen.values())).toEqual(new Set([1, 2]))

    // Each replica directly: the same subject, the same version.
    const direct = async (replica: string, subject: string): Promise<number> => {
      const context: CallerContext = {
        kind: 'apiKey',
        organizationId: slice.organizationId,
        scopes: ['prompts:read'],
        requestId: 'e2e',
      }
      const res = await call<Invoked>(
        `http://127.0.0.1:${stack.ports[replica]}`,
        'POST',
        `/api/v1/prompts/${promptId}/invoke?env=production`,
        {
          body: { variables: { name: 'x' }, subject },
          headers: { [CONTEXT_HEADER]: signContext(context, stack.env.INTERNAL_AUTH_SECRET ?? '') },
        },
      )
      expect(res.status).toBe(200)
      total++
      return res.body.version
    }
    for (const [subject, version] of seen) {
      expect(await direct('render', subject)).toBe(version)
      expect(await direct('render2', subject)).toBe(version)
    }

    // The counts reach GET …/environments within a flush or two.
    await vi.waitFor(
      async () => {
        const envs = await api<Data<{ production: PinBody }>>(
          'GET',
          `/api/v1/prompts/${promptId}/environments`,
          slice.apiKey,
        )
        const counted = envs.body.data.production.split?.variants.map((v) => v.invocations ?? 0) ?? []
        expect(counted.reduce((x, y) => x + y, 0)).toBe(total)
      },
      { timeout: 10_000, interval: 200 },
    )

    // A plain promote ends the split, on every replica at once.
    expect((await promote(slice.accessToken, { version: 3 })).body.data.split).toBeUndefined()
    await vi.waitFor(
      async () => {
        for (const replica of ['render', 'render2']) expect(await direct(replica, 'user-1')).toBe(3)
      },
      { timeout: 3_000, interval: 20 },
    )
    const plain = await api<Data<Invoked>>(
      'POST',
      `/api/v1/prompts/${promptId}/invoke?env=production`,
      slice.apiKey,
      { variables: { name: 'x' }, subject: 'user-1' },
    )
    expect(plain.body.data.version).toBe(3)
    expect(plain.body.data.variant).toBeUndefined()
  })
})
