import { type Static, Type } from '@sinclair/typebox'

/**
 * The closed list of error codes (DESIGN section 3) and the one place that maps them to
 * HTTP status. Services throw `AppError(code)`; the status always comes from here.
 */
export const ERROR_STATUS = {
  AUTH_REQUIRED: 401,
  INVALID_CREDENTIALS: 401,
  INSUFFICIENT_SCOPE: 403,
  USER_TOKEN_REQUIRED: 403,
  FORBIDDEN: 403,
  MEMBERSHIP_REQUIRED: 403,
  HTTPS_REQUIRED: 403,
  NOT_FOUND: 404,
  VERSION_NOT_FOUND: 404,
  ENVIRONMENT_NOT_SET: 404,
  VALIDATION_ERROR: 400,
  NO_PUBLISHED_VERSION: 400,
  MISSING_REQUIRED_VARIABLES: 400,
  /** A `{{> slug}}` reference that cannot be resolved at render time (DESIGN section 12). */
  INVALID_REFERENCE: 400,
  CONFLICT: 409,
  VERSION_NOT_PUBLISHED: 409,
  PAYLOAD_TOO_LARGE: 413,
  /** The rendered text would exceed the render service's RENDER_MAX_OUTPUT_BYTES. */
  RENDER_TOO_LARGE: 422,
  UNSUPPORTED_MEDIA_TYPE: 415,
  RATE_LIMITED: 429,
  /** More than RUN_MAX_CONCURRENT model calls of one organization at once (runs). */
  RUNS_BUSY: 429,
  INTERNAL_ERROR: 500,
  SERVICE_UNAVAILABLE: 503,
  UPSTREAM_TIMEOUT: 504,
  /** The model provider answered an error, or could not be reached (runs). */
  PROVIDER_ERROR: 502,
  /** The model provider did not answer within RUN_TIMEOUT_MS (runs). */
  PROVIDER_TIMEOUT: 504,
} as const

export type ErrorCode = keyof typeof ERROR_STATUS
export const ERROR_CODES = Object.keys(ERROR_STATUS) as ErrorCode[]

export const FieldError = Type.Object(
  { path: Type.String(), message: Type.String() },
  { $id: 'FieldError', additionalProperties: false },
)
export type FieldError = Static<typeof FieldError>

export const ErrorBody = Type.Object(
  {
    error: Type.Object({
      code: Type.Union(ERROR_CODES.map((c) => Type.Literal(c))),
      message: Type.String(),
      details: Type.Optional(Type.Unknown()),
      requestId: Type.String(),
    }),
  },
  { $id: 'ErrorBody' },
)
export type ErrorBody = Static<typeof ErrorBody>

/** A typed failure: handlers throw it; the error handler renders it as ErrorBody. */
export class AppError extends Error {
  readonly code: ErrorCode
  readonly statusCode: number
  readonly details: unknown
  /** Response headers that belong with this error (Retry-After on 429). */
  readonly headers: Record<string, string> | undefined
  constructor(code: ErrorCode, message: string, details?: unknown, headers?: Record<string, string>) {
    super(message)
    this.name = 'AppError'
    this.code = code
    this.statusCode = ERROR_STATUS[code]
    this.details = details
    this.headers = headers
  }
}

export function isErrorCode(value: unknown): value is ErrorCode {
  return typeof value === 'string' && Object.hasOwn(ERROR_STATUS, value)
}
