import type { ErrorCode } from '@pm/contracts'

/**
 * Failures of the client itself: the service could not be reached (NETWORK_ERROR, TIMEOUT), or
 * a version that includes other prompts was given to the local renderer (REFERENCES_NOT_LOCAL).
 */
export type ClientErrorCode = 'NETWORK_ERROR' | 'TIMEOUT' | 'REFERENCES_NOT_LOCAL'

/**
 * Every failure the client reports. `code` is the service's code (the closed list of
 * @pm/contracts) when the service answered, or NETWORK_ERROR / TIMEOUT when it could not be
 * reached; branch on it rather than on `message`.
 */
export class PromptServiceError extends Error {
  readonly status: number
  readonly code: ErrorCode | ClientErrorCode
  readonly details: unknown
  readonly requestId: string | undefined
  /** How long the service asked to wait (Retry-After), when it did. */
  readonly retryAfterMs: number | undefined
  readonly operationId: string | undefined

  constructor(init: {
    status: number
    code: ErrorCode | ClientErrorCode
    message: string
    details?: unknown
    requestId?: string
    retryAfterMs?: number
    operationId?: string
    cause?: unknown
  }) {
    super(init.message, init.cause === undefined ? undefined : { cause: init.cause })
    this.name = 'PromptServiceError'
    this.status = init.status
    this.code = init.code
    this.details = init.details
    this.requestId = init.requestId
    this.retryAfterMs = init.retryAfterMs
    this.operationId = init.operationId
  }

  /** The service could not be reached or failed on its side: a cached or fallback value may stand in. */
  get isUnavailable(): boolean {
    return this.status === 0 || this.status >= 500 || this.status === 429
  }
}

const STATUS_CODES: Record<number, ErrorCode> = {
  400: 'VALIDATION_ERROR',
  401: 'INVALID_CREDENTIALS',
  403: 'FORBIDDEN',
  404: 'NOT_FOUND',
  409: 'CONFLICT',
  413: 'PAYLOAD_TOO_LARGE',
  415: 'UNSUPPORTED_MEDIA_TYPE',
  429: 'RATE_LIMITED',
  502: 'SERVICE_UNAVAILABLE',
  503: 'SERVICE_UNAVAILABLE',
  504: 'UPSTREAM_TIMEOUT',
}

/** A code for an answer without the service's error body (a proxy's 502, say). */
export function codeForStatus(status: number): ErrorCode {
  return STATUS_CODES[status] ?? (status >= 500 ? 'INTERNAL_ERROR' : 'VALIDATION_ERROR')
}
