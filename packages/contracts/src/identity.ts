import { type Static, Type } from '@sinclair/typebox'
import { DisplayName, ObjectId, Timestamp } from './common.ts'

export const SCOPES = [
  'prompts:read',
  'prompts:write',
  'organization:read',
  'organization:write',
  /** Promote to an environment the organization protects (DESIGN section 15); with prompts:write. */
  'environments:promote-protected',
  'runs:write',
] as const
export type Scope = (typeof SCOPES)[number]
export const Scope = Type.Union(
  SCOPES.map((s) => Type.Literal(s)),
  { $id: 'Scope' },
)

export const ROLES = ['OWNER', 'ADMIN', 'MEMBER'] as const
export type Role = (typeof ROLES)[number]
export const MEMBERSHIP_STATUSES = ['ACTIVE', 'INVITED', 'SUSPENDED'] as const
export type MembershipStatus = (typeof MEMBERSHIP_STATUSES)[number]

export const Email = Type.String({ format: 'email', maxLength: 254 })

export const User = Type.Object({ _id: ObjectId, email: Type.String(), name: Type.String() }, { $id: 'User' })
export type User = Static<typeof User>

/**
 * Browser sessions (DESIGN section 10): with `cookie: true` the refresh token is not in the
 * answer but in an HttpOnly cookie scoped to /api/v1/auth; refresh and logout then read it
 * from the cookie and require the CSRF header.
 */
export const REFRESH_COOKIE = 'pm_refresh'
export const REFRESH_COOKIE_PATH = '/api/v1/auth'
/**
 * Set and cleared with the refresh cookie, readable by the page, holding no secret ("1"): it
 * tells the dashboard whether a session may exist, so a signed-out visit sends no refresh.
 */
export const SESSION_HINT_COOKIE = 'pm_session'
/** Any non-empty value: a cross-site form cannot send a custom header without CORS. */
export const CSRF_HEADER = 'x-csrf-protection'
const CookieMode = Type.Optional(
  Type.Boolean({ description: 'Set the refresh token as an HttpOnly cookie instead of answering it.' }),
)

export const LoginRequest = Type.Object(
  {
    email: Type.String({ minLength: 1, maxLength: 254 }),
    password: Type.String({ minLength: 1, maxLength: 1024 }),
    cookie: CookieMode,
  },
  { $id: 'LoginRequest', additionalProperties: false },
)
export type LoginRequest = Static<typeof LoginRequest>

export const LoginResponse = Type.Object(
  {
    accessToken: Type.String(),
    tokenType: Type.Literal('Bearer'),
    expiresIn: Type.Integer({ description: 'Seconds until the access token expires.' }),
    refreshToken: Type.Optional(Type.String()),
    refreshExpiresIn: Type.Optional(
      Type.Integer({
        description:
          'Seconds until the refresh token (the session) expires; each refresh rotates it and starts this period again.',
      }),
    ),
    user: Type.Ref(User),
    organizationId: Type.Union([ObjectId, Type.Null()]),
  },
  { $id: 'LoginResponse' },
)
export type LoginResponse = Static<typeof LoginResponse>

export const Organization = Type.Object(
  {
    _id: ObjectId,
    name: Type.String(),
    slug: Type.String(),
    /** Environments only an OWNER/ADMIN or a key with environments:promote-protected may promote to. */
    protectedEnvironments: Type.Array(Type.Union([Type.Literal('preview'), Type.Literal('production')])),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Organization' },
)
export type Organization = Static<typeof Organization>

export const OrganizationList = Type.Object(
  { organizations: Type.Array(Type.Ref(Organization)) },
  { $id: 'OrganizationList' },
)

export const Membership = Type.Object(
  {
    organizationId: ObjectId,
    userId: ObjectId,
    role: Type.Union(ROLES.map((r) => Type.Literal(r))),
    status: Type.Union(MEMBERSHIP_STATUSES.map((s) => Type.Literal(s))),
    createdAt: Timestamp,
  },
  { $id: 'Membership' },
)
export type Membership = Static<typeof Membership>

export const RateLimitSetting = Type.Object(
  {
    points: Type.Integer({ minimum: 1, maximum: 1_000_000 }),
    durationSeconds: Type.Integer({ minimum: 1, maximum: 86_400 }),
  },
  { $id: 'RateLimitSetting', additionalProperties: false },
)
export type RateLimitSetting = Static<typeof RateLimitSetting>

export const CreateApiKeyRequest = Type.Object(
  {
    name: DisplayName(100),
    scopes: Type.Array(Type.Ref(Scope), { minItems: 1, uniqueItems: true }),
    expiresAt: Type.Optional(Timestamp),
    rateLimit: Type.Optional(Type.Ref(RateLimitSetting)),
  },
  { $id: 'CreateApiKeyRequest', additionalProperties: false },
)
export type CreateApiKeyRequest = Static<typeof CreateApiKeyRequest>

export const RenameApiKeyRequest = Type.Object(
  { name: DisplayName(100) },
  { $id: 'RenameApiKeyRequest', additionalProperties: false },
)
export type RenameApiKeyRequest = Static<typeof RenameApiKeyRequest>

export const ApiKey = Type.Object(
  {
    _id: ObjectId,
    organizationId: ObjectId,
    name: Type.String(),
    prefix: Type.String(),
    scopes: Type.Array(Type.Ref(Scope)),
    expiresAt: Type.Union([Timestamp, Type.Null()]),
    rateLimit: Type.Union([Type.Ref(RateLimitSetting), Type.Null()]),
    createdBy: ObjectId,
    createdAt: Timestamp,
    lastUsedAt: Type.Union([Timestamp, Type.Null()]),
    revokedAt: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: 'ApiKey' },
)
export type ApiKey = Static<typeof ApiKey>

/** Returned once, at creation: the only time the secret is shown. */
export const CreatedApiKey = Type.Object(
  { apiKey: Type.Ref(ApiKey), key: Type.String({ pattern: '^pk_' }) },
  { $id: 'CreatedApiKey' },
)
export type CreatedApiKey = Static<typeof CreatedApiKey>

export const ApiKeyList = Type.Object({ apiKeys: Type.Array(Type.Ref(ApiKey)) }, { $id: 'ApiKeyList' })

export const RegisterRequest = Type.Object(
  {
    email: Email,
    password: Type.String({ minLength: 8, maxLength: 1024 }),
    name: DisplayName(200),
    cookie: CookieMode,
  },
  { $id: 'RegisterRequest', additionalProperties: false },
)
export type RegisterRequest = Static<typeof RegisterRequest>

export const CreateOrganizationRequest = Type.Object(
  { name: DisplayName(200) },
  { $id: 'CreateOrganizationRequest', additionalProperties: false },
)

/** What the gateway learns about a key (internal route). */
export const ResolvedApiKey = Type.Object(
  {
    _id: Type.String(),
    organizationId: Type.String(),
    scopes: Type.Array(Type.Ref(Scope)),
    expiresAt: Type.Union([Type.String(), Type.Null()]),
    revokedAt: Type.Union([Type.String(), Type.Null()]),
    rateLimit: Type.Union([Type.Ref(RateLimitSetting), Type.Null()]),
    /** The key's name: the actor's name in the audit log. */
    name: Type.Optional(Type.String()),
  },
  { $id: 'ResolvedApiKey' },
)
export type ResolvedApiKey = Static<typeof ResolvedApiKey>

/** Refresh tokens: opaque, shown once per rotation, stored hashed. */
export const RefreshRequest = Type.Object(
  {
    /** Absent: the session cookie is used (with the CSRF header). */
    refreshToken: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
    /** Switches the new access token's current organization (ACTIVE membership required). */
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'RefreshRequest', additionalProperties: false },
)
export type RefreshRequest = Static<typeof RefreshRequest>

export const LogoutRequest = Type.Object(
  {
    /** Absent: the session cookie is used (with the CSRF header). */
    refreshToken: Type.Optional(Type.String({ minLength: 1, maxLength: 512 })),
  },
  { $id: 'LogoutRequest', additionalProperties: false },
)
export type LogoutRequest = Static<typeof LogoutRequest>

export const UpdateOrganizationRequest = Type.Object(
  {
    name: Type.Optional(DisplayName(200)),
    /** OWNER/ADMIN only (DESIGN section 15). */
    protectedEnvironments: Type.Optional(
      Type.Array(Type.Union([Type.Literal('preview'), Type.Literal('production')]), { uniqueItems: true }),
    ),
  },
  { $id: 'UpdateOrganizationRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateOrganizationRequest = Static<typeof UpdateOrganizationRequest>

export const RoleSchema = Type.Union(
  ROLES.map((r) => Type.Literal(r)),
  { $id: 'Role' },
)
export const MembershipStatusSchema = Type.Union(
  MEMBERSHIP_STATUSES.map((s) => Type.Literal(s)),
  { $id: 'MembershipStatus' },
)

/** A membership with the member's user record (what the members routes show). */
export const Member = Type.Object(
  {
    organizationId: ObjectId,
    userId: ObjectId,
    email: Type.String(),
    name: Type.String(),
    role: Type.Ref(RoleSchema),
    status: Type.Ref(MembershipStatusSchema),
    createdAt: Timestamp,
  },
  { $id: 'Member' },
)
export type Member = Static<typeof Member>

export const MemberList = Type.Object({ members: Type.Array(Type.Ref(Member)) }, { $id: 'MemberList' })

export const AddMemberRequest = Type.Object(
  {
    email: Type.String({ minLength: 3, maxLength: 254 }),
    role: Type.Optional(Type.Ref(RoleSchema)),
  },
  { $id: 'AddMemberRequest', additionalProperties: false },
)
export type AddMemberRequest = Static<typeof AddMemberRequest>

export const UpdateMemberRequest = Type.Object(
  {
    role: Type.Optional(Type.Ref(RoleSchema)),
    status: Type.Optional(Type.Union([Type.Literal('ACTIVE'), Type.Literal('SUSPENDED')])),
  },
  { $id: 'UpdateMemberRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateMemberRequest = Static<typeof UpdateMemberRequest>
