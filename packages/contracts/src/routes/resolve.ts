import { PromptParams, SlugParams } from '../api/index.ts'
import { InvokeQuery, ResolvedPrompt } from '../prompts.ts'
import { PROMPT_PREFIX, keyOrUser, type RouteSpec } from './spec.ts'

/** What fetching a version to render it locally shares: all but the path and how it names the prompt. */
const RESOLVE = {
  ...keyOrUser('prompts', 'context', 'prompts:read'),
  query: InvokeQuery,
  status: 200,
  response: ResolvedPrompt,
  errors: ['NO_PUBLISHED_VERSION', 'VERSION_NOT_FOUND', 'ENVIRONMENT_NOT_SET'],
} as const

/**
 * The published content that invoke would render (the current version, `version`, or the
 * `env` pin) with its variables, messages and config: clients fetch it once per TTL and render
 * locally with the same engine (`@pm/client`'s `getRenderable`, the Python client's `get_renderable`).
 */
export const RESOLVE_ROUTES = {
  resolvePrompt: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/resolve`,
    tag: 'render',
    summary: 'The published content invoke would render, for rendering locally',
    description:
      'The current version, or `version`, or the version pinned to `env` (not both): its ' +
      'template, variables, messages (chat prompts) and config, as invoke would render them. ' +
      'Clients cache it and render locally with the same rules as invoke.',
    ...RESOLVE,
    params: PromptParams,
  },
  resolvePromptBySlug: {
    method: 'GET',
    path: '/api/v1/prompts/slug/:slug/resolve',
    tag: 'render',
    summary: 'The published content of the prompt with this slug, for rendering locally',
    description: 'Same query, result and errors as resolve by id.',
    ...RESOLVE,
    params: SlugParams,
  },
} as const satisfies Record<string, RouteSpec>
