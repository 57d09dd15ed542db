import { PromptParams } from '../api/index.ts'
import { Prompt, PublicForkRequest, PublicListQuery, PublicPrompt, PublicPromptList } from '../prompts.ts'
import type { RouteSpec } from './spec.ts'

/** The public catalog: read and fork without a workspace of one's own (prompts). */
export const PUBLIC_ROUTES = {
  // ---- public catalog

  listPublicPrompts: {
    method: 'GET',
    path: '/api/v1/public/prompts',
    tag: 'public',
    summary: 'The public catalog',
    description: 'Published content only. Rate limited per IP.',
    auth: 'public',
    upstream: 'prompts',
    workspace: 'none',
    limit: 'public',
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
    upstream: 'prompts',
    workspace: 'none',
    limit: 'public',
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
    upstream: 'prompts',
    workspace: 'none',
    target: 'organizationId',
    params: PromptParams,
    body: PublicForkRequest,
    status: 201,
    response: Prompt,
    errors: ['MEMBERSHIP_REQUIRED', 'CONFLICT'],
  },
} as const satisfies Record<string, RouteSpec>
