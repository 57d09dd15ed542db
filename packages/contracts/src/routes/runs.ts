import { Deleted, OrganizationParams, OrganizationQuery, PromptParams, SlugParams } from '../api/index.ts'
import {
  Connection,
  ConnectionList,
  ConnectionParams,
  CreateConnectionRequest,
  ListRunsQuery,
  RunList,
  RunParamsPath,
  RunRecord,
  RunRequest,
  RunResult,
  UpdateConnectionRequest,
} from '../runs.ts'
import { ORG_PREFIX, PROMPT_PREFIX, keyOrUser, type RouteSpec } from './spec.ts'

/** What the four connection routes share: an organization's admins, or a key with organization:write. */
const CONNECTIONS = {
  tag: 'runs',
  ...keyOrUser('runs', 'path', 'organization:write'),
  errors: ['FORBIDDEN'],
} as const

/** What run by id and run by slug share: all but the path and how it names the prompt. */
const RUN = {
  tag: 'runs',
  ...keyOrUser('runs', 'context', 'runs:write'),
  body: RunRequest,
  status: 200,
  response: RunResult,
  errors: [
    'NO_PUBLISHED_VERSION',
    'MISSING_REQUIRED_VARIABLES',
    'VERSION_NOT_FOUND',
    'ENVIRONMENT_NOT_SET',
    'RENDER_TOO_LARGE',
    'PROVIDER_ERROR',
    'PROVIDER_TIMEOUT',
    'RUNS_BUSY',
  ],
} as const

const RUN_DESCRIPTION =
  'Renders the prompt exactly as invoke does (the current version, `version`, or the version ' +
  'pinned to `env`), or as inject does with `draft: true` (which also needs `prompts:write`), and ' +
  'sends it to the model of the connection `connectionId`. `model` and `params` default to the ' +
  "prompt's `config` and override it field by field; a text prompt is sent as one user message. " +
  'With `stream: true` (or `Accept: text/event-stream`) the answer is Server-Sent Events: `delta` ' +
  '(`{content}`) as the model writes, then `done` (this object) or `error` (`{code, message, ' +
  'details}`); a client that disconnects cancels the provider call. A provider failure is a 502 ' +
  'PROVIDER_ERROR (`details.providerStatus`, `details.message`, and `details.retryAfter` for a ' +
  "provider's 429), a call past RUN_TIMEOUT_MS a 504 PROVIDER_TIMEOUT, more than " +
  'RUN_MAX_CONCURRENT calls of one organization at once a 429 RUNS_BUSY. Every run is logged.'

/** Provider connections, running a prompt on a model, and the run log (runs). */
export const RUN_ROUTES = {
  // ---- runs

  listConnections: {
    method: 'GET',
    path: `${ORG_PREFIX}/connections`,
    summary: 'Model provider connections',
    ...CONNECTIONS,
    params: OrganizationParams,
    status: 200,
    response: ConnectionList,
  },
  createConnection: {
    method: 'POST',
    path: `${ORG_PREFIX}/connections`,
    summary: 'Add a model provider connection',
    description:
      'The API key is encrypted at rest and never answered: `keyHint` shows its last 4 characters (empty for a key under 16 characters). ' +
      '`baseUrl` must be https and resolve to public addresses, unless its host is in ' +
      'PROVIDER_ALLOWED_HOSTS (which may also use http); otherwise a 400 VALIDATION_ERROR.',
    ...CONNECTIONS,
    params: OrganizationParams,
    body: CreateConnectionRequest,
    status: 201,
    response: Connection,
  },
  updateConnection: {
    method: 'PATCH',
    path: `${ORG_PREFIX}/connections/:connectionId`,
    summary: 'Change a connection (name, base URL, key, models, headers)',
    ...CONNECTIONS,
    params: ConnectionParams,
    body: UpdateConnectionRequest,
    status: 200,
    response: Connection,
  },
  deleteConnection: {
    method: 'DELETE',
    path: `${ORG_PREFIX}/connections/:connectionId`,
    summary: 'Delete a connection (its runs stay in the log)',
    ...CONNECTIONS,
    params: ConnectionParams,
    status: 200,
    response: Deleted,
  },
  runPrompt: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/run`,
    summary: 'Run the prompt on a model',
    description: RUN_DESCRIPTION,
    ...RUN,
    params: PromptParams,
  },
  runPromptBySlug: {
    method: 'POST',
    path: '/api/v1/prompts/slug/:slug/run',
    summary: 'Run the prompt with this slug on a model',
    description: 'Same body, answer and errors as run by id.',
    ...RUN,
    params: SlugParams,
  },
  listPromptRuns: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/runs`,
    summary: "The prompt's run log, newest first",
    description: 'Kept RUN_RETENTION_DAYS days (default 30).',
    tag: 'runs',
    ...keyOrUser('runs', 'context', 'prompts:read'),
    params: PromptParams,
    query: ListRunsQuery,
    status: 200,
    response: RunList,
  },
  getRun: {
    method: 'GET',
    path: '/api/v1/runs/:runId',
    summary: 'One run of the log',
    tag: 'runs',
    ...keyOrUser('runs', 'context', 'prompts:read'),
    params: RunParamsPath,
    query: OrganizationQuery,
    status: 200,
    response: RunRecord,
  },
} as const satisfies Record<string, RouteSpec>
