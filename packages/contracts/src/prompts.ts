import { type Static, Type } from '@sinclair/typebox'
import { DisplayName, Text, ObjectId, PageQuery, Pagination, SearchText, Timestamp } from './common.ts'
import { PromptReference } from './composition.ts'

export const TEMPLATE_MAX = 100_000
export const CHANGELOG_MAX = 280
export const VARIABLE_NAME_PATTERN = '^[A-Za-z_][A-Za-z0-9_.-]*$'

// ---- Prompts for LLM applications (DESIGN section 9): type, chat messages, config, slug

export const PROMPT_TYPES = ['text', 'chat'] as const
export type PromptType = (typeof PROMPT_TYPES)[number]
export const PromptType = Type.Union(
  PROMPT_TYPES.map((t) => Type.Literal(t)),
  { $id: 'PromptType' },
)

export const MESSAGE_ROLES = ['system', 'user', 'assistant', 'developer', 'tool'] as const
export type MessageRole = (typeof MESSAGE_ROLES)[number]
export const MessageRole = Type.Union(
  MESSAGE_ROLES.map((r) => Type.Literal(r)),
  { $id: 'MessageRole' },
)
export const MESSAGES_MAX = 100
/** Serialized size of `config`, in bytes of UTF-8 JSON. */
export const CONFIG_MAX_BYTES = 16 * 1024
/** How deep a config's objects and arrays may nest (the files' import has the same bound). */
export const CONFIG_MAX_DEPTH = 64
export const SLUG_PATTERN = '^[a-z0-9]+(?:-[a-z0-9]+)*$'
export const SLUG_MAX_LENGTH = 100

/** One message of a chat prompt: a role and its content, a `{{name}}` template. */
export const TemplateMessage = Type.Object(
  { role: Type.Ref(MessageRole), content: Text(TEMPLATE_MAX) },
  { $id: 'TemplateMessage', additionalProperties: false },
)
export type TemplateMessage = Static<typeof TemplateMessage>

/** A list of messages supplied at invoke, under the variable `name`, spliced in at render. */
export const PlaceholderMessage = Type.Object(
  {
    type: Type.Literal('placeholder'),
    name: Type.String({ pattern: VARIABLE_NAME_PATTERN, maxLength: 200 }),
  },
  { $id: 'PlaceholderMessage', additionalProperties: false },
)
export type PlaceholderMessage = Static<typeof PlaceholderMessage>

export const ChatMessage = Type.Union([Type.Ref(TemplateMessage), Type.Ref(PlaceholderMessage)], {
  $id: 'ChatMessage',
})
export type ChatMessage = TemplateMessage | PlaceholderMessage

export const ChatMessages = Type.Array(Type.Ref(ChatMessage), { minItems: 1, maxItems: MESSAGES_MAX })

/** A rendered message (also the shape of each entry of a placeholder's value). */
export const RenderedMessage = Type.Object(
  { role: Type.String(), content: Type.String() },
  { $id: 'RenderedMessage' },
)
export type RenderedMessage = { role: MessageRole; content: string }

/** Model settings kept with the prompt and each version: model, temperature, tools, ... */
export const PromptConfig = Type.Record(Type.String(), Type.Unknown(), {
  $id: 'PromptConfig',
  description: `A JSON object, at most ${CONFIG_MAX_BYTES} bytes serialized, nested at most ${CONFIG_MAX_DEPTH} levels deep.`,
})
export type PromptConfig = Record<string, unknown>

export const Slug = Type.String({ pattern: SLUG_PATTERN, minLength: 1, maxLength: SLUG_MAX_LENGTH })

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
    description: Type.Optional(Text(1000)),
    defaultValue: Type.Optional(Text(TEMPLATE_MAX)),
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
    type: Type.Ref(PromptType),
    /** Derived from `messages` for a chat prompt (read-only there). */
    template: Type.String(),
    /** Chat prompts only. */
    messages: Type.Optional(Type.Array(Type.Ref(ChatMessage))),
    variables: Type.Array(Type.Ref(Variable)),
    /** Absent when none is set. */
    config: Type.Optional(Type.Ref(PromptConfig)),
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

const Name = DisplayName(200)
const Tags = Type.Array(DisplayName(50), { maxItems: 50, uniqueItems: true })

export const CreatePromptRequest = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    name: Name,
    /** Default: derived from the name. */
    slug: Type.Optional(Slug),
    description: Type.Optional(Text(2000)),
    tags: Type.Optional(Tags),
    /** Default text; fixed once the prompt exists. */
    type: Type.Optional(Type.Ref(PromptType)),
    /** Required for a text prompt; not accepted for a chat prompt (derived from `messages`). */
    template: Type.Optional(Text(TEMPLATE_MAX)),
    /** Required for a chat prompt (1 to 100); not accepted for a text prompt. */
    messages: Type.Optional(ChatMessages),
    variables: Type.Optional(Type.Array(Type.Ref(VariableInput), { maxItems: 1000 })),
    config: Type.Optional(Type.Ref(PromptConfig)),
  },
  { $id: 'CreatePromptRequest', additionalProperties: false },
)
export type CreatePromptRequest = Static<typeof CreatePromptRequest>

export const UpdatePromptRequest = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    name: Type.Optional(Name),
    /** A rename keeps the slug; this changes it. */
    slug: Type.Optional(Slug),
    description: Type.Optional(Text(2000)),
    tags: Type.Optional(Tags),
    /** Accepted only when it is the prompt's type already (the type is fixed). */
    type: Type.Optional(Type.Ref(PromptType)),
    template: Type.Optional(Text(TEMPLATE_MAX)),
    messages: Type.Optional(ChatMessages),
    variables: Type.Optional(Type.Array(Type.Ref(VariableInput), { maxItems: 1000 })),
    // Null first: with type coercion on, ajv would turn null into {} for an object branch tried first.
    /** null removes the config. */
    config: Type.Optional(Type.Union([Type.Null(), Type.Ref(PromptConfig)])),
    isPublic: Type.Optional(Type.Boolean()),
  },
  { $id: 'UpdatePromptRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdatePromptRequest = Static<typeof UpdatePromptRequest>

export const ListPromptsQuery = Type.Object(
  {
    ...PageQuery,
    search: Type.Optional(SearchText),
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
export type PromptList = Static<typeof PromptList>

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
    type: Type.Ref(PromptType),
    template: Type.String(),
    messages: Type.Optional(Type.Array(Type.Ref(ChatMessage))),
    variables: Type.Array(Type.Ref(Variable)),
    config: Type.Optional(Type.Ref(PromptConfig)),
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
    changeLog: Type.Optional(Text(CHANGELOG_MAX)),
  },
  { $id: 'PublishRequest', additionalProperties: false },
)
export type PublishRequest = Static<typeof PublishRequest>

export const ENVIRONMENTS = ['preview', 'production'] as const
export type EnvironmentName = (typeof ENVIRONMENTS)[number]
export const EnvironmentName = Type.Union(ENVIRONMENTS.map((e) => Type.Literal(e)))

export const SPLIT_MIN_VARIANTS = 2
export const SPLIT_MAX_VARIANTS = 5

/** One variant of a rollout: a published version and its share of the traffic (percent). */
export const SplitVariant = Type.Object(
  {
    versionId: ObjectId,
    version: Type.Integer(),
    weight: Type.Integer({ minimum: 1, maximum: 100 }),
    /** Invocations served by this variant since the split began (counted by render, flushed every few seconds; approximate). */
    invocations: Type.Optional(Type.Integer({ minimum: 0 })),
  },
  { $id: 'SplitVariant' },
)
export type SplitVariant = Static<typeof SplitVariant>

/** A rollout across 2 to 5 published versions (DESIGN section 15); its id seeds the sticky pick. */
export const Split = Type.Object(
  { id: ObjectId, variants: Type.Array(Type.Ref(SplitVariant), { minItems: 2, maxItems: 5 }) },
  { $id: 'Split' },
)
export type Split = Static<typeof Split>

/** With a split, versionId/version name its first variant (what a reader unaware of splits sees). */
export const Pin = Type.Object(
  {
    versionId: ObjectId,
    version: Type.Integer(),
    promotedAt: Timestamp,
    promotedBy: ObjectId,
    split: Type.Optional(Type.Ref(Split)),
  },
  { $id: 'Pin' },
)
export type Pin = Static<typeof Pin>

/** One promote of an environment, as its history keeps it. */
export const EnvironmentHistoryEntry = Type.Object(
  {
    versionId: ObjectId,
    version: Type.Integer(),
    split: Type.Optional(Type.Ref(Split)),
    promotedBy: ObjectId,
    /** user or apiKey */
    promotedByType: Type.Union([Type.Literal('user'), Type.Literal('apiKey')]),
    promotedAt: Timestamp,
  },
  { $id: 'EnvironmentHistoryEntry' },
)
export type EnvironmentHistoryEntry = Static<typeof EnvironmentHistoryEntry>

export const EnvironmentHistory = Type.Object(
  { entries: Type.Array(Type.Ref(EnvironmentHistoryEntry)), pagination: Type.Ref(Pagination) },
  { $id: 'EnvironmentHistory' },
)
export type EnvironmentHistory = Static<typeof EnvironmentHistory>

export const EnvironmentHistoryQuery = Type.Object(
  { ...PageQuery, organizationId: Type.Optional(ObjectId) },
  { $id: 'EnvironmentHistoryQuery', additionalProperties: false },
)
export type EnvironmentHistoryQuery = Static<typeof EnvironmentHistoryQuery>

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
    /** Who the request is for: with an environment under a split, the same subject gets the same version. Also `X-Subject-Id`. */
    subject: Type.Optional(Type.String({ minLength: 1, maxLength: 256 })),
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
    /** Chat prompts only: the messages, placeholders spliced in. */
    renderedMessages: Type.Optional(Type.Array(Type.Ref(RenderedMessage))),
    /** The version's config, when it has one. */
    config: Type.Optional(Type.Ref(PromptConfig)),
    /** Present when the template has references: every prompt included, in the order first used. */
    references: Type.Optional(Type.Array(Type.Ref(PromptReference))),
    /** With an environment under a split: the index of the variant that served. */
    variant: Type.Optional(Type.Integer({ minimum: 0 })),
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
    /** Chat prompts only (a placeholder without a value is left out and listed as unresolved). */
    renderedMessages: Type.Optional(Type.Array(Type.Ref(RenderedMessage))),
    /** The draft's config, when it has one. */
    config: Type.Optional(Type.Ref(PromptConfig)),
    /** Present when the draft has references: every prompt included, in the order first used. */
    references: Type.Optional(Type.Array(Type.Ref(PromptReference))),
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
    /** The prompt's slug (names it in a reference chain). */
    slug: Type.Optional(Type.String()),
    type: Type.Optional(Type.Union([Type.Literal('text'), Type.Literal('chat')])),
    template: Type.String(),
    variables: Type.Array(Type.Ref(Variable)),
    /** Chat prompts only (a text prompt's answer is as it was before chat prompts). */
    messages: Type.Optional(Type.Array(Type.Ref(ChatMessage))),
    config: Type.Optional(Type.Ref(PromptConfig)),
    /** An environment under a split: its variants (the content above is the first one's). */
    split: Type.Optional(Type.Ref(Split)),
  },
  { $id: 'ResolvedPrompt' },
)
export type ResolvedPrompt = Static<typeof ResolvedPrompt>

/** The draft, for inject. Internal route `GET /internal/prompts/:id/draft`. */
export const DraftPrompt = Type.Object(
  {
    promptId: ObjectId,
    organizationId: ObjectId,
    slug: Type.Optional(Type.String()),
    template: Type.String(),
    variables: Type.Array(Type.Ref(Variable)),
    messages: Type.Optional(Type.Array(Type.Ref(ChatMessage))),
    config: Type.Optional(Type.Ref(PromptConfig)),
  },
  { $id: 'DraftPrompt' },
)
export type DraftPrompt = Static<typeof DraftPrompt>

export { Pagination }

// ---- Variables, versions, environments, fork, diff, public catalog, CSV import ----

export const VariableList = Type.Array(Type.Ref(Variable), { $id: 'VariableList' })

export const UpdateVariableRequest = Type.Object(
  {
    organizationId: Type.Optional(ObjectId),
    required: Type.Optional(Type.Boolean()),
    // Null first: with type coercion on, ajv would turn null into "" for a string branch tried first.
    /** null removes the description. */
    description: Type.Optional(Type.Union([Type.Null(), Text(1000)])),
    /** null removes the default value. */
    defaultValue: Type.Optional(Type.Union([Type.Null(), Text(TEMPLATE_MAX)])),
  },
  { $id: 'UpdateVariableRequest', additionalProperties: false },
)
export type UpdateVariableRequest = Static<typeof UpdateVariableRequest>

/** Body of save-and-publish: nothing but the workspace (the server publishes its own draft). */
export const SaveAndPublishRequest = Type.Object(
  { organizationId: Type.Optional(ObjectId) },
  { $id: 'SaveAndPublishRequest', additionalProperties: false },
)

export const ListVersionsQuery = Type.Object(
  {
    /** Only the exact string "true" selects published snapshots, newest publication first. */
    published: Type.Optional(Type.String({ maxLength: 20 })),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'ListVersionsQuery', additionalProperties: false },
)

/** A version id or the word `draft`. */
export const DiffSide = Type.Union([ObjectId, Type.Literal('draft')])

export const DiffQuery = Type.Object(
  { from: DiffSide, to: DiffSide, organizationId: Type.Optional(ObjectId) },
  { $id: 'DiffQuery', additionalProperties: false },
)
export type DiffQuery = Static<typeof DiffQuery>

export const DiffHunk = Type.Object(
  {
    oldStart: Type.Integer(),
    oldLines: Type.Integer(),
    newStart: Type.Integer(),
    newLines: Type.Integer(),
    /** Unified-diff lines: ' ' context, '-' removed, '+' added, '\' no-newline marker. */
    lines: Type.Array(Type.String()),
  },
  { $id: 'DiffHunk' },
)

export const VersionDiff = Type.Object(
  {
    /** The sides as asked: a version id or "draft". */
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
    /** By index: a message past the end of one side is added or removed; one that differs is changed. */
    messages: Type.Object({
      added: Type.Array(Type.Object({ index: Type.Integer(), message: Type.Ref(ChatMessage) })),
      removed: Type.Array(Type.Object({ index: Type.Integer(), message: Type.Ref(ChatMessage) })),
      changed: Type.Array(
        Type.Object({
          index: Type.Integer(),
          before: Type.Ref(ChatMessage),
          after: Type.Ref(ChatMessage),
        }),
      ),
    }),
    config: Type.Object({
      changed: Type.Boolean(),
      before: Type.Union([Type.Ref(PromptConfig), Type.Null()]),
      after: Type.Union([Type.Ref(PromptConfig), Type.Null()]),
      /**
       * A line diff of the two as JSON (two spaces an indent, keys sorted at every depth; no
       * config is no text), in the template's hunk shape; empty when unchanged, and when a side
       * (stored before CONFIG_MAX_DEPTH) nests deeper than that.
       */
      hunks: Type.Array(Type.Ref(DiffHunk)),
    }),
  },
  { $id: 'VersionDiff' },
)
export type VersionDiff = Static<typeof VersionDiff>

export const EnvParams = Type.Object(
  { id: ObjectId, env: EnvironmentName },
  { $id: 'EnvParams', additionalProperties: false },
)

/** Exactly one of versionId, version (the number) or split. */
export const PromoteRequest = Type.Object(
  {
    versionId: Type.Optional(ObjectId),
    version: Type.Optional(Type.Integer({ minimum: 1 })),
    split: Type.Optional(
      Type.Array(
        Type.Object(
          { versionId: ObjectId, weight: Type.Integer({ minimum: 1, maximum: 99 }) },
          { additionalProperties: false },
        ),
        { minItems: SPLIT_MIN_VARIANTS, maxItems: SPLIT_MAX_VARIANTS },
      ),
    ),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'PromoteRequest', additionalProperties: false },
)
export type PromoteRequest = Static<typeof PromoteRequest>

export const ForkRequest = Type.Object(
  {
    name: Name,
    /** Default: the caller's current workspace. */
    targetOrganizationId: Type.Optional(ObjectId),
    /** The workspace of the source prompt (with a user token; default its current one). */
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'ForkRequest', additionalProperties: false },
)
export type ForkRequest = Static<typeof ForkRequest>

export const PublicForkRequest = Type.Object(
  { organizationId: ObjectId, name: Name },
  { $id: 'PublicForkRequest', additionalProperties: false },
)
export type PublicForkRequest = Static<typeof PublicForkRequest>

export const ForkResult = Type.Object(
  { prompt: Type.Ref(Prompt), version: Type.Ref(PromptVersion) },
  { $id: 'ForkResult' },
)

/**
 * A prompt as the public catalog shows it: its metadata with the content of its current
 * published version, never the draft.
 */
export const PublicPrompt = Type.Object(
  {
    _id: ObjectId,
    name: Type.String(),
    slug: Type.String(),
    description: Type.String(),
    tags: Type.Array(Type.String()),
    type: Type.Ref(PromptType),
    template: Type.String(),
    messages: Type.Optional(Type.Array(Type.Ref(ChatMessage))),
    variables: Type.Array(Type.Ref(Variable)),
    config: Type.Optional(Type.Ref(PromptConfig)),
    versionId: ObjectId,
    version: Type.Integer(),
    publishedAt: Timestamp,
    createdAt: Timestamp,
  },
  { $id: 'PublicPrompt' },
)
export type PublicPrompt = Static<typeof PublicPrompt>

export const PublicListQuery = Type.Object(
  { ...PageQuery, search: Type.Optional(SearchText) },
  { $id: 'PublicListQuery', additionalProperties: false },
)

export const PublicPromptList = Type.Object(
  { prompts: Type.Array(Type.Ref(PublicPrompt)), pagination: Type.Ref(Pagination) },
  { $id: 'PublicPromptList' },
)

export const ImportAccepted = Type.Object(
  { batchId: ObjectId, message: Type.String() },
  { $id: 'ImportAccepted' },
)

/** The import's optional request header (its rule is in the route's description). */
export const ImportHeaders = Type.Object({
  'Idempotency-Key': Type.Optional(
    Type.String({
      minLength: 1,
      maxLength: 257,
      description:
        '1 to 255 visible ASCII characters (no `"` or `\\`), bare or as a quoted string. Scoped to ' +
        'the workspace and the user; the same key with the same file answers the original batch.',
    }),
  ),
})

export const IMPORT_STATUSES = ['processing', 'completed', 'failed'] as const
export type ImportStatus = (typeof IMPORT_STATUSES)[number]

export const ImportRowError = Type.Object(
  { row: Type.Integer(), message: Type.String() },
  { $id: 'ImportRowError' },
)
export type ImportRowError = Static<typeof ImportRowError>

export const ImportBatch = Type.Object(
  {
    batchId: ObjectId,
    status: Type.Union(IMPORT_STATUSES.map((s) => Type.Literal(s))),
    /** Data rows in the file (blank rows not counted). */
    total: Type.Integer(),
    created: Type.Integer(),
    failed: Type.Integer(),
    /** Every row that was not imported, with its spreadsheet row number (header = 1). */
    errors: Type.Array(Type.Ref(ImportRowError)),
    createdAt: Timestamp,
    updatedAt: Timestamp,
    finishedAt: Type.Union([Timestamp, Type.Null()]),
    /**
     * When the import was last taken up again after the process writing it stopped or died
     * (it goes on from the first row not yet written); null when it ran in one go.
     */
    resumedAt: Type.Union([Timestamp, Type.Null()]),
  },
  { $id: 'ImportBatch' },
)
export type ImportBatch = Static<typeof ImportBatch>

export const BatchParams = Type.Object({ batchId: ObjectId }, { additionalProperties: false })
