import { AppError } from '@pm/contracts'

/**
 * A provider's answer is read as untrusted input: the SDKs type it but do not check it, so a
 * server speaking the protocol badly (a proxy, a self-hosted model) could put an object where
 * text belongs, which was answered coerced ("[object Object]").
 */
export function invalidAnswer(what: string): AppError {
  return new AppError('PROVIDER_ERROR', `the provider's answer is not valid: ${what}`, {
    providerStatus: null,
  })
}

/** A text field of the answer: a string, or absent (null or undefined). */
export function optionalText(value: unknown, what: string): string | undefined {
  if (value === null || value === undefined) return undefined
  if (typeof value === 'string') return value
  throw invalidAnswer(`${what} is not a string`)
}

/** A text field that must be there: a string. */
export function requiredText(value: unknown, what: string): string {
  const text = optionalText(value, what)
  if (text === undefined) throw invalidAnswer(`${what} is missing`)
  return text
}

/**
 * A token count: a non-negative integer, else 0. Usage only informs (the log, the dashboard): a
 * count that makes no sense is dropped, the answer it came with kept.
 */
export function tokenCount(value: unknown): number {
  return typeof value === 'number' && Number.isSafeInteger(value) && value >= 0 ? value : 0
}

/** A list of the answer: an array, else none (a provider could send anything there). */
export function listOf<T>(value: readonly T[] | null | undefined): readonly T[] {
  return Array.isArray(value) ? value : []
}
