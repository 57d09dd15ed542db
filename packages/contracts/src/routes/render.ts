import { NoQuery, OrganizationQuery, PromptParams, PublicInvokeRequest, SlugParams } from '../api/index.ts'
import { InjectRequest, InjectResult, InvokeQuery, InvokeRequest, InvokeResult } from '../prompts.ts'
import { PROMPT_PREFIX, keyOrUser, type RouteSpec } from './spec.ts'

/** What invoke by id and invoke by slug share: all but the path and how it names the prompt. */
const INVOKE = {
  ...keyOrUser('render', 'context', 'prompts:read'),
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
    'RENDER_TOO_LARGE',
    'INVALID_REFERENCE',
  ],
} as const

/** Invoke, inject and public invoke (render). */
export const RENDER_ROUTES = {
  // ---- render

  invokePrompt: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/invoke`,
    tag: 'render',
    summary: 'Render published content',
    description:
      'Renders the current version, or `version` (query or body), or the version pinned to ' +
      '`env`. Header `X-Service-Version` names the version rendered. A chat prompt also answers ' +
      '`renderedMessages`; a placeholder value that is not a list of `{role, content}` is a 400 ' +
      "VALIDATION_ERROR. `config` is the version's, when it has one. The body may be left out " +
      'or be `null`: no variables. An unknown query parameter or body field is a 400 ' +
      'VALIDATION_ERROR.',
    ...INVOKE,
    params: PromptParams,
  },
  invokePromptBySlug: {
    method: 'POST',
    path: '/api/v1/prompts/slug/:slug/invoke',
    tag: 'render',
    summary: 'Render published content of the prompt with this slug',
    description:
      'Same query, body, result and errors as invoke by id; the body may be left out or be ' +
      '`null`: no variables.',
    ...INVOKE,
    params: SlugParams,
  },
  injectPrompt: {
    method: 'POST',
    path: `${PROMPT_PREFIX}/inject`,
    tag: 'render',
    summary: 'Preview the draft',
    description:
      'Never fails on missing variables: they stay in the text and are listed. The body may be ' +
      'left out or be `null`: no variables. An unknown query parameter or body field is a 400 ' +
      'VALIDATION_ERROR.',
    ...keyOrUser('render', 'context', 'prompts:read'),
    params: PromptParams,
    query: OrganizationQuery,
    body: InjectRequest,
    bodyOptional: true,
    status: 200,
    response: InjectResult,
    errors: ['RENDER_TOO_LARGE', 'INVALID_REFERENCE'],
  },
  invokePublicPrompt: {
    method: 'POST',
    path: '/api/v1/public/prompts/:id/invoke',
    tag: 'public',
    summary: 'Render a public prompt',
    description:
      'Renders the current version of a public prompt. The body may be left out or be `null`: ' +
      'no variables. Takes no query parameter: any one given, or an unknown body field, is a 400 ' +
      'VALIDATION_ERROR.',
    auth: 'public',
    upstream: 'render',
    workspace: 'none',
    limit: 'public',
    params: PromptParams,
    query: NoQuery,
    body: PublicInvokeRequest,
    bodyOptional: true,
    status: 200,
    response: InvokeResult,
    headers: ['X-Service-Version'],
    errors: ['NO_PUBLISHED_VERSION', 'MISSING_REQUIRED_VARIABLES', 'RENDER_TOO_LARGE', 'INVALID_REFERENCE'],
  },
} as const satisfies Record<string, RouteSpec>
