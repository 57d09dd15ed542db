import { AppError } from '@pm/contracts'

// What render.ts, logic.ts and chat.ts share, in a file of its own (no import cycle).

/**
 * `invoke` renders a published version for a caller: unresolved placeholders become "" and missing
 * required variables are reported so the caller can refuse the request. `inject` is the draft preview:
 * it never fails and leaves unresolved placeholders as written so the author can see them.
 */
export type RenderMode = 'invoke' | 'inject'

/** Renders a supplied value as text. */
export function formatValue(value: unknown): string {
  if (typeof value === 'string') return value
  // null is "supplied but empty" rather than the text "null": callers send null to blank a variable
  // explicitly, and it still satisfies a required variable.
  if (value === null) return ''
  // toJSON may yield undefined (JSON.stringify then returns undefined despite its declared type).
  if (typeof value === 'object') return JSON.stringify(value) ?? ''
  return String(value)
}

/** The refusal of a rendering over RenderOptions.maxOutputBytes. */
export function renderTooLarge(max: number): AppError {
  return new AppError('RENDER_TOO_LARGE', `the rendered text would exceed ${max} bytes`, {
    maxOutputBytes: max,
  })
}
