import type { TObject, TSchema } from '@sinclair/typebox'
import type { ErrorCode } from '../errors.ts'
import type { Scope } from '../identity.ts'

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
  | 'files'
  | 'public'
  | 'runs'
  | 'meta'
  | 'datasets'
  | 'experiments'

export const ROUTE_TAGS: Record<RouteTag, string> = {
  auth: 'Sign-in, sign-up and session tokens.',
  organizations: 'Workspaces. A user token picks one with `organizationId`; an API key has exactly one.',
  members: 'Memberships of an organization (ADMIN or OWNER to change them).',
  'api-keys': 'API keys for backends and scripts. The key is shown once, at creation.',
  webhooks:
    'Signed deliveries of `version.published`, `environment.promoted`, `prompt.visibility.changed` ' +
    'and `prompt.deleted` to your endpoints, chosen per subscription.',
  prompts: 'Prompt templates and their drafts.',
  versions: 'Immutable published versions, diff, restore and fork.',
  environments: 'The `preview` and `production` pins.',
  render: 'Rendering: invoke (published content) and inject (draft preview).',
  import: 'Bulk creation from a CSV file.',
  files: 'Prompts as code: Dotprompt, Prompty and JSON files, workspace archives, import with a plan.',
  public: 'The public catalog: no credential needed to read it.',
  runs: 'Model provider connections, running a prompt on a model (streamed or not), and the run log.',
  meta: 'This document, its reference page and the health probes.',
  datasets: 'Test inputs of a workspace: variables and expected outputs (JSON, CSV or JSONL).',
  experiments: 'Prompt variants run over a dataset as a job, scored by evaluators.',
}

/** Response headers a route may set besides the ones every response carries. */
export type RouteHeader = 'X-Service-Version' | 'X-Prompt-Revision' | 'Content-Disposition'

/** The service a proxied route goes to. */
export type Upstream = 'identity' | 'prompts' | 'render' | 'webhooks' | 'runs' | 'experiments'

/**
 * Which workspace a request acts in. context: the key's own, or for a user token its `org`
 * claim or `organizationId` from query or body; path: the `:id` path parameter; none.
 */
export type WorkspaceSource = 'context' | 'path' | 'none'

interface RouteSpecBase {
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
  /** Request headers the route reads (documented as header parameters). */
  requestHeaders?: TObject
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
  /** text/plain: a prompt file; application/gzip: a workspace archive; text/csv: an export (all without `{data}`). */
  produces?: 'application/json' | 'text/html' | 'text/csv' | 'text/plain' | 'application/gzip'
  /** Other media types the same answer may come as (a prompt file in the service's JSON shape). */
  producesAlso?: readonly 'application/vnd.pm.prompt+json'[]
  headers?: readonly RouteHeader[]
  /** Failures particular to this route; the common ones follow from auth, scope and inputs. */
  errors?: readonly ErrorCode[]
  /** Other non-error answers (readiness answers 503 with its checks). */
  otherResponses?: Readonly<Record<number, { description: string; schema: TSchema }>>
}

/** How the gateway proxies a route: where, in which workspace, under which limits. */
interface ProxiedRoute {
  gateway?: false
  upstream: Upstream
  workspace: WorkspaceSource
  /** Body field naming a fork target whose ACTIVE membership the gateway checks. */
  target?: 'targetOrganizationId' | 'organizationId'
  /** Rate-limit class of an unauthenticated route (per IP; login also per email). */
  limit?: 'login' | 'public'
  /** Body limit in bytes (default 1 MiB). */
  bodyLimit?: number
}

/** Answered by the gateway itself rather than proxied to a service. */
interface GatewayRoute {
  gateway: true
  upstream?: never
  workspace?: never
  target?: never
  limit?: never
  bodyLimit?: never
}

/**
 * One public route, declared once: the gateway's policy table, the OpenAPI document, the
 * typed client and the service's registration (`route()` in @pm/kit) all derive from it.
 */
export type RouteSpec = RouteSpecBase & (ProxiedRoute | GatewayRoute)

/** The JSON body limit of a route without its own (DESIGN section 7). */
export const DEFAULT_BODY_LIMIT = 1024 * 1024

export const ORG_PREFIX = '/api/v1/organizations/:id'
export const PROMPT_PREFIX = '/api/v1/prompts/:id'
export const MiB = 1024 * 1024

/**
 * The access of a route that an API key holding `scope` may call, or a user token whose role
 * grants it (`auth: 'any'`): proxied to `upstream`, acting in the workspace `workspace` names.
 */
export const keyOrUser = <U extends Upstream, W extends WorkspaceSource, S extends Scope>(
  upstream: U,
  workspace: W,
  scope: S,
) => ({ auth: 'any', upstream, workspace, scope }) as const
