export { type CacheSource, stableKey, TtlCache } from './cache.ts'
export {
  createClient,
  type FallbackTemplate,
  type FetchedPrompt,
  type InvokeOptions,
  PromptClient,
  type PromptClientOptions,
  type RenderablePrompt,
  type RenderableOptions,
  type RenderedPrompt,
} from './client.ts'
export {
  DEFAULT_MAX_OUTPUT_BYTES,
  hasReferences,
  type LocalRendering,
  type LocalRenderOptions,
  type RenderSource,
  renderLocally,
} from './local.ts'
export { type ClientErrorCode, codeForStatus, PromptServiceError } from './errors.ts'
export {
  backoffDelay,
  DEFAULT_RETRY,
  parseRetryAfter,
  type RetryInfo,
  type RetryOptions,
} from './transport.ts'
export type {
  ApiMethods,
  BodyOf,
  CallOptions,
  InputOf,
  ParamsOf,
  QueryOf,
  ResultOf,
  UploadFile,
} from './types.ts'
