import { type Static, type TSchema, Type } from '@sinclair/typebox'
import { DisplayName, Nullable, ObjectId, PageQuery, Pagination, Timestamp } from './common.ts'
import { EnvironmentName, RenderedMessage } from './prompts.ts'

// ---- Runs: provider connections and calling a model (DESIGN section 13)

export const PROVIDERS = ['openai', 'anthropic', 'openai-compatible'] as const
export type Provider = (typeof PROVIDERS)[number]
export const ProviderName = Type.Union(
  PROVIDERS.map((p) => Type.Literal(p)),
  { $id: 'ProviderName' },
)

export const CONNECTION_NAME_MAX = 100
export const API_KEY_MAX = 4096
export const CONNECTION_MODELS_MAX = 50
export const CONNECTION_HEADERS_MAX = 20
/** A model name: what the providers use (letters, digits, `.-_:/@`), no spaces or control characters. */
export const ModelName = Type.String({
  minLength: 1,
  maxLength: 200,
  pattern: '^[A-Za-z0-9][A-Za-z0-9._:/@+-]*$',
})
const BaseUrl = Type.String({ minLength: 1, maxLength: 2048, pattern: '^https?://' })
/**
 * Extra request headers (Azure's `api-version`, OpenRouter's `HTTP-Referer`, ...): HTTP token names.
 * `additionalProperties: false`: a record's key pattern is a `patternProperties`, which alone lets
 * any other name through unchecked (an empty one, a NUL, a number for its value).
 */
const ExtraHeaders = Type.Record(
  Type.String({ pattern: "^[A-Za-z0-9!#$%&'*+.^_`|~-]{1,100}$" }),
  Type.String({ maxLength: 2048, pattern: '^[^\\u0000-\\u001f\\u007f]*$' }),
  { maxProperties: CONNECTION_HEADERS_MAX, additionalProperties: false },
)

/** A connection as answered: the key is never in it, only its last 4 characters (none for a key under 16). */
export const Connection = Type.Object(
  {
    _id: ObjectId,
    organizationId: ObjectId,
    name: Type.String(),
    provider: Type.Ref(ProviderName),
    /** null: the provider's own API. */
    baseUrl: Nullable(Type.String()),
    /** The API key's last 4 characters; empty for a key under 16 characters. */
    keyHint: Type.String(),
    /** The models offered for this connection (the first is the default when the prompt names none). */
    models: Type.Array(Type.String()),
    /** Names of the extra headers sent (their values are sealed like the key, never answered). */
    headerNames: Type.Array(Type.String()),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Connection' },
)
export type Connection = Static<typeof Connection>

export const CreateConnectionRequest = Type.Object(
  {
    name: DisplayName(CONNECTION_NAME_MAX),
    provider: Type.Ref(ProviderName),
    baseUrl: Type.Optional(BaseUrl),
    apiKey: Type.String({ minLength: 1, maxLength: API_KEY_MAX, pattern: '^[\\u0021-\\u007e]+$' }),
    models: Type.Optional(Type.Array(ModelName, { maxItems: CONNECTION_MODELS_MAX, uniqueItems: true })),
    headers: Type.Optional(ExtraHeaders),
  },
  { $id: 'CreateConnectionRequest', additionalProperties: false },
)
export type CreateConnectionRequest = Static<typeof CreateConnectionRequest>

export const UpdateConnectionRequest = Type.Object(
  {
    name: Type.Optional(DisplayName(CONNECTION_NAME_MAX)),
    /** null: back to the provider's own API. */
    baseUrl: Type.Optional(Nullable(BaseUrl)),
    apiKey: Type.Optional(
      Type.String({ minLength: 1, maxLength: API_KEY_MAX, pattern: '^[\\u0021-\\u007e]+$' }),
    ),
    models: Type.Optional(Type.Array(ModelName, { maxItems: CONNECTION_MODELS_MAX, uniqueItems: true })),
    headers: Type.Optional(ExtraHeaders),
  },
  { $id: 'UpdateConnectionRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateConnectionRequest = Static<typeof UpdateConnectionRequest>

export const ConnectionList = Type.Object(
  { connections: Type.Array(Type.Ref(Connection)) },
  { $id: 'ConnectionList' },
)
export type ConnectionList = Static<typeof ConnectionList>

export const ConnectionParams = Type.Object(
  { id: ObjectId, connectionId: ObjectId },
  { additionalProperties: false },
)

/** A function's name, as OpenAI's API takes it (and Anthropic's, after translation). */
const ToolName = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_-]+$' })

/** A tool the model may call (OpenAI's function shape; translated for Anthropic). */
const ToolDefinition = Type.Object(
  {
    type: Type.Optional(Type.Literal('function')),
    function: Type.Object(
      {
        name: ToolName,
        description: Type.Optional(Type.String({ maxLength: 4096 })),
        parameters: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
      },
      { additionalProperties: false },
    ),
  },
  { additionalProperties: false },
)

/**
 * Model parameters: from the prompt's `config`, overridden field by field by the request's
 * `params`. The names are OpenAI's; the Anthropic adapter translates them.
 */
export const RunParams = Type.Object(
  {
    temperature: Type.Optional(Type.Number({ minimum: 0, maximum: 2 })),
    max_tokens: Type.Optional(Type.Integer({ minimum: 1, maximum: 1_000_000 })),
    top_p: Type.Optional(Type.Number({ minimum: 0, maximum: 1 })),
    stop: Type.Optional(
      Type.Union([
        Type.String({ minLength: 1, maxLength: 200 }),
        Type.Array(Type.String({ minLength: 1, maxLength: 200 }), { maxItems: 4 }),
      ]),
    ),
    presence_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2 })),
    frequency_penalty: Type.Optional(Type.Number({ minimum: -2, maximum: 2 })),
    /** Safe integers: 2^53 + 1 arrived as 2^53 (another seed), 1e308 went to the provider as 1e+308. */
    seed: Type.Optional(Type.Integer({ minimum: Number.MIN_SAFE_INTEGER, maximum: Number.MAX_SAFE_INTEGER })),
    tools: Type.Optional(Type.Array(ToolDefinition, { maxItems: 128 })),
    tool_choice: Type.Optional(
      Type.Union([
        Type.Literal('auto'),
        Type.Literal('none'),
        Type.Literal('required'),
        Type.Object(
          {
            type: Type.Literal('function'),
            // The same names as the tools' (a name no tool can have was sent to the provider).
            function: Type.Object({ name: ToolName }, { additionalProperties: false }),
          },
          { additionalProperties: false },
        ),
      ]),
    ),
    response_format: Type.Optional(
      Type.Union([
        Type.Object({ type: Type.Literal('text') }, { additionalProperties: false }),
        Type.Object({ type: Type.Literal('json_object') }, { additionalProperties: false }),
        Type.Object(
          { type: Type.Literal('json_schema'), json_schema: Type.Record(Type.String(), Type.Unknown()) },
          { additionalProperties: false },
        ),
      ]),
    ),
  },
  { $id: 'RunParams', additionalProperties: false },
)
export type RunParams = Static<typeof RunParams>

export const RunRequest = Type.Object(
  {
    variables: Type.Optional(Type.Record(Type.String(), Type.Unknown())),
    version: Type.Optional(Type.Integer({ minimum: 1 })),
    env: Type.Optional(EnvironmentName),
    /** Run the draft, rendered as inject renders it (needs prompts:write). */
    draft: Type.Optional(Type.Literal(true)),
    connectionId: ObjectId,
    /** Default: the prompt's `config.model`, else the connection's first model. */
    model: Type.Optional(ModelName),
    params: Type.Optional(Type.Ref(RunParams)),
    /** Answer as Server-Sent Events (also with `Accept: text/event-stream`). */
    stream: Type.Optional(Type.Boolean()),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'RunRequest', additionalProperties: false },
)
export type RunRequest = Static<typeof RunRequest>

export const ToolCall = Type.Object(
  {
    id: Type.String(),
    name: Type.String(),
    /** The arguments as the model wrote them: JSON text. */
    arguments: Type.String(),
  },
  { $id: 'ToolCall' },
)
export type ToolCall = Static<typeof ToolCall>

export const RunOutput = Type.Object(
  {
    role: Type.Literal('assistant'),
    content: Type.String(),
    toolCalls: Type.Optional(Type.Array(Type.Ref(ToolCall))),
  },
  { $id: 'RunOutput' },
)
export type RunOutput = Static<typeof RunOutput>

export const RunUsage = Type.Object(
  { inputTokens: Type.Integer({ minimum: 0 }), outputTokens: Type.Integer({ minimum: 0 }) },
  { $id: 'RunUsage' },
)
export type RunUsage = Static<typeof RunUsage>

export const RunPromptRef = Type.Object(
  {
    promptId: ObjectId,
    /** null for the draft. */
    versionId: Nullable(ObjectId),
    version: Nullable(Type.Integer()),
    draft: Type.Boolean(),
  },
  { $id: 'RunPromptRef' },
)
export type RunPromptRef = Static<typeof RunPromptRef>

/** The answer of a run (and the `done` event of a streamed one). */
export const RunResult = Type.Object(
  {
    runId: ObjectId,
    output: Type.Ref(RunOutput),
    /** The provider's reason, normalised: stop, length, tool_calls, content_filter, or its own word. */
    finishReason: Type.String(),
    usage: Type.Ref(RunUsage),
    latencyMs: Type.Integer({ minimum: 0 }),
    /** Until the first token (streamed) or the whole answer (not streamed). */
    timeToFirstTokenMs: Type.Integer({ minimum: 0 }),
    model: Type.String(),
    connectionId: ObjectId,
    prompt: Type.Ref(RunPromptRef),
    /** The prompts the content referenced (template references), as render reports them. */
    references: Type.Array(Type.Unknown()),
    renderedMessages: Type.Array(Type.Ref(RenderedMessage)),
  },
  { $id: 'RunResult' },
)
export type RunResult = Static<typeof RunResult>

/** `cancelled`: the client left (closed the stream, the Playground's Stop) before the answer was complete. */
export const RUN_STATUSES = ['succeeded', 'failed', 'cancelled'] as const
export type RunStatus = (typeof RUN_STATUSES)[number]

/** One entry of the run log. */
export const RunRecord = Type.Object(
  {
    _id: ObjectId,
    organizationId: ObjectId,
    prompt: Type.Ref(RunPromptRef),
    connectionId: ObjectId,
    provider: Type.Ref(ProviderName),
    model: Type.String(),
    params: Type.Record(Type.String(), Type.Unknown()),
    variables: Type.Record(Type.String(), Type.Unknown()),
    renderedMessages: Type.Array(Type.Ref(RenderedMessage)),
    stream: Type.Boolean(),
    status: Type.Union(RUN_STATUSES.map((s) => Type.Literal(s))),
    output: Nullable(Type.Ref(RunOutput)),
    finishReason: Nullable(Type.String()),
    usage: Nullable(Type.Ref(RunUsage)),
    latencyMs: Type.Integer({ minimum: 0 }),
    timeToFirstTokenMs: Nullable(Type.Integer({ minimum: 0 })),
    /** Why a failed run failed (the code and message its caller got); a cancelled one: CLIENT_CLOSED. */
    error: Nullable(
      Type.Object({ code: Type.String(), message: Type.String(), details: Type.Optional(Type.Unknown()) }),
    ),
    actor: Type.Object({
      kind: Type.String(),
      userId: Nullable(Type.String()),
      apiKeyId: Nullable(Type.String()),
    }),
    createdAt: Timestamp,
  },
  { $id: 'RunRecord' },
)
export type RunRecord = Static<typeof RunRecord>

export const RunList = Type.Object(
  { runs: Type.Array(Type.Ref(RunRecord)), pagination: Type.Ref(Pagination) },
  { $id: 'RunList' },
)
export type RunList = Static<typeof RunList>

export const ListRunsQuery = Type.Object(
  { ...PageQuery, organizationId: Type.Optional(ObjectId) },
  { additionalProperties: false },
)

export const RunParamsPath = Type.Object({ runId: ObjectId }, { additionalProperties: false })

/** The `$id` schemas of runs, in dependency order (appended to ALL_SCHEMAS). */
export const RUN_SCHEMAS: TSchema[] = [
  ProviderName,
  Connection,
  CreateConnectionRequest,
  UpdateConnectionRequest,
  ConnectionList,
  RunParams,
  RunRequest,
  ToolCall,
  RunOutput,
  RunUsage,
  RunPromptRef,
  RunResult,
  RunRecord,
  RunList,
]
