import type { TObject, TSchema } from '@sinclair/typebox'
import {
  ApiKeyParams,
  Deleted,
  HealthStatus,
  ImportUpload,
  MemberParams,
  OpenApiDocumentBody,
  OrganizationBody,
  OrganizationParams,
  OrganizationQuery,
  PromptParams,
  PublicInvokeRequest,
  VariableParams,
  VersionParams,
} from './api/index.ts'
import type { ErrorCode } from './errors.ts'
import {
  AddMemberRequest,
  ApiKey,
  ApiKeyList,
  CreateApiKeyRequest,
  CreatedApiKey,
  CreateOrganizationRequest,
  LoginRequest,
  LoginResponse,
  LogoutRequest,
  Member,
  MemberList,
  Organization,
  OrganizationList,
  RefreshRequest,
  RegisterRequest,
  type Scope,
  UpdateMemberRequest,
  UpdateOrganizationRequest,
} from './identity.ts'
import {
  BatchParams,
  CreatePromptRequest,
  DiffQuery,
  EnvParams,
  Environments,
  ForkRequest,
  ForkResult,
  ImportAccepted,
  ImportBatch,
  InjectRequest,
  InjectResult,
  InvokeQuery,
  InvokeRequest,
  InvokeResult,
  ListPromptsQuery,
  ListVersionsQuery,
  Pin,
  PromoteRequest,
  Prompt,
  PromptList,
  PromptVersion,
  PromptWithStale,
  PublicForkRequest,
  PublicListQuery,
  PublicPrompt,
  PublicPromptList,
  PublishRequest,
  SaveAndPublishRequest,
  UpdatePromptRequest,
  UpdateVariableRequest,
  VariableList,
  VersionDiff,
  VersionList,
} from './prompts.ts'
import {
  CreatedWebhook,
  CreateWebhookRequest,
  DeliveryParams,
  ListDeliveriesQuery,
  UpdateWebhookRequest,
  Webhook,
  WebhookDelivery,
  WebhookDeliveryList,
  WebhookList,
  WebhookParams,
} from './webhooks.ts'

/**
 * The catalogue of the public surface: every route a client can call through the gateway,
 * with its credential, scope, inputs, success and failures. The OpenAPI document and the
 * typed client are generated from it; a test holds it equal to the gateway's route table.
 */

export type RouteMethod = 'GET' | 'POST' | 'PATCH' | 'DELETE'
export type RouteAuth = 'public' | 'any' | 'user'
export type RouteTag =
  | 'auth'
  | 'organizations'
  | 'members'
  | 'api-keys'
  | 'webhooks'
  | 'prompts'
  | 'versions'
  | 'environments'
  | 'render'
  | 'import'
  | 'public'
  | 'meta'

export const ROUTE_TAGS: Record<RouteTag, string> = {
  auth: 'Sign-in, sign-up and session tokens.',
  organizations: 'Workspaces. A user token picks one with `organizationId`; an API key has exactly one.',
  members: 'Memberships of an organization (ADMIN or OWNER to change them).',
  'api-keys': 'API keys for backends and scripts. The key is shown once, at creation.',
  webhooks: 'Signed `version.published` deliveries to your endpoints.',
  prompts: 'Prompt templates and their drafts.',
  versions: 'Immutable published versions, diff, restore and fork.',
  environments: 'The `preview` and `production` pins.',
  render: 'Rendering: invoke (published content) and inject (draft preview).',
  import: 'Bulk creation from a CSV file.',
  public: 'The public catalog: no credential needed to read it.',
  meta: 'This document, its reference page and the health probes.',
}

/** Response headers a route may set besides the ones every response carries. */
export type RouteHeader = 'X-Service-Version'

export interface RouteSpec {
  method: RouteMethod
  /** Full path with `:name` parameters, as in the gateway's table. */
  path: string
  tag: RouteTag
  summary: string
  description?: string
  /** public: no credential; any: API key or user JWT; user: user JWT only. */
  auth: RouteAuth
  /** Scope an API key needs (a user's role grants scopes). */
  scope?: Scope
  params?: TObject
  query?: TObject
  body?: TSchema
  /** The body may be left out (default: required when there is one). */
  bodyOptional?: boolean
  /** multipart: a form with a file field (CSV import). Default json. */
  bodyType?: 'json' | 'multipart'
  status: 200 | 201 | 202 | 204
  /** The payload (inside `{data}` unless `envelope` is false); none for 204. */
  response?: TSchema
  /** false: the body is sent as it is, without `{data}` (health, the document itself). */
  envelope?: boolean
  /** Default application/json. */
  produces?: 'application/json' | 'text/html'
  headers?: readonly RouteHeader[]
  /** Failures particular to this route; the common ones follow from auth, scope and inputs. */
  errors?: readonly ErrorCode[]
  /** Answered by the gateway itself rather than proxied to a service. */
  gateway?: boolean
  /** Other non-error answers (readiness answers 503 with its checks). */
  otherResponses?: Readonly<Record<number, { description: string; schema: TSchema }>>
}

const ORG_PREFIX = '/api/v1/organizations/:id'
const PROMPT_PREFIX = '/api/v1/prompts/:id'

export const API_ROUTES = {
  // ---- auth
  login: {
    method: 'POST',
    path: '/api/v1/auth/login',
    tag: 'auth',
    summary: 'Sign in',
    description:
      'Returns a user access token (JWT, 15 minutes by default), an opaque refresh token and the ' +
      "user's first organization. Rate limited per IP and per email.",
    auth: 'public',
    body: LoginRequest,
    status: 200,
    response: LoginResponse,
    errors: ['INVALID_CREDENTIALS'],
  },
  register: {
    method: 'POST',
    path: '/api/v1/auth/register',
    tag: 'auth',
    summary: 'Sign up',
    description:
      'Creates a user and a personal organization (OWNER). Exists only when the service runs ' +
      'with `AUTH_ALLOW_SIGNUP=true`; otherwise it answers 404.',
    auth: 'public',
    body: RegisterRequest,
    status: 201,
    response: LoginResponse,
    errors: ['CONFLICT', 'NOT_FOUND'],
  },
  refreshToken: {
    method: 'POST',
    path: '/api/v1/auth/refresh',
    tag: 'auth',
    summary: 'Exchange a refresh token',
    description:
      'Rotates the refresh token: the answer carries a new one. Reusing a spent refresh token ' +
      "revokes its whole family. `organizationId` switches the new token's current organization " +
      '(an ACTIVE membership, else 404).',
    auth: 'public',
    body: RefreshRequest,
    status: 200,
    response: LoginResponse,
    errors: ['INVALID_CREDENTIALS', 'NOT_FOUND'],
  },
  logout: {
    method: 'POST',
    path: '/api/v1/auth/logout',
    tag: 'auth',
    summary: 'Sign out',
    description: 'Revokes the refresh token (and its family).',
    auth: 'public',
    body: LogoutRequest,
    status: 204,
  },

  // ---- organizations
  listOrganizations: {
    method: 'GET',
    path: '/api/v1/organizations',
    tag: 'organizations',
    summary: "The caller's organizations",
    description: 'A user sees every ACTIVE membership; an API key sees exactly its own organization.',
    auth: 'any',
    scope: 'organization:read',
    status: 200,
    response: OrganizationList,
  },
  createOrganization: {
    method: 'POST',
    path: '/api/v1/organizations',
    tag: 'organizations',
    summary: 'Create an organization',
    description: 'The caller becomes its OWNER.',
    auth: 'user',
    body: CreateOrganizationRequest,
    status: 201,
    response: Organization,
    errors: ['CONFLICT'],
  },
  getOrganization: {
    method: 'GET',
    path: ORG_PREFIX,
    tag: 'organizations',
    summary: 'One organization',
    auth: 'any',
    scope: 'organization:read',
    params: OrganizationParams,
    status: 200,
    response: Organization,
  },
  updateOrganization: {
    method: 'PATCH',
    path: ORG_PREFIX,
    tag: 'organizations',
    summary: 'Rename an organization',
    auth: 'any',
    scope: 'organization:write',
    params: OrganizationParams,
    body: UpdateOrganizationRequest,
    status: 200,
    response: Organization,
  },

  // ---- members
  listMembers: {
    method: 'GET',
    path: `${ORG_PREFIX}/members`,
    tag: 'members',
    summary: 'Members of an organization',
    auth: 'any',
    scope: 'organization:read',
    params: OrganizationParams,
    status: 200,
    response: MemberList,
  },
  addMember: {
    method: 'POST',
    path: `${ORG_PREFIX}/members`,
    tag: 'members',
    summary: 'Add an existing user as an ACTIVE member',
    description: 'Role MEMBER by default; only an OWNER adds an OWNER. An unknown email is a 404.',
    auth: 'any',
    scope: 'organization:write',
    params: OrganizationParams,
    body: AddMemberRequest,
    status: 201,
    response: Member,
    errors: ['FORBIDDEN', 'CONFLICT'],
  },
  updateMember: {
    method: 'PATCH',
    path: `${ORG_PREFIX}/members/:userId`,
    tag: 'members',
    summary: "Change a member's role or status",
    auth: 'any',
    scope: 'organization:write',
    params: MemberParams,
    body: UpdateMemberRequest,
    status: 200,
    response: Member,
    errors: ['FORBIDDEN', 'CONFLICT'],
  },
  removeMember: {
    method: 'DELETE',
    path: `${ORG_PREFIX}/members/:userId`,
    tag: 'members',
    summary: 'End a membership',
    description: 'Answers the removed membership. The last ACTIVE OWNER cannot be removed (409).',
    auth: 'any',
    scope: 'organization:write',
    params: MemberParams,
    status: 200,
    response: Member,
    errors: ['FORBIDDEN', 'CONFLICT'],
  },

  // ---- api keys
  listApiKeys: {
    method: 'GET',
    path: `${ORG_PREFIX}/api-keys`,
    tag: 'api-keys',
    summary: 'API keys of an organization',
    description: 'Never the key itself: its display prefix, scopes, limits and dates.',
    auth: 'user',
    params: OrganizationParams,
    status: 200,
    response: ApiKeyList,
    errors: ['FORBIDDEN'],
  },
  createApiKey: {
    method: 'POST',
    path: `${ORG_PREFIX}/api-keys`,
    tag: 'api-keys',
    summary: 'Mint an API key',
    description: 'The answer is the only time the key (`pk_...`) is shown. ADMIN or OWNER.',
    auth: 'user',
    params: OrganizationParams,
    body: CreateApiKeyRequest,
    status: 201,
    response: CreatedApiKey,
    errors: ['FORBIDDEN'],
  },
  revokeApiKey: {
    method: 'DELETE',
    path: `${ORG_PREFIX}/api-keys/:keyId`,
    tag: 'api-keys',
    summary: 'Revoke an API key',
    description: 'Every gateway refuses the key at once (401). ADMIN or OWNER.',
    auth: 'user',
    params: ApiKeyParams,
    status: 200,
    response: ApiKey,
    errors: ['FORBIDDEN'],
  },

  // ---- webhooks
  listWebhooks: {
    method: 'GET',
    path: `${ORG_PREFIX}/webhooks`,
    tag: 'webhooks',
    summary: 'Webhook subscriptions',
    auth: 'any',
    scope: 'organization:write',
    params: OrganizationParams,
    status: 200,
    response: WebhookList,
    errors: ['FORBIDDEN'],
  },
  createWebhook: {
    method: 'POST',
    path: `${ORG_PREFIX}/webhooks`,
    tag: 'webhooks',
    summary: 'Subscribe an endpoint',
    description:
      'The answer is the only time the signing secret (`whsec_...`) is shown. `events` defaults to every event type; at most 25 ' +
      'subscriptions per organization (409 beyond).',
    auth: 'any',
    scope: 'organization:write',
    params: OrganizationParams,
    body: CreateWebhookRequest,
    status: 201,
    response: CreatedWebhook,
    errors: ['FORBIDDEN', 'CONFLICT'],
  },
  getWebhook: {
    method: 'GET',
    path: `${ORG_PREFIX}/webhooks/:webhookId`,
    tag: 'webhooks',
    summary: 'One subscription',
    auth: 'any',
    scope: 'organization:write',
    params: WebhookParams,
    status: 200,
    response: Webhook,
    errors: ['FORBIDDEN'],
  },
  updateWebhook: {
    method: 'PATCH',
    path: `${ORG_PREFIX}/webhooks/:webhookId`,
    tag: 'webhooks',
    summary: 'Change a subscription',
    auth: 'any',
    scope: 'organization:write',
    params: WebhookParams,
    body: UpdateWebhookRequest,
    status: 200,
    response: Webhook,
    errors: ['FORBIDDEN'],
  },
  deleteWebhook: {
    method: 'DELETE',
    path: `${ORG_PREFIX}/webhooks/:webhookId`,
    tag: 'webhooks',
    summary: 'Delete a subscription',
    auth: 'any',
    scope: 'organization:write',
    params: WebhookParams,
    status: 200,
    response: Deleted,
    errors: ['FORBIDDEN'],
  },
  testWebhook: {
    method: 'POST',
    path: `${ORG_PREFIX}/webhooks/:webhookId/test`,
    tag: 'webhooks',
    summary: 'Send a test delivery',
    description:
      'Makes one `webhook.test` attempt now (no retries), also on an inactive subscription, and ' +
      'answers the logged delivery.',
    auth: 'any',
    scope: 'organization:write',
    params: WebhookParams,
    status: 200,
    response: WebhookDelivery,
    errors: ['FORBIDDEN'],
  },
  listWebhookDeliveries: {
    method: 'GET',
    path: `${ORG_PREFIX}/webhooks/:webhookId/deliveries`,
    tag: 'webhooks',
    summary: 'Deliveries of a subscription, with every attempt',
    auth: 'any',
    scope: 'organization:write',
    params: WebhookParams,
    query: ListDeliveriesQuery,
    status: 200,
    response: WebhookDeliveryList,
    errors: ['FORBIDDEN'],
  },
  redeliverWebhookDelivery: {
    method: 'POST',
    path: `${ORG_PREFIX}/webhooks/:webhookId/deliveries/:deliveryId/redeliver`,
    tag: 'webhooks',
    summary: 'Deliver an event again',
    description:
      'Queues the same delivery again, due now, with a fresh retry round. 409 when the ' +
      'subscription is inactive or an attempt is in flight.',
    auth: 'any',
    scope: 'organization:write',
    params: DeliveryParams,
    status: 202,
    response: WebhookDelivery,
    errors: ['FORBIDDEN', 'CONFLICT'],
  },

  // ---- prompts
  listPrompts: {
    method: 'GET',
    path: '/api/v1/prompts',
    tag: 'prompts',
    summary: 'List prompts',
    description: 'Paginated, with the workspace counts in `summary`.',
    auth: 'any',
    scope: 'prompts:read',
    query: ListPromptsQuery,
    status: 200,
    response: PromptList,
  },
  createPrompt: {
    method: 'POST',
    path: '/api/v1/prompts',
    tag: 'prompts',
    summary: 'Create a draft prompt',
    description: 'Placeholders in the template that are not declared are added as required variables.',
    auth: 'any',
    scope: 'prompts:write',
    body: CreatePromptRequest,
    status: 201,
    response: Prompt,
    errors: ['CONFLICT'],
  },
  getPrompt: {
    method: 'GET',
    path: PROMPT_PREFIX,
    tag: 'prompts',
    summary: 'One prompt (with its draft)',
    auth: 'any',
    scope: 'prompts:read',
    params: PromptParams,
    query: OrganizationQuery,
    status: 200,
    response: Prompt,
  },
  updatePrompt: {
    method: 'PATCH',
    path: PROMPT_PREFIX,
    tag: 'prompts',
    summary: 'Save the draft',
    description:
      'Creates no version. `staleVariables` lists declared variables the new template no longer ' +
      'uses. Making a prompt public needs a published version.',
    auth: 'any',
    scope: 'prompts:write',
    params: PromptParams,
    body: UpdatePromptRequest,
    status: 200,
    response: PromptWithStale,
    errors: ['NO_PUBLISHED_VERSION', 'CONFLICT'],
  },
  deletePrompt: {
    method: 'DELETE',
    path: PROMPT_PREFIX,
    tag: 'prompts',
    summary: 'Delete a prompt, its versions and pins',
    auth: 'any',
    scope: 'prompts:write',
    params: PromptParams,
    query: OrganizationQuery,
    status: 200,
    response: Deleted,
  },
  listVariables: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/variables`,
    tag: 'prompts',
    summary: "The draft's variables",
    auth: 'any',
    scope: 'prompts:read',
    params: PromptParams,
    query: OrganizationQuery,
    status: 200,
    response: VariableList,
  },
  updateVariable: {
    method: 'PATCH',
    path: `${PROMPT_PREFIX}/variables/:name`,
    tag: 'prompts',
    summary: "Change one variable's metadata",
    description: '`null` removes `description` or `defaultValue`. Answers the prompt.',
    auth: 'any',
    scope: 'prompts:write',
    params: VariableParams,
    body: UpdateVariableRequest,
    status: 200,
    response: Prompt,
  },

  // ---- import
  importPrompts: {
    method: 'POST',
    path: '/api/v1/prompts/import',
    tag: 'import',
    summary: 'Import prompts from a CSV file',
    description:
      'Multipart field `file` (at most 10 MiB). Answers at once with a batch id; poll the batch ' +
      'for progress. A bad row is reported, never half-written; good rows are created.',
    auth: 'user',
    query: OrganizationQuery,
    body: ImportUpload,
    bodyType: 'multipart',
    status: 202,
    response: ImportAccepted,
  },
  getImportBatch: {
    method: 'GET',
    path: '/api/v1/prompts/import/:batchId',
    tag: 'import',
    summary: 'Progress of an import',
    auth: 'any',
    scope: 'prompts:read',
    params: BatchParams,
    query: OrganizationQuery,
    status: 200,
    response: ImportBatch,
  },

  // ---- versions
  publishPrompt: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/publish`,
    tag: 'versions',
    summary: 'Publish the draft as the next version',
    description: 'Needs a user token. Emits `version.published`.',
    auth: 'user',
    params: PromptParams,
    body: PublishRequest,
    bodyOptional: true,
    status: 201,
    response: PromptVersion,
  },
  unpublishPrompt: {
    method: 'DELETE',
    path: `${PROMPT_PREFIX}/publish`,
    tag: 'versions',
    summary: 'Take a prompt out of the public catalog',
    description: 'Clears public visibility; the version history is kept.',
    auth: 'any',
    scope: 'prompts:write',
    params: PromptParams,
    query: OrganizationQuery,
    status: 200,
    response: Prompt,
  },
  saveAndPublish: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/save-and-publish`,
    tag: 'versions',
    summary: 'Publish the stored draft',
    description:
      'No content: the server publishes its stored draft (a body may carry `organizationId` only). ' +
      'Needs a user token. Emits `version.published`.',
    auth: 'user',
    params: PromptParams,
    query: OrganizationQuery,
    body: SaveAndPublishRequest,
    bodyOptional: true,
    status: 201,
    response: PromptVersion,
  },
  listVersions: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/versions`,
    tag: 'versions',
    summary: 'Versions of a prompt',
    auth: 'any',
    scope: 'prompts:read',
    params: PromptParams,
    query: ListVersionsQuery,
    status: 200,
    response: VersionList,
  },
  diffVersions: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/versions/diff`,
    tag: 'versions',
    summary: 'Difference between two versions (or a version and the draft)',
    auth: 'any',
    scope: 'prompts:read',
    params: PromptParams,
    query: DiffQuery,
    status: 200,
    response: VersionDiff,
    errors: ['VERSION_NOT_FOUND'],
  },
  getVersion: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/versions/:versionId`,
    tag: 'versions',
    summary: 'One version',
    auth: 'any',
    scope: 'prompts:read',
    params: VersionParams,
    query: OrganizationQuery,
    status: 200,
    response: PromptVersion,
    errors: ['VERSION_NOT_FOUND'],
  },
  restoreVersion: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/versions/:versionId/restore`,
    tag: 'versions',
    summary: "Copy a version's template and variables onto the draft",
    description: 'The version history and `currentVersionId` are unchanged.',
    auth: 'any',
    scope: 'prompts:write',
    params: VersionParams,
    query: OrganizationQuery,
    body: OrganizationBody,
    bodyOptional: true,
    status: 200,
    response: Prompt,
    errors: ['VERSION_NOT_FOUND'],
  },
  forkVersion: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/versions/:versionId/fork`,
    tag: 'versions',
    summary: 'Fork a published version into a new private prompt',
    description:
      'Needs a user token with an ACTIVE membership in the target organization ' +
      '(`targetOrganizationId`, else the current one). Answers the new prompt and its version 1.',
    auth: 'user',
    params: VersionParams,
    body: ForkRequest,
    status: 201,
    response: ForkResult,
    errors: ['VERSION_NOT_FOUND', 'VERSION_NOT_PUBLISHED', 'MEMBERSHIP_REQUIRED', 'CONFLICT'],
  },

  // ---- environments
  getEnvironments: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/environments`,
    tag: 'environments',
    summary: 'The preview and production pins',
    auth: 'any',
    scope: 'prompts:read',
    params: PromptParams,
    query: OrganizationQuery,
    status: 200,
    response: Environments,
  },
  promoteVersion: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/environments/:env/promote`,
    tag: 'environments',
    summary: 'Pin a published version to an environment',
    auth: 'any',
    scope: 'prompts:write',
    params: EnvParams,
    body: PromoteRequest,
    status: 200,
    response: Pin,
    errors: ['VERSION_NOT_FOUND', 'VERSION_NOT_PUBLISHED'],
  },

  // ---- public catalog
  listPublicPrompts: {
    method: 'GET',
    path: '/api/v1/public/prompts',
    tag: 'public',
    summary: 'The public catalog',
    description: 'Published content only. Rate limited per IP.',
    auth: 'public',
    query: PublicListQuery,
    status: 200,
    response: PublicPromptList,
  },
  getPublicPrompt: {
    method: 'GET',
    path: '/api/v1/public/prompts/:id',
    tag: 'public',
    summary: 'One public prompt',
    auth: 'public',
    params: PromptParams,
    status: 200,
    response: PublicPrompt,
  },
  forkPublicPrompt: {
    method: 'POST',
    path: '/api/v1/public/prompts/:id/fork',
    tag: 'public',
    summary: "Fork a public prompt's last published version",
    description: 'Into `organizationId` (an ACTIVE membership needed). Answers the new prompt.',
    auth: 'user',
    params: PromptParams,
    body: PublicForkRequest,
    status: 201,
    response: Prompt,
    errors: ['MEMBERSHIP_REQUIRED', 'CONFLICT'],
  },

  // ---- render
  invokePrompt: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/invoke`,
    tag: 'render',
    summary: 'Render published content',
    description:
      'Renders the current version, or `version` (query or body), or the version pinned to ' +
      '`env`. Header `X-Service-Version` names the version rendered.',
    auth: 'any',
    scope: 'prompts:read',
    params: PromptParams,
    query: InvokeQuery,
    body: InvokeRequest,
    bodyOptional: true,
    status: 200,
    response: InvokeResult,
    headers: ['X-Service-Version'],
    errors: [
      'NO_PUBLISHED_VERSION',
      'MISSING_REQUIRED_VARIABLES',
      'VERSION_NOT_FOUND',
      'ENVIRONMENT_NOT_SET',
    ],
  },
  injectPrompt: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/inject`,
    tag: 'render',
    summary: 'Preview the draft',
    description: 'Never fails on missing variables: they stay in the text and are listed.',
    auth: 'any',
    scope: 'prompts:read',
    params: PromptParams,
    body: InjectRequest,
    bodyOptional: true,
    status: 200,
    response: InjectResult,
  },
  invokePublicPrompt: {
    method: 'POST',
    path: '/api/v1/public/prompts/:id/invoke',
    tag: 'public',
    summary: 'Render a public prompt',
    auth: 'public',
    params: PromptParams,
    body: PublicInvokeRequest,
    bodyOptional: true,
    status: 200,
    response: InvokeResult,
    headers: ['X-Service-Version'],
    errors: ['NO_PUBLISHED_VERSION', 'MISSING_REQUIRED_VARIABLES'],
  },

  // ---- served by the gateway itself
  getOpenApiDocument: {
    method: 'GET',
    path: '/api/v1/openapi.json',
    tag: 'meta',
    summary: 'This OpenAPI 3.1 document',
    auth: 'public',
    status: 200,
    response: OpenApiDocumentBody,
    envelope: false,
    gateway: true,
  },
  getApiReference: {
    method: 'GET',
    path: '/api/v1/docs',
    tag: 'meta',
    summary: 'A browsable reference page of this document',
    auth: 'public',
    status: 200,
    envelope: false,
    produces: 'text/html',
    gateway: true,
  },
  getLiveness: {
    method: 'GET',
    path: '/health/live',
    tag: 'meta',
    summary: 'Liveness probe',
    auth: 'public',
    status: 200,
    response: HealthStatus,
    envelope: false,
    gateway: true,
  },
  getReadiness: {
    method: 'GET',
    path: '/health/ready',
    tag: 'meta',
    summary: 'Readiness probe (checks the upstream services)',
    auth: 'public',
    status: 200,
    response: HealthStatus,
    envelope: false,
    gateway: true,
    otherResponses: { 503: { description: 'An upstream is not ready', schema: HealthStatus } },
  },
} as const satisfies Record<string, RouteSpec>

export type ApiRoutes = typeof API_ROUTES
export type OperationId = keyof ApiRoutes

/** The routes as a list, each with its operation id. */
export function listRoutes(): (RouteSpec & { operationId: OperationId })[] {
  return (Object.keys(API_ROUTES) as OperationId[]).map((operationId) => ({
    operationId,
    ...(API_ROUTES[operationId] as RouteSpec),
  }))
}

/**
 * Every failure a route can answer: its own, plus those that follow from how the gateway
 * treats it (credential, scope, inputs, rate limits, upstream failures).
 */
export function routeErrors(route: RouteSpec): ErrorCode[] {
  const codes = new Set<ErrorCode>()
  if (route.gateway) {
    // Health probes are exempt from the HTTPS rule; the document and its page are not.
    if (route.path.startsWith('/api/')) codes.add('HTTPS_REQUIRED')
    return [...codes]
  }
  const hasInput = route.params || route.query || route.body
  if (hasInput || route.auth !== 'public') codes.add('VALIDATION_ERROR')
  if (route.auth !== 'public') {
    codes.add('AUTH_REQUIRED')
    codes.add('INVALID_CREDENTIALS')
    // A workspace the caller cannot act in, or a resource of another one.
    codes.add('NOT_FOUND')
  }
  if (route.scope) codes.add('INSUFFICIENT_SCOPE')
  if (route.auth === 'user') codes.add('USER_TOKEN_REQUIRED')
  codes.add('HTTPS_REQUIRED')
  if (route.auth === 'public' && route.params) codes.add('NOT_FOUND')
  if (route.body) {
    codes.add('PAYLOAD_TOO_LARGE')
    codes.add('UNSUPPORTED_MEDIA_TYPE')
  }
  for (const code of route.errors ?? []) codes.add(code)
  // API keys and unauthenticated routes are rate limited; user tokens are not.
  if (route.auth !== 'user') codes.add('RATE_LIMITED')
  codes.add('INTERNAL_ERROR')
  codes.add('SERVICE_UNAVAILABLE')
  codes.add('UPSTREAM_TIMEOUT')
  return [...codes]
}
