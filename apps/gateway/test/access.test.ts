import { AppError, type ResolvedApiKey, type Role, type Scope } from '@pm/contracts'
import { describe, expect, it } from 'vitest'
import { type AccessFields, type Credential, resolveCaller } from '../src/access.ts'
import type { RoutePolicy } from '../src/policy.ts'

const ORG = 'a'.repeat(24)
const OTHER = 'b'.repeat(24)
const USER = 'c'.repeat(24)

/** Memberships of USER: OWNER in ORG unless a case says otherwise; none elsewhere. */
type Memberships = Partial<Record<string, Role>>

function key(scopes: Scope[]): Credential {
  const k: ResolvedApiKey = {
    _id: 'k'.repeat(24),
    organizationId: ORG,
    scopes,
    expiresAt: null,
    revokedAt: null,
    rateLimit: null,
  }
  return { kind: 'apiKey', key: k }
}
const user = (org?: string): Credential => ({ kind: 'user', userId: USER, org })

const policy = (p: Partial<RoutePolicy>): RoutePolicy => ({
  method: 'GET',
  url: '/api/v1/x',
  upstream: 'prompts',
  auth: 'any',
  org: 'context',
  ...p,
})

interface Case {
  name: string
  policy: RoutePolicy
  credential: Credential | null
  params?: Record<string, string>
  fields?: AccessFields
  memberships?: Memberships
  /** The caller's fields that matter, or the error code. */
  expect: Partial<{ kind: string; organizationId: string; role: Role; targetOrganizationId: string }> | string
  /** Whether the API key's rate limit was taken. */
  limited?: boolean
}

const read = policy({ scope: 'prompts:read' })
const write = policy({ scope: 'prompts:write', method: 'POST' })
const orgRead = policy({ org: 'path', scope: 'organization:read', upstream: 'identity' })
const orgWrite = policy({ org: 'path', scope: 'organization:write', upstream: 'identity' })
const userOnly = policy({ auth: 'user', method: 'POST' })
const userPath = policy({ auth: 'user', org: 'path', upstream: 'identity' })
const none = policy({ org: 'none', scope: 'organization:read', upstream: 'identity' })
const pub = policy({ auth: 'public', org: 'none', limit: 'public' })
const fork = policy({ auth: 'user', method: 'POST', target: 'targetOrganizationId' })
const publicFork = policy({ auth: 'user', method: 'POST', org: 'none', target: 'organizationId' })

const CASES: Case[] = [
  // public routes: anyone, no workspace
  { name: 'public, no credential', policy: pub, credential: null, expect: { kind: 'anonymous' } },
  // no credential on a protected route
  { name: 'any, no credential', policy: read, credential: null, expect: 'AUTH_REQUIRED' },
  { name: 'user, no credential', policy: userOnly, credential: null, expect: 'AUTH_REQUIRED' },
  // API keys: kind, scope, workspace from context / path / none
  {
    name: 'key with the scope, its own workspace',
    policy: read,
    credential: key(['prompts:read']),
    expect: { kind: 'apiKey', organizationId: ORG },
    limited: true,
  },
  {
    name: 'key without the scope',
    policy: write,
    credential: key(['prompts:read']),
    expect: 'INSUFFICIENT_SCOPE',
    limited: false,
  },
  {
    name: 'key on a user-only route',
    policy: userOnly,
    credential: key(['prompts:read', 'prompts:write']),
    expect: 'USER_TOKEN_REQUIRED',
    limited: false,
  },
  {
    name: 'key asking for another workspace (query)',
    policy: read,
    credential: key(['prompts:read']),
    fields: { queryOrganizationId: OTHER },
    expect: 'NOT_FOUND',
    limited: true,
  },
  {
    name: 'key asking for another workspace (body)',
    policy: write,
    credential: key(['prompts:write']),
    fields: { body: { organizationId: OTHER } },
    expect: 'NOT_FOUND',
  },
  {
    name: 'key naming its own workspace',
    policy: read,
    credential: key(['prompts:read']),
    fields: { queryOrganizationId: ORG },
    expect: { kind: 'apiKey', organizationId: ORG },
  },
  {
    name: 'key on its own organization path',
    policy: orgRead,
    credential: key(['organization:read']),
    params: { id: ORG },
    expect: { kind: 'apiKey', organizationId: ORG },
  },
  {
    name: 'key on another organization path',
    policy: orgRead,
    credential: key(['organization:read']),
    params: { id: OTHER },
    expect: 'NOT_FOUND',
  },
  {
    name: 'key on a route without workspace',
    policy: none,
    credential: key(['organization:read']),
    expect: { kind: 'apiKey', organizationId: ORG },
  },
  // user tokens: workspace from the token, the query, the body, the path; membership states
  {
    name: 'user, workspace from the token',
    policy: read,
    credential: user(ORG),
    expect: { kind: 'user', organizationId: ORG, role: 'OWNER' },
  },
  {
    name: 'user, query beats the token',
    policy: read,
    credential: user(OTHER),
    fields: { queryOrganizationId: ORG },
    expect: { kind: 'user', organizationId: ORG },
  },
  {
    name: 'user, workspace from the body',
    policy: write,
    credential: user(),
    fields: { body: { organizationId: ORG } },
    expect: { kind: 'user', organizationId: ORG },
  },
  {
    name: 'user without any workspace',
    policy: read,
    credential: user(),
    expect: 'VALIDATION_ERROR',
  },
  {
    name: 'user not a member (or membership not ACTIVE)',
    policy: read,
    credential: user(OTHER),
    expect: 'NOT_FOUND',
  },
  {
    name: 'user MEMBER lacks organization:write',
    policy: orgWrite,
    credential: user(),
    params: { id: ORG },
    memberships: { [ORG]: 'MEMBER' },
    expect: 'INSUFFICIENT_SCOPE',
  },
  {
    name: 'user MEMBER may read the organization',
    policy: orgRead,
    credential: user(),
    params: { id: ORG },
    memberships: { [ORG]: 'MEMBER' },
    expect: { kind: 'user', organizationId: ORG, role: 'MEMBER' },
  },
  {
    name: 'user ADMIN may write the organization',
    policy: orgWrite,
    credential: user(),
    params: { id: ORG },
    memberships: { [ORG]: 'ADMIN' },
    expect: { kind: 'user', organizationId: ORG, role: 'ADMIN' },
  },
  {
    name: 'user on another organization path',
    policy: userPath,
    credential: user(ORG),
    params: { id: OTHER },
    expect: 'NOT_FOUND',
  },
  {
    name: 'user on a route without workspace',
    policy: none,
    credential: user(),
    expect: { kind: 'user', organizationId: undefined },
  },
  // fork targets: an ACTIVE membership in the target
  {
    name: 'fork into a workspace of the user',
    policy: fork,
    credential: user(ORG),
    fields: { body: { targetOrganizationId: OTHER } },
    memberships: { [ORG]: 'OWNER', [OTHER]: 'MEMBER' },
    expect: { kind: 'user', organizationId: ORG, targetOrganizationId: OTHER },
  },
  {
    name: 'fork into a workspace the user is not in',
    policy: fork,
    credential: user(ORG),
    fields: { body: { targetOrganizationId: OTHER } },
    expect: 'MEMBERSHIP_REQUIRED',
  },
  {
    name: 'fork without a target: the current workspace',
    policy: fork,
    credential: user(ORG),
    expect: { kind: 'user', organizationId: ORG, targetOrganizationId: ORG },
  },
  {
    name: 'public fork into a workspace of the user',
    policy: publicFork,
    credential: user(),
    fields: { body: { organizationId: ORG } },
    expect: { kind: 'user', targetOrganizationId: ORG },
  },
  {
    name: 'public fork into a workspace the user is not in',
    policy: publicFork,
    credential: user(),
    fields: { body: { organizationId: OTHER } },
    expect: 'MEMBERSHIP_REQUIRED',
  },
]

describe('resolveCaller: who the caller is and which workspace it acts in', () => {
  it.each(CASES)('$name', async (c) => {
    const memberships: Memberships = c.memberships ?? { [ORG]: 'OWNER' }
    let limited = false
    const run = resolveCaller(
      c.policy,
      c.params ?? {},
      c.credential,
      c.fields ?? {},
      {
        activeMember: async (organizationId, userId) => {
          const role = userId === USER ? memberships[organizationId] : undefined
          return role ? { role } : null
        },
        limitApiKey: async () => {
          limited = true
        },
      },
      'req-1',
    )
    if (typeof c.expect === 'string') {
      const err = await run.then(
        () => null,
        (e: unknown) => e,
      )
      expect(err).toBeInstanceOf(AppError)
      expect((err as AppError).code).toBe(c.expect)
    } else {
      const caller = await run
      const defined = Object.fromEntries(Object.entries(c.expect).filter(([, v]) => v !== undefined))
      expect(caller).toMatchObject({ ...defined, requestId: 'req-1' })
      // A field expected as undefined must be absent (no workspace, no target).
      for (const [k, v] of Object.entries(c.expect)) {
        if (v === undefined) expect(caller[k as keyof typeof caller], k).toBeUndefined()
      }
    }
    if (c.limited !== undefined) expect(limited).toBe(c.limited)
  })

  it('gives a user the scopes of their role', async () => {
    const caller = await resolveCaller(
      read,
      {},
      user(ORG),
      {},
      { activeMember: async () => ({ role: 'MEMBER' }) },
      'r',
    )
    expect(caller.scopes).toEqual(['prompts:read', 'prompts:write', 'organization:read', 'runs:write'])
  })

  it('names the actor for the audit log: the member by name, the key by its name', async () => {
    const named = await resolveCaller(
      write,
      {},
      user(ORG),
      {},
      { activeMember: async () => ({ role: 'ADMIN', name: 'Ada Lovelace' }) },
      'r',
    )
    expect(named.actorName).toBe('Ada Lovelace')
    const credential = key(['prompts:write'])
    if (credential.kind === 'apiKey') credential.key.name = 'CI deploy'
    const asKey = await resolveCaller(write, {}, credential, {}, { activeMember: async () => null }, 'r')
    expect(asKey).toMatchObject({ kind: 'apiKey', actorName: 'CI deploy' })
    // No workspace, no membership looked up: unnamed (the service names the user itself).
    const createOrg = policy({ auth: 'user', org: 'none', method: 'POST', upstream: 'identity' })
    const unnamed = await resolveCaller(createOrg, {}, user(), {}, { activeMember: async () => null }, 'r')
    expect(unnamed.actorName).toBeUndefined()
  })
})
