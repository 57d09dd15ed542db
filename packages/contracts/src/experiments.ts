import { type Static, Type } from '@sinclair/typebox'
import { DisplayName, Text, Nullable, ObjectId, PageQuery, Pagination, Timestamp } from './common.ts'
import { EnvironmentName, Slug } from './prompts.ts'

/** Datasets and experiments (DESIGN section 14). */

/** Items one dataset may hold, and one JSON request may add. */
export const DATASET_ITEMS_MAX = 10_000
export const DATASET_ITEMS_PER_REQUEST = 1_000
/** An upload (CSV or JSONL) may add at most this many bytes. */
export const DATASET_UPLOAD_MAX_BYTES = 10 * 1024 * 1024
export const EXPERIMENT_VARIANTS_MAX = 5
export const EXPERIMENT_EVALUATORS_MAX = 10
export const EXPERIMENT_CONCURRENCY_MAX = 16

const Name = DisplayName(200)
const Description = Text(2000)
/** A JSON object of at most a few KiB is enforced by the service (the body limit covers the rest). */
const JsonObject = Type.Record(Type.String(), Type.Unknown())

export const DatasetParams = Type.Object({ id: ObjectId }, { additionalProperties: false })
export const DatasetItemParams = Type.Object(
  { id: ObjectId, itemId: ObjectId },
  { additionalProperties: false },
)
export const ExperimentParams = Type.Object({ id: ObjectId }, { additionalProperties: false })

export const Dataset = Type.Object(
  {
    _id: ObjectId,
    organizationId: ObjectId,
    name: Type.String(),
    description: Type.String(),
    itemCount: Type.Integer(),
    createdAt: Timestamp,
    updatedAt: Timestamp,
  },
  { $id: 'Dataset' },
)
export type Dataset = Static<typeof Dataset>

export const DatasetItemInput = Type.Object(
  {
    variables: Type.Record(Type.String({ minLength: 1, maxLength: 200 }), Type.Unknown()),
    /** The expected output (what `exact` and `contains` compare with by default). */
    expected: Type.Optional(Nullable(Type.String({ maxLength: 100_000 }))),
    metadata: Type.Optional(Nullable(JsonObject)),
  },
  { $id: 'DatasetItemInput', additionalProperties: false },
)
export type DatasetItemInput = Static<typeof DatasetItemInput>

export const DatasetItem = Type.Object(
  {
    _id: ObjectId,
    datasetId: ObjectId,
    /** 1-based place in the dataset, in the order the items were added. */
    position: Type.Integer(),
    variables: Type.Record(Type.String(), Type.Unknown()),
    expected: Nullable(Type.String()),
    metadata: Nullable(JsonObject),
    createdAt: Timestamp,
  },
  { $id: 'DatasetItem' },
)
export type DatasetItem = Static<typeof DatasetItem>

export const CreateDatasetRequest = Type.Object(
  {
    name: Name,
    description: Type.Optional(Description),
    items: Type.Optional(Type.Array(Type.Ref(DatasetItemInput), { maxItems: DATASET_ITEMS_PER_REQUEST })),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'CreateDatasetRequest', additionalProperties: false },
)
export type CreateDatasetRequest = Static<typeof CreateDatasetRequest>

export const UpdateDatasetRequest = Type.Object(
  {
    name: Type.Optional(Name),
    description: Type.Optional(Description),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'UpdateDatasetRequest', additionalProperties: false, minProperties: 1 },
)
export type UpdateDatasetRequest = Static<typeof UpdateDatasetRequest>

export const AddDatasetItemsRequest = Type.Object(
  {
    items: Type.Array(Type.Ref(DatasetItemInput), { minItems: 1, maxItems: DATASET_ITEMS_PER_REQUEST }),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'AddDatasetItemsRequest', additionalProperties: false },
)
export type AddDatasetItemsRequest = Static<typeof AddDatasetItemsRequest>

export const AddedDatasetItems = Type.Object(
  { added: Type.Integer(), itemCount: Type.Integer() },
  { $id: 'AddedDatasetItems' },
)
export type AddedDatasetItems = Static<typeof AddedDatasetItems>

/** The multipart body of an item upload: one file field. */
export const DatasetUpload = Type.Object(
  {
    file: Type.String({
      contentMediaType: 'text/csv',
      description:
        'A CSV file (a header row; each column a variable, a column `expected` the expected output) or a ' +
        'JSONL file (`.jsonl` name or `application/jsonl` type: one `{variables, expected?, metadata?}` per line).',
    }),
  },
  { additionalProperties: false },
)

export const DatasetOrganizationQuery = Type.Object(
  { organizationId: Type.Optional(ObjectId) },
  { additionalProperties: false },
)
export const ListDatasetsQuery = Type.Object(
  { ...PageQuery, organizationId: Type.Optional(ObjectId) },
  { $id: 'ListDatasetsQuery', additionalProperties: false },
)
export const DatasetList = Type.Object(
  { datasets: Type.Array(Type.Ref(Dataset)), pagination: Type.Ref(Pagination) },
  { $id: 'DatasetList' },
)
export type DatasetList = Static<typeof DatasetList>
export const DatasetItemList = Type.Object(
  { items: Type.Array(Type.Ref(DatasetItem)), pagination: Type.Ref(Pagination) },
  { $id: 'DatasetItemList' },
)
export type DatasetItemList = Static<typeof DatasetItemList>

// ---- evaluators

const EvaluatorName = Type.String({ minLength: 1, maxLength: 64, pattern: '^[A-Za-z0-9_.:-]+$' })
const named = { name: Type.Optional(EvaluatorName) }
export const Evaluator = Type.Union(
  [
    Type.Object({ type: Type.Literal('exact'), ...named }, { additionalProperties: false }),
    Type.Object(
      {
        type: Type.Literal('contains'),
        value: Type.Optional(Type.String({ minLength: 1, maxLength: 10_000 })),
        ...named,
      },
      { additionalProperties: false },
    ),
    Type.Object(
      { type: Type.Literal('regex'), pattern: Type.String({ minLength: 1, maxLength: 1_000 }), ...named },
      { additionalProperties: false },
    ),
    Type.Object({ type: Type.Literal('json-valid'), ...named }, { additionalProperties: false }),
    Type.Object(
      { type: Type.Literal('json-schema'), schema: JsonObject, ...named },
      { additionalProperties: false },
    ),
    Type.Object(
      {
        type: Type.Literal('llm-judge'),
        /** The slug of a prompt whose render receives `input`, `output` and `expected`. */
        rubric: Slug,
        connectionId: Type.Optional(ObjectId),
        model: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
        ...named,
      },
      { additionalProperties: false },
    ),
  ],
  { $id: 'Evaluator' },
)
export type Evaluator = Static<typeof Evaluator>
export type EvaluatorType = Evaluator['type']
export const EVALUATOR_TYPES: readonly EvaluatorType[] = [
  'exact',
  'contains',
  'regex',
  'json-valid',
  'json-schema',
  'llm-judge',
]

// ---- experiments

export const ExperimentVariant = Type.Object(
  {
    promptId: ObjectId,
    version: Type.Optional(Type.Integer({ minimum: 1 })),
    env: Type.Optional(EnvironmentName),
    draft: Type.Optional(Type.Literal(true)),
  },
  { $id: 'ExperimentVariant', additionalProperties: false },
)
export type ExperimentVariant = Static<typeof ExperimentVariant>

export const CreateExperimentRequest = Type.Object(
  {
    name: Name,
    datasetId: ObjectId,
    variants: Type.Array(Type.Ref(ExperimentVariant), { minItems: 1, maxItems: EXPERIMENT_VARIANTS_MAX }),
    connectionId: ObjectId,
    model: Type.Optional(Type.String({ minLength: 1, maxLength: 200 })),
    params: Type.Optional(JsonObject),
    evaluators: Type.Array(Type.Ref(Evaluator), { maxItems: EXPERIMENT_EVALUATORS_MAX }),
    concurrency: Type.Optional(Type.Integer({ minimum: 1, maximum: EXPERIMENT_CONCURRENCY_MAX })),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'CreateExperimentRequest', additionalProperties: false },
)
export type CreateExperimentRequest = Static<typeof CreateExperimentRequest>

export const EXPERIMENT_STATUSES = ['queued', 'running', 'completed', 'failed', 'cancelled'] as const
export type ExperimentStatus = (typeof EXPERIMENT_STATUSES)[number]
export const ExperimentStatus = Type.Union(
  EXPERIMENT_STATUSES.map((s) => Type.Literal(s)),
  { $id: 'ExperimentStatus' },
)

export const ExperimentAccepted = Type.Object(
  { experimentId: ObjectId, status: Type.Literal('queued') },
  { $id: 'ExperimentAccepted' },
)

const Quantiles = Type.Object({ p50: Nullable(Type.Number()), p95: Nullable(Type.Number()) })
export const VariantSummary = Type.Object(
  {
    /** 0-based place of the variant in the request. */
    variant: Type.Integer(),
    promptId: ObjectId,
    label: Type.String(),
    done: Type.Integer(),
    errors: Type.Integer(),
    /** Per evaluator name: the mean of its scores (null while none), and how many it scored. */
    evaluators: Type.Record(
      Type.String(),
      Type.Object({ mean: Nullable(Type.Number()), count: Type.Integer() }),
      { examples: [{ exact: { mean: 0.75, count: 200 } }] },
    ),
    /** Units without an error whose every score is at least 0.5, over units done. */
    passRate: Nullable(Type.Number()),
    latencyMs: Quantiles,
    tokens: Type.Object({ input: Type.Integer(), output: Type.Integer() }),
  },
  { $id: 'VariantSummary' },
)
export type VariantSummary = Static<typeof VariantSummary>

export const Experiment = Type.Object(
  {
    _id: ObjectId,
    organizationId: ObjectId,
    name: Type.String(),
    datasetId: ObjectId,
    variants: Type.Array(Type.Ref(ExperimentVariant)),
    connectionId: ObjectId,
    model: Nullable(Type.String()),
    params: Nullable(JsonObject),
    evaluators: Type.Array(Type.Ref(Evaluator)),
    concurrency: Type.Integer(),
    status: Type.Ref(ExperimentStatus),
    progress: Type.Object({ done: Type.Integer(), total: Type.Integer() }),
    summary: Type.Array(Type.Ref(VariantSummary)),
    error: Nullable(Type.String()),
    createdAt: Timestamp,
    startedAt: Nullable(Timestamp),
    finishedAt: Nullable(Timestamp),
  },
  { $id: 'Experiment' },
)
export type Experiment = Static<typeof Experiment>

export const ListExperimentsQuery = Type.Object(
  {
    ...PageQuery,
    /** Only the experiments one of whose variants is this prompt. */
    promptId: Type.Optional(ObjectId),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'ListExperimentsQuery', additionalProperties: false },
)
export const ExperimentList = Type.Object(
  { experiments: Type.Array(Type.Ref(Experiment)), pagination: Type.Ref(Pagination) },
  { $id: 'ExperimentList' },
)
export type ExperimentList = Static<typeof ExperimentList>

export const ExperimentResult = Type.Object(
  {
    itemId: ObjectId,
    position: Type.Integer(),
    variant: Type.Integer(),
    variables: Type.Record(Type.String(), Type.Unknown()),
    expected: Nullable(Type.String()),
    output: Nullable(Type.String()),
    /** Per evaluator name: its score 0..1, or null where it could not score (see `evaluatorErrors`). */
    scores: Type.Record(Type.String(), Nullable(Type.Number()), {
      examples: [{ exact: 1, 'json-valid': 0 }],
    }),
    evaluatorErrors: Type.Record(Type.String(), Type.String(), {
      examples: [{ 'llm-judge': 'the answer holds no score' }],
    }),
    passed: Type.Boolean(),
    latencyMs: Nullable(Type.Number()),
    tokens: Type.Object({ input: Type.Integer(), output: Type.Integer() }),
    error: Nullable(Type.String()),
    finishedAt: Timestamp,
  },
  { $id: 'ExperimentResult' },
)
export type ExperimentResult = Static<typeof ExperimentResult>

export const ListResultsQuery = Type.Object(
  {
    ...PageQuery,
    variant: Type.Optional(Type.Integer({ minimum: 0, maximum: EXPERIMENT_VARIANTS_MAX - 1 })),
    /** true: only the units that errored or did not pass. */
    failed: Type.Optional(Type.Boolean()),
    organizationId: Type.Optional(ObjectId),
  },
  { $id: 'ListResultsQuery', additionalProperties: false },
)
export const ExperimentResultList = Type.Object(
  { results: Type.Array(Type.Ref(ExperimentResult)), pagination: Type.Ref(Pagination) },
  { $id: 'ExperimentResultList' },
)
export type ExperimentResultList = Static<typeof ExperimentResultList>

export const ExperimentCompletedEvent = Type.Object(
  {
    id: ObjectId,
    type: Type.Literal('experiment.completed'),
    createdAt: Timestamp,
    organizationId: ObjectId,
    data: Type.Object({
      experimentId: ObjectId,
      name: Type.String(),
      datasetId: ObjectId,
      status: Type.Ref(ExperimentStatus),
      progress: Type.Object({ done: Type.Integer(), total: Type.Integer() }),
      summary: Type.Array(Type.Ref(VariantSummary)),
    }),
  },
  { $id: 'ExperimentCompletedEvent' },
)
export type ExperimentCompletedEvent = Static<typeof ExperimentCompletedEvent>

/** In schemas.ts order: referenced before referencing. */
export const EXPERIMENT_SCHEMAS = [
  Dataset,
  DatasetItemInput,
  DatasetItem,
  CreateDatasetRequest,
  UpdateDatasetRequest,
  AddDatasetItemsRequest,
  AddedDatasetItems,
  ListDatasetsQuery,
  DatasetList,
  DatasetItemList,
  Evaluator,
  ExperimentVariant,
  CreateExperimentRequest,
  ExperimentStatus,
  ExperimentAccepted,
  VariantSummary,
  Experiment,
  ListExperimentsQuery,
  ExperimentList,
  ExperimentResult,
  ListResultsQuery,
  ExperimentResultList,
  ExperimentCompletedEvent,
]
