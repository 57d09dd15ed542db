import { type Static, Type } from '@sinclair/typebox'
import { ObjectId, PageQuery, Pagination, Timestamp } from '../common.ts'
import { EnvironmentName, Prompt, TEMPLATE_MAX, Variable } from '../prompts.ts'

/**
 * Prompt shapes of the public surface from the spec and DESIGN section 5 that `prompts.ts`
 * does not hold yet (diff, environments, fork, public catalog, CSV import, ...). Kept apart
 * so the prompts branch can add its own without a clash; the lead keeps one of each.
 */

/** What a DELETE answers: the id of what is gone. */
export const Deleted = Type.Object({ _id: Type.String(), deleted: Type.Literal(true) }, { $id: 'Deleted' })
export type Deleted = Static<typeof Deleted>

export const PromptParams = Type.Object({ id: ObjectId }, { additionalProperties: false })
export const VersionParams = Type.Object(
  { id: ObjectId, versionId: ObjectId },
  { additionalProperties: false },
)
export const VariableParams = Type.Object(
  { id: ObjectId, name: Type.String({ minLength: 1, maxLength: 200 }) },
  { additionalProperties: false },
)
export const EnvironmentParams = Type.Object(
  { id: ObjectId, env: EnvironmentName },
  { additionalProperties: false },
)
export const BatchParams = Type.Object({ batchId: ObjectId }, { additionalProperties: false })

/** `organizationId` picks the workspace for a user token (DESIGN section 4). */
export const OrganizationQuery = Type.Object(
  { organizationId: Type.Optional(ObjectId) },
  { additionalProperties: false },
)

export const ListVersionsQuery = Type.Object(
  {
    published: Type.Optional(
      Type.String({ description: 'exactly `true`: only published snapshots, newest publication first' }),
    ),
    organizationId: Type.Optional(ObjectId),
  },
  { additionalProperties: false },
)

const DiffSide = Type.String({ pattern: '^([0-9a-f]{24}|draft)$', description: 'a version id or `draft`' })
export const DiffQuery = Type.Object(
  { from: DiffSide, to: DiffSide, organizationId: Type.Optional(ObjectId) },
  { additionalProperties: false },
)

export const DiffHunk = Type.Object(
  {
    oldStart: Type.Integer(),
    oldLines: Type.Integer(),
    newStart: Type.Integer(),
    newLines: Type.Integer(),
    lines: Type.Array(Type.String(), {
      description: "unified-diff lines: ' ' context, '-' removed, '+' added",
    }),
  },
  { $id: 'DiffHunk' },
)

export const VersionDiff = Type.Object(
  {
    from: Type.String(),
    to: Type.String(),
    template: Type.Object({
      hunks: Type.Array(Type.Ref(DiffHunk)),
      added: Type.Integer(),
      removed: Type.Integer(),
    }),
    variables: Type.Object({
      added: Type.Array(Type.Ref(Variable)),
      removed: Type.Array(Type.Ref(Variable)),
      changed: Type.Array(
        Type.Object({ name: Type.String(), before: Type.Ref(Variable), after: Type.Ref(Variable) }),
      ),
    }),
  },
  { $id: 'VersionDiff' },
)
export type VersionDiff = Static<typeof VersionDiff>

export const VariableListResult = Type.Array(Type.Ref(Variable), { $id: 'VariableListResult' })

export const UpdateVariableRequest = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    required: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    defaultValue: Type.Optional(Type.String({ maxLength: TEMPLATE_MAX })),
  },
  { $id: 'UpdateVariableRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateVariableRequest = Static<typeof UpdateVariableRequest>

export const PromoteRequest = Type.Object(
  { versionId: ObjectId, organizationId: Type.Optional(ObjectId) },
  { $id: 'PromoteRequest', additionalProperties: false },
)
export type PromoteRequest = Static<typeof PromoteRequest>

const ForkName = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' })

export const ForkRequest = Type.Object(
  {
    name: ForkName,
    targetOrganizationId: Type.Optional(ObjectId),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'ForkRequest', additionalProperties: false },
)
export type ForkRequest = Static<typeof ForkRequest>

export const ForkResult = Type.Object({ prompt: Type.Ref(Prompt) }, { $id: 'ForkResult' })
export type ForkResult = Static<typeof ForkResult>

export const PublicForkRequest = Type.Object(
  { organizationId: ObjectId, name: ForkName },
  { $id: 'PublicForkRequest', additionalProperties: false },
)
export type PublicForkRequest = Static<typeof PublicForkRequest>

/** A prompt of the public catalog: its last published snapshot, never the draft. */
export const PublicPrompt = Type.Object(
  {
    _id: ObjectId,
    name: Type.String(),
    slug: Type.String(),
    description: Type.String(),
    tags: Type.Array(Type.String()),
    template: Type.String(),
    variables: Type.Array(Type.Ref(Variable)),
    versionId: ObjectId,
    version: Type.Integer(),
    publishedAt: Timestamp,
  },
  { $id: 'PublicPrompt' },
)
export type PublicPrompt = Static<typeof PublicPrompt>

export const PublicPromptList = Type.Object(
  { prompts: Type.Array(Type.Ref(PublicPrompt)), pagination: Type.Ref(Pagination) },
  { $id: 'PublicPromptList' },
)
export type PublicPromptList = Static<typeof PublicPromptList>

export const PublicListQuery = Type.Object(
  {
    ...PageQuery,
    search: Type.Optional(Type.String({ maxLength: 200 })),
    tags: Type.Optional(Type.String({ maxLength: 1000 })),
  },
  { additionalProperties: false },
)

export const PublicInvokeRequest = Type.Object(
  { variables: Type.Optional(Type.Record(Type.String(), Type.Unknown())) },
  { $id: 'PublicInvokeRequest', additionalProperties: false },
)
export type PublicInvokeRequest = Static<typeof PublicInvokeRequest>

/** The multipart body of a CSV import: one file field. */
export const ImportUpload = Type.Object(
  {
    file: Type.String({
      contentMediaType: 'text/csv',
      description: 'columns name, template (required), description, tags (separated by `;` or `,`)',
    }),
  },
  { additionalProperties: false },
)

export const ImportAccepted = Type.Object(
  { batchId: ObjectId, message: Type.String() },
  { $id: 'ImportAccepted' },
)
export type ImportAccepted = Static<typeof ImportAccepted>

export const IMPORT_STATUSES = ['PENDING', 'PROCESSING', 'COMPLETED', 'FAILED'] as const
export type ImportStatus = (typeof IMPORT_STATUSES)[number]

export const ImportBatch = Type.Object(
  {
    batchId: ObjectId,
    status: Type.Union(IMPORT_STATUSES.map((s) => Type.Literal(s))),
    total: Type.Integer(),
    created: Type.Integer(),
    failed: Type.Integer(),
    errors: Type.Array(Type.Object({ row: Type.Integer(), message: Type.String() })),
  },
  { $id: 'ImportBatch' },
)
export type ImportBatch = Static<typeof ImportBatch>
