import { type Static, Type } from '@sinclair/typebox'
import { ObjectId } from './common.ts'
import { EnvironmentName } from './prompts.ts'

/**
 * Prompts as code (DESIGN section 16): the export of one prompt or a workspace as files, and
 * the import of files with its plan.
 */

export const FILE_FORMATS = ['dotprompt', 'prompty', 'json'] as const
export type FileFormat = (typeof FILE_FORMATS)[number]
export const FileFormat = Type.Union(FILE_FORMATS.map((f) => Type.Literal(f)))

/** The file name extension of each format. */
export const FILE_EXTENSIONS: Record<FileFormat, string> = {
  dotprompt: '.prompt',
  prompty: '.prompty',
  json: '.json',
}

export const ExportQuery = Type.Object(
  {
    format: Type.Optional(FileFormat),
    /** A published version by number (default: the draft). */
    version: Type.Optional(Type.Integer({ minimum: 1 })),
    /** The version pinned to an environment (default: the draft). */
    env: Type.Optional(EnvironmentName),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'ExportQuery', additionalProperties: false },
)
export type ExportQuery = Static<typeof ExportQuery>

export const WorkspaceExportQuery = Type.Object(
  {
    format: Type.Optional(FileFormat),
    /** Each prompt's version pinned to this environment; prompts without a pin are left out. */
    env: Type.Optional(EnvironmentName),
  },
  { $id: 'WorkspaceExportQuery', additionalProperties: false },
)
export type WorkspaceExportQuery = Static<typeof WorkspaceExportQuery>

/** Only the exact string "true" turns a flag on. */
const Flag = Type.Optional(Type.Union([Type.Literal('true'), Type.Literal('false')]))

export const ImportFilesQuery = Type.Object(
  { dryRun: Flag, publish: Flag, organizationId: Type.Optional(ObjectId) },
  { $id: 'ImportFilesQuery', additionalProperties: false },
)
export type ImportFilesQuery = Static<typeof ImportFilesQuery>

export const ImportFilesUpload = Type.Object(
  {
    file: Type.Array(Type.String({ contentMediaType: 'application/octet-stream' }), {
      description:
        'One or more files (repeat the field): `.prompt` (Dotprompt), `.prompty` (Prompty), `.json` ' +
        "(this service's own shape, or a JSON array in Langfuse's prompt API shape), or a `.tar.gz` " +
        'from the workspace export.',
    }),
    expect: Type.Optional(
      Type.String({
        contentMediaType: 'application/json',
        description:
          'Optimistic concurrency: a JSON object `{slug: revision}` of the drafts as last read (the ' +
          "export's `X-Prompt-Revision` header, or a plan item's `revision`); a file whose prompt " +
          'changed since is an error in the plan.',
      }),
    ),
  },
  { additionalProperties: false },
)

export const IMPORT_ACTIONS = ['create', 'update', 'unchanged', 'error'] as const
export type ImportAction = (typeof IMPORT_ACTIONS)[number]

export const ImportPlanItem = Type.Object(
  {
    /** The file name (within a tar.gz: `archive.tar.gz/name`; a Langfuse array: `file.json[index]`). */
    file: Type.String(),
    slug: Type.Union([Type.String(), Type.Null()]),
    action: Type.Union(IMPORT_ACTIONS.map((a) => Type.Literal(a))),
    /** The prompt (existing, or created by this import). */
    promptId: Type.Optional(ObjectId),
    /** The fields that differ from the draft (update). */
    changes: Type.Optional(Type.Array(Type.String())),
    /** The version this import published (publish=true, or a Langfuse label). */
    publishedVersion: Type.Optional(Type.Integer()),
    /** Environments pinned to that version (Langfuse labels). */
    pinned: Type.Optional(Type.Array(EnvironmentName)),
    /** The draft's revision after the import (for a later `expect`). */
    revision: Type.Optional(Type.String()),
    /** Why the file cannot be imported (error). */
    message: Type.Optional(Type.String()),
  },
  { $id: 'ImportPlanItem' },
)
export type ImportPlanItem = Static<typeof ImportPlanItem>

export const ImportPlan = Type.Object(
  {
    dryRun: Type.Boolean(),
    publish: Type.Boolean(),
    summary: Type.Object({
      create: Type.Integer(),
      update: Type.Integer(),
      unchanged: Type.Integer(),
      error: Type.Integer(),
    }),
    items: Type.Array(Type.Ref(ImportPlanItem)),
  },
  { $id: 'ImportPlan' },
)
export type ImportPlan = Static<typeof ImportPlan>

/** The manifest.json of a workspace export. */
export interface ExportManifest {
  format: FileFormat
  exportedAt: string
  organizationId: string
  env: string | null
  prompts: { slug: string; file: string; promptId: string; version: number | null; revision: string }[]
}
