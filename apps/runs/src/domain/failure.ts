import { AppError } from '@pm/contracts'

const MESSAGE_MAX = 500
/** Things shaped like credentials, whatever the provider echoes: sk-..., Bearer ..., key=... */
const CREDENTIAL_LIKE = [/\b(sk|pk|rk)-[A-Za-z0-9_-]{8,}/g, /\bBearer\s+\S+/gi, /\b(api[-_]?key|token)=\S+/gi]

const escapeRegex = (v: string) => v.replace(/[.*+?^${}()|[\]\\]/g, '\\$&')

/** Secrets this long are replaced wherever they appear; shorter ones only where they stand alone. */
const SECRET_ANYWHERE_MIN = 4

/**
 * A provider's message, safe to answer and log: the connection's secrets (its key and the
 * values of its extra headers) and anything shaped like a credential replaced, capped in length.
 * A secret of 1 to 3 characters is replaced only as a whole word (not inside a longer run of
 * letters, digits, `-` or `_`): everywhere, a 1-character key would take that letter out of
 * every word.
 */
export function sanitize(message: string, secrets: readonly string[]): string {
  let out = message
  for (const secret of secrets) {
    if (secret.trim() === '') continue
    if (secret.length >= SECRET_ANYWHERE_MIN) out = out.split(secret).join('[redacted]')
    else out = out.replace(new RegExp(`(?<![\\w-])${escapeRegex(secret)}(?![\\w-])`, 'g'), '[redacted]')
  }
  for (const pattern of CREDENTIAL_LIKE) out = out.replace(pattern, '[redacted]')
  return out.length > MESSAGE_MAX ? `${out.slice(0, MESSAGE_MAX)}…` : out
}

/**
 * A stream that ended without the provider's closing event (OpenAI: a choice's `finish_reason`;
 * Anthropic: `message_stop` or a `stop_reason`): the connection closed cleanly on a cut answer,
 * which the SDKs end quietly, as if it were complete. `missing` names the event.
 */
export function streamEndedEarly(missing: string): AppError {
  return new AppError('PROVIDER_ERROR', 'the stream ended before the answer was complete', {
    providerStatus: null,
    message: `the provider's stream ended without ${missing}`,
  })
}

/** An answer past RUN_MAX_OUTPUT_BYTES, or what the provider sent for it past its bound (`services/bounded.ts`). */
export function answerTooLong(maxOutputBytes: number): AppError {
  return new AppError('PROVIDER_ERROR', 'the answer was longer than RUN_MAX_OUTPUT_BYTES allows', {
    providerStatus: null,
    maxOutputBytes,
  })
}

interface SdkErrorShape {
  name?: unknown
  status?: unknown
  message?: unknown
  headers?: { get?(name: string): string | null } | undefined
  error?: unknown
  cause?: unknown
}

/** The provider's own words: its error body's message, else the SDK's. */
function providerMessage(err: SdkErrorShape): string {
  const body = err.error as { message?: unknown; error?: { message?: unknown } } | undefined
  const inner = body?.error?.message ?? body?.message
  if (typeof inner === 'string' && inner) return inner
  return typeof err.message === 'string' ? err.message : 'the provider failed'
}

function causeCode(err: SdkErrorShape): string | undefined {
  let cause = err.cause as { code?: unknown; cause?: unknown } | undefined
  for (let i = 0; cause && i < 4; i++) {
    if (typeof cause.code === 'string') return cause.code
    cause = cause.cause as typeof cause
  }
  return undefined
}

/**
 * How a failed model call is answered (DESIGN section 13): 504 PROVIDER_TIMEOUT past the
 * deadline (or the connect deadline); 502 PROVIDER_ERROR otherwise, with the provider's status
 * and its sanitized message, and for its 429 the Retry-After, passed on. Never the key.
 */
export function providerFailure(
  err: unknown,
  opts: { timedOut: boolean; timeoutMs: number; secrets: readonly string[] },
): AppError {
  if (err instanceof AppError) return err
  const e = (err ?? {}) as SdkErrorShape
  const code = causeCode(e)
  if (opts.timedOut || e.name === 'APIConnectionTimeoutError' || code === 'UND_ERR_CONNECT_TIMEOUT') {
    return new AppError('PROVIDER_TIMEOUT', 'the model provider did not answer in time', {
      timeoutMs: opts.timeoutMs,
    })
  }
  if (typeof e.status === 'number') {
    const retryAfter = e.headers?.get?.('retry-after') ?? null
    const details: Record<string, unknown> = {
      providerStatus: e.status,
      message: sanitize(providerMessage(e), opts.secrets),
    }
    if (retryAfter && /^[\w ,:+-]{1,64}$/.test(retryAfter)) details.retryAfter = retryAfter
    // A 3xx reaches here only because redirects are not followed (services/egress.ts).
    const redirect = e.status >= 300 && e.status < 400 ? ', a redirect, which is not followed' : ''
    return new AppError(
      'PROVIDER_ERROR',
      `the model provider answered ${e.status}${redirect}`,
      details,
      typeof details.retryAfter === 'string' ? { 'retry-after': details.retryAfter } : undefined,
    )
  }
  return new AppError('PROVIDER_ERROR', 'the model provider could not be reached', {
    providerStatus: null,
    message: sanitize(code ? `connection failed (${code})` : providerMessage(e), opts.secrets),
  })
}
