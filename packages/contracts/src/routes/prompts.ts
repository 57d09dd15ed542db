import {
  Deleted,
  ImportUpload,
  OrganizationQuery,
  PromptParams,
  SlugParams,
  VariableParams,
} from '../api/index.ts'
import {
  BatchParams,
  CreatePromptRequest,
  ImportAccepted,
  ImportBatch,
  ImportHeaders,
  ListPromptsQuery,
  Prompt,
  PromptList,
  PromptWithStale,
  UpdatePromptRequest,
  UpdateVariableRequest,
  VariableList,
} from '../prompts.ts'
import { DeletePromptQuery, PromptDependents, UpdatePromptQuery } from '../composition.ts'
import { MiB, PROMPT_PREFIX, keyOrUser, type RouteSpec } from './spec.ts'

/** Prompts and drafts, and CSV import (prompts). */
export const PROMPT_ROUTES = {
  // ---- prompts

  listPrompts: {
    method: 'GET',
    path: '/api/v1/prompts',
    tag: 'prompts',
    summary: 'List prompts',
    description: 'Paginated, with the workspace counts in `summary`.',
    ...keyOrUser('prompts', 'context', 'prompts:read'),
    query: ListPromptsQuery,
    status: 200,
    response: PromptList,
  },
  createPrompt: {
    method: 'POST',
    path: '/api/v1/prompts',
    tag: 'prompts',
    summary: 'Create a draft prompt',
    description:
      'Placeholders in the template (or, for `type: "chat"`, in the messages) that are not declared ' +
      'are added as required variables; a chat placeholder message names a required variable whose ' +
      'value at invoke is a list of `{role, content}`. `type` is fixed at creation. `slug` is ' +
      'derived from the name unless given (409 CONFLICT when taken). `config` is a JSON object of at ' +
      'most 16 KiB.',
    ...keyOrUser('prompts', 'context', 'prompts:write'),
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
    ...keyOrUser('prompts', 'context', 'prompts:read'),
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
      'uses. Making a prompt public needs a published version. A rename keeps the slug; `slug` ' +
      'changes it (409 CONFLICT when taken; 409 CONFLICT listing them in `details.dependents` when ' +
      'other prompts include this one by its slug, unless `force=true`). `type` cannot change; `template` is refused for a ' +
      'chat prompt (it is derived from `messages`) and `messages` for a text prompt. `config: null` ' +
      'removes the config. Emits `prompt.visibility.changed` when `isPublic` changes.',
    ...keyOrUser('prompts', 'context', 'prompts:write'),
    params: PromptParams,
    query: UpdatePromptQuery,
    body: UpdatePromptRequest,
    status: 200,
    response: PromptWithStale,
    errors: ['NO_PUBLISHED_VERSION', 'CONFLICT'],
  },
  getPromptBySlug: {
    method: 'GET',
    path: '/api/v1/prompts/slug/:slug',
    tag: 'prompts',
    summary: 'One prompt, found by its slug',
    description: 'The slug is unique in the workspace and survives renames.',
    ...keyOrUser('prompts', 'context', 'prompts:read'),
    params: SlugParams,
    query: OrganizationQuery,
    status: 200,
    response: Prompt,
  },
  deletePrompt: {
    method: 'DELETE',
    path: PROMPT_PREFIX,
    tag: 'prompts',
    summary: 'Delete a prompt, its versions and pins',
    description:
      'Emits `prompt.deleted`. A prompt that other prompts include (`{{> slug}}`) answers 409 ' +
      'CONFLICT listing them in `details`, unless `force=true`.',
    ...keyOrUser('prompts', 'context', 'prompts:write'),
    params: PromptParams,
    query: DeletePromptQuery,
    status: 200,
    response: Deleted,
    errors: ['CONFLICT'],
  },
  // ---- composition (DESIGN section 12)
  listPromptDependents: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/dependents`,
    tag: 'prompts',
    summary: 'Prompts that include this one',
    description:
      'The prompts of the workspace whose draft or current version includes this prompt with ' +
      '`{{> slug}}` (any selector), and where.',
    ...keyOrUser('prompts', 'context', 'prompts:read'),
    params: PromptParams,
    query: OrganizationQuery,
    status: 200,
    response: PromptDependents,
  },
  listVariables: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/variables`,
    tag: 'prompts',
    summary: "The draft's variables",
    ...keyOrUser('prompts', 'context', 'prompts:read'),
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
    ...keyOrUser('prompts', 'context', 'prompts:write'),
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
      'for progress. A bad row is reported, never half-written; good rows are created. An import ' +
      'interrupted by a restart or a crash is resumed from its first unwritten row.\n\n' +
      '**Re-sends create nothing new.** The same file (byte for byte) sent again to the same ' +
      'workspace, while its batch runs or up to 24 hours after it ended, answers 202 with that ' +
      "batch's id. An optional `Idempotency-Key` request header (1 to 255 visible ASCII " +
      'characters, quoted or not) is scoped to the workspace and the user: repeated with the same ' +
      'file it answers the original batch; with a different file it is a 409 CONFLICT.',
    auth: 'user',
    upstream: 'prompts',
    workspace: 'context',
    bodyLimit: 10 * MiB,
    query: OrganizationQuery,
    requestHeaders: ImportHeaders,
    body: ImportUpload,
    bodyType: 'multipart',
    status: 202,
    response: ImportAccepted,
    errors: ['CONFLICT'],
  },
  getImportBatch: {
    method: 'GET',
    path: '/api/v1/prompts/import/:batchId',
    tag: 'import',
    summary: 'Progress of an import',
    ...keyOrUser('prompts', 'context', 'prompts:read'),
    params: BatchParams,
    query: OrganizationQuery,
    status: 200,
    response: ImportBatch,
  },
} as const satisfies Record<string, RouteSpec>
