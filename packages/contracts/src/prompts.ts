import { type Static, Type } from '@sinclair/typebox'
import { ObjectId, PageQuery, Pagination, Timestamp } from './common.ts'

export const TEMPLATE_MAX = 100_000
export const CHANGELOG_MAX = 280
export const VARIABLE_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_.-]*$'

export const Variable = Type.Object(
  {
    name: Type.String({ pattern: VARIABLE_NAME_PATTERN, maxLength: 200 }),
    required: Type.Boolean(),
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    defaultValue: Type.Optional(Type.String({ maxLength: TEMPLATE_MAX })),
  },
  { $id: 'Variable', additionalProperties: false },
)
export type Variable = Static<typeof Variable>

export const VariableInput = Type.Object(
  {
    name: Type.String({ pattern: VARIABLE_NAME_PATTERN, maxLength: 200 }),
    required: Type.Optional(Type.Boolean()),
    description: Type.Optional(Type.String({ maxLength: 1000 })),
    defaultValue: Type.Optional(Type.String({ maxLength: TEMPLATE_MAX })),
  },
  { $id: 'VariableInput', additionalProperties: false },
)
export type VariableInput = Static<typeof VariableInput>

export const Prompt = Type.Object(
  {
    _id: ObjectId,
    organizationId: ObjectId,
    name: Type.String(),
    slug: Type.String(),
    description: Type.String(),
    tags: Type.Array(Type.String()),
    template: Type.String(),
    variables: Type.Array(Type.Ref(Variable)),
    isPublic: Type.Boolean(),
    versionCount: Type.Integer(),
    currentVersionId: Type.Union([ObjectId, Type.Null()]),
    forkedFromVersionId: Type.Optional(ObjectId),
    createdBy: ObjectId,
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Prompt' },
)
export type Prompt = Static<typeof Prompt>

export const PromptWithStale = Type.Composite(
  [Prompt, Type.Object({ staleVariables: Type.Optional(Type.Array(Type.String())) })],
  { $id: 'PromptWithStale' },
)

const Name = Type.String({ minLength: 1, maxLength: 200, pattern: '\\S' })
const Tags = Type.Array(Type.String({ minLength: 1, maxLength: 50 }), { maxItems: 50, uniqueItems: true })

export const CreatePromptRequest = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    name: Name,
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    tags: Type.Optional(Tags),
    template: Type.String({ maxLength: TEMPLATE_MAX }),
    variables: Type.Optional(Type.Array(Type.Ref(VariableInput), { maxItems: 1000 })),
  },
  { $id: 'CreatePromptRequest', additionalProperties: false },
)
export type CreatePromptRequest = Static<typeof CreatePromptRequest>

export const UpdatePromptRequest = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    name: Type.Optional(Name),
    description: Type.Optional(Type.String({ maxLength: 2000 })),
    tags: Type.Optional(Tags),
    template: Type.Optional(Type.String({ maxLength: TEMPLATE_MAX })),
    variables: Type.Optional(Type.Array(Type.Ref(VariableInput), { maxItems: 1000 })),
    isPublic: Type.Optional(Type.Boolean()),
  },
  { $id: 'UpdatePromptRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdatePromptRequest = Static<typeof UpdatePromptRequest>

export const ListPromptsQuery = Type.Object(
  {
    ...PageQuery,
    search: Type.Optional(Type.String({ maxLength: 200 })),
    tags: Type.Optional(Type.String({ maxLength: 1000 })),
    visibility: Type.Optional(
      Type.Union([Type.Literal('all'), Type.Literal('public'), Type.Literal('private')]),
    ),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'ListPromptsQuery', additionalProperties: false },
)
export type ListPromptsQuery = Static<typeof ListPromptsQuery>

export const PromptSummary = Type.Object(
  {
    total: Type.Integer(),
    public: Type.Integer(),
    private: Type.Integer(),
    published: Type.Integer(),
    unpublished: Type.Integer(),
  },
  { $id: 'PromptSummary' },
)
export type PromptSummary = Static<typeof PromptSummary>

export const PromptList = Type.Object(
  {
    prompts: Type.Array(Type.Ref(Prompt)),
    pagination: Type.Ref(Pagination),
    summary: Type.Ref(PromptSummary),
  },
  { $id: 'PromptList' },
)

export const VERSION_STATUSES = ['PUBLISHED'] as const
export type VersionStatus = (typeof VERSION_STATUSES)[number]

export const Author = Type.Object(
  { _id: ObjectId, email: Type.Optional(Type.String()), name: Type.Optional(Type.String()) },
  { $id: 'Author' },
)
export type Author = Static<typeof Author>

export const PromptVersion = Type.Object(
  {
    _id: ObjectId,
    promptId: ObjectId,
    organizationId: ObjectId,
    version: Type.Integer({ minimum: 1 }),
    status: Type.Union(VERSION_STATUSES.map((s) => Type.Literal(s))),
    publishedAt: Timestamp,
    template: Type.String(),
    variables: Type.Array(Type.Ref(Variable)),
    createdBy: Type.Ref(Author),
    changeLog: Type.String(),
  },
  { $id: 'PromptVersion' },
)
export type PromptVersion = Static<typeof PromptVersion>

export const VersionList = Type.Object(
  { versions: Type.Array(Type.Ref(PromptVersion)) },
  { $id: 'VersionList' },
)

export const PublishRequest = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    changeLog: Type.Optional(Type.String({ maxLength: CHANGELOG_MAX })),
  },
  { $id: 'PublishRequest', additionalProperties: false },
)
export type PublishRequest = Static<typeof PublishRequest>

export const ENVIRONMENTS = ['preview', 'production'] as const
export type EnvironmentName = (typeof ENVIRONMENTS)[number]
export const EnvironmentName = Type.Union(ENVIRONMENTS.map((e) => Type.Literal(e)))

export const Pin = Type.Object(
  { versionId: ObjectId, version: Type.Integer(), promotedAt: Timestamp, promotedBy: ObjectId },
  { $id: 'Pin' },
)
export type Pin = Static<typeof Pin>

export const Environments = Type.Object(
  { preview: Type.Union([Type.Ref(Pin), Type.Null()]), production: Type.Union([Type.Ref(Pin), Type.Null()]) },
  { $id: 'Environments' },
)
export type Environments = Static<typeof Environments>

export const VariableValues = Type.Record(Type.String(), Type.Unknown(), { $id: 'VariableValues' })
export type VariableValues = Static<typeof VariableValues>

export const InvokeRequest = Type.Object(
  {
    variables: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    version: Type.Optional(Type.Integer({ minimum: 1 })),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'InvokeRequest', additionalProperties: false },
)
export type InvokeRequest = Static<typeof InvokeRequest>

export const InvokeQuery = Type.Object(
  {
    version: Type.Optional(Type.Integer({ minimum: 1 })),
    env: Type.Optional(EnvironmentName),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'InvokeQuery', additionalProperties: false },
)
export type InvokeQuery = Static<typeof InvokeQuery>

export const InvokeResult = Type.Object(
  {
    renderedContent: Type.String(),
    variables: Type.Record(Type.String(), Type.Unknown()),
    promptId: ObjectId,
    versionId: ObjectId,
    version: Type.Integer(),
  },
  { $id: 'InvokeResult' },
)
export type InvokeResult = Static<typeof InvokeResult>

export const InjectRequest = Type.Object(
  {
    variables: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'InjectRequest', additionalProperties: false },
)
export type InjectRequest = Static<typeof InjectRequest>

export const InjectResult = Type.Object(
  {
    renderedContent: Type.String(),
    unresolvedVariables: Type.Array(Type.String()),
    variables: Type.Record(Type.String(), Type.Unknown()),
  },
  { $id: 'InjectResult' },
)
export type InjectResult = Static<typeof InjectResult>

/**
 * What render asks the prompts service for: the snapshot to render. Internal route
 * `GET /internal/prompts/:id/resolve?version=&env=&public=`.
 */
export const ResolvedPrompt = Type.Object(
  {
    promptId: ObjectId,
    organizationId: ObjectId,
    versionId: ObjectId,
    version: Type.Integer(),
    template: Type.String(),
    variables: Type.Array(Type.Ref(Variable)),
  },
  { $id: 'ResolvedPrompt' },
)
export type ResolvedPrompt = Static<typeof ResolvedPrompt>

/** The draft, for inject. Internal route `GET /internal/prompts/:id/draft`. */
export const DraftPrompt = Type.Object(
  {
    promptId: ObjectId,
    organizationId: ObjectId,
    template: Type.String(),
    variables: Type.Array(Type.Ref(Variable)),
  },
  { $id: 'DraftPrompt' },
)
export type DraftPrompt = Static<typeof DraftPrompt>

export { Pagination }
