import { OrganizationParams, PromptParams } from '../api/index.ts'
import {
  ExportQuery,
  ImportFilesQuery,
  ImportFilesUpload,
  ImportPlan,
  WorkspaceExportQuery,
} from '../files.ts'
import { MiB, ORG_PREFIX, PROMPT_PREFIX, keyOrUser, type RouteSpec } from './spec.ts'

/** Prompts as code: export as files, import files with a plan (prompts; DESIGN section 16). */
export const FILE_ROUTES = {
  exportPrompt: {
    method: 'GET',
    path: `${PROMPT_PREFIX}/export`,
    tag: 'files',
    summary: 'One prompt as a file',
    description:
      '`format`: `dotprompt` (default; a `.prompt` file: YAML front matter with `model`, `config`, ' +
      '`input.schema` in Picoschema, `metadata.prompt`, then the template), `prompty` (a `.prompty` ' +
      "file) or `json` (this service's own shape, lossless). The draft by default; `version=N` or " +
      '`env=` a published version. Sent as the file itself (no `{data}`), with a ' +
      "`Content-Disposition` naming `<slug>.<ext>` and the draft's revision in `X-Prompt-Revision` " +
      "(for the import's `expect`); `json` is served as `application/vnd.pm.prompt+json`.",
    ...keyOrUser('prompts', 'context', 'prompts:read'),
    params: PromptParams,
    query: ExportQuery,
    status: 200,
    produces: 'text/plain',
    producesAlso: ['application/vnd.pm.prompt+json'],
    headers: ['X-Prompt-Revision', 'Content-Disposition'],
    envelope: false,
    errors: ['VERSION_NOT_FOUND', 'ENVIRONMENT_NOT_SET'],
  },
  exportWorkspace: {
    method: 'GET',
    path: `${ORG_PREFIX}/export`,
    tag: 'files',
    summary: "A workspace's prompts as a tar.gz",
    description:
      'Streams a gzipped tar of one file per prompt (`<slug>.prompt`, `.prompty` or `.json` by ' +
      "`format`) and `manifest.json`. The drafts by default; with `env`, each prompt's pinned " +
      'version (prompts without a pin are left out).',
    ...keyOrUser('prompts', 'path', 'prompts:read'),
    params: OrganizationParams,
    query: WorkspaceExportQuery,
    status: 200,
    produces: 'application/gzip',
    envelope: false,
  },
  importFiles: {
    method: 'POST',
    path: '/api/v1/prompts/import-files',
    tag: 'files',
    summary: 'Import prompt files (Dotprompt, Prompty, JSON, tar.gz, Langfuse)',
    description:
      'Multipart, field `file` (repeatable; at most 10 MiB in all, 1 MiB per prompt file, 500 ' +
      'files). Prompts are matched by slug: a new slug is created, a known one has its draft ' +
      'updated, an equal one is unchanged. `dryRun=true` answers the plan and writes nothing; ' +
      '`publish=true` publishes each created or updated draft with a change log. Each file is ' +
      'all or nothing; a bad file is an `error` item of the plan (never the whole request). ' +
      'Langfuse labels: `production` pins the published version to production, `staging` to ' +
      'preview. Needs a user token (it can publish).',
    auth: 'user',
    upstream: 'prompts',
    workspace: 'context',
    bodyLimit: 10 * MiB,
    query: ImportFilesQuery,
    body: ImportFilesUpload,
    bodyType: 'multipart',
    status: 200,
    response: ImportPlan,
  },
} as const satisfies Record<string, RouteSpec>
