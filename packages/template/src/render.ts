import type { Variable } from '@pm/contracts'
import { type CompiledTemplate, compileTemplate, utf8Length } from './compile.ts'
import { compileLogicOrFlat, renderLogic } from './logic.ts'
import { formatValue, type RenderMode, renderTooLarge } from './values.ts'

export { formatValue, type RenderMode, renderTooLarge } from './values.ts'

export interface RenderOptions {
  /**
   * Largest rendered text allowed, in UTF-8 bytes: a bigger one is refused with
   * RENDER_TOO_LARGE before it is built (a 1 KB value in 20,000 placeholders is 20 MB).
   */
  maxOutputBytes?: number
}

export interface RenderOutcome {
  renderedContent: string
  /** Declared required variables whose key is absent from the values, in declaration order. */
  missingRequired: string[]
  /** Placeholders with neither a supplied value nor a default, unique, in order of first appearance. */
  unresolved: string[]
}

/**
 * A key counts as supplied when it is an own property, even with "" or null. `undefined` counts as
 * absent: JSON cannot carry it, and in code `{ x: undefined }` conventionally means "not set".
 * Own-property check so that `{{constructor}}` or `{{toString}}` never pick up Object.prototype.
 */
function suppliedValue(values: Record<string, unknown>, name: string): unknown {
  return Object.hasOwn(values, name) ? values[name] : undefined
}

export function renderCompiled(
  compiled: CompiledTemplate,
  variables: readonly Variable[],
  values: Record<string, unknown>,
  mode: RenderMode,
  options: RenderOptions = {},
): RenderOutcome {
  const declared = new Map<string, Variable>()
  for (const v of variables) {
    if (!declared.has(v.name)) declared.set(v.name, v)
  }

  // Required-ness is the prompt's declared contract, so it is enforced even for a variable the
  // template no longer uses (a stale one); syncVariables reports those to the author.
  const missingRequired: string[] = []
  for (const v of declared.values()) {
    if (v.required && suppliedValue(values, v.name) === undefined) missingRequired.push(v.name)
  }

  // Resolve each unique name once; an undefined entry means "leave the placeholder as written".
  const resolved: (string | undefined)[] = []
  const unresolved: string[] = []
  for (const name of compiled.names) {
    const value = suppliedValue(values, name)
    if (value !== undefined) {
      resolved.push(formatValue(value))
      continue
    }
    const fallback = declared.get(name)?.defaultValue
    if (fallback !== undefined) {
      resolved.push(fallback)
      continue
    }
    unresolved.push(name)
    resolved.push(mode === 'invoke' ? '' : undefined)
  }

  const max = options.maxOutputBytes
  if (max !== undefined) {
    // The exact size, from sizes alone: nothing is built when it is too large.
    const valueBytes = resolved.map((value) => (value === undefined ? 0 : utf8Length(value)))
    let size = compiled.bytes.tail
    for (let i = 0; i < compiled.slots.length; i++) {
      const slot = compiled.slots[i] as CompiledTemplate['slots'][number]
      size +=
        (compiled.bytes.before[i] ?? 0) +
        (resolved[slot.id] === undefined ? (compiled.bytes.raw[i] ?? 0) : (valueBytes[slot.id] ?? 0))
      if (size > max) throw renderTooLarge(max)
    }
  }

  // Values are appended, never re-scanned, so a value containing `{{x}}` is not expanded again.
  let out = ''
  for (const slot of compiled.slots) {
    out += slot.before + (resolved[slot.id] ?? slot.raw)
  }
  out += compiled.tail
  return { renderedContent: out, missingRequired, unresolved }
}

/** One-off rendering; services that render the same template repeatedly should cache compileTemplate. */
export function renderTemplate(
  template: string,
  variables: readonly Variable[],
  values: Record<string, unknown>,
  mode: RenderMode,
  options: RenderOptions = {},
): RenderOutcome {
  const compiled = compileTemplate(template)
  // A template with blocks renders through the logic engine (references, having no lookups
  // here, stay as written in inject and render as nothing at invoke); one without, as before.
  const logic = compileLogicOrFlat(template, compiled)
  if (logic.includes.length > 0 || logic.nodes.some((n) => n.kind !== 'text' && n.kind !== 'var')) {
    const outcome = renderLogic(logic, variables, values, mode, options)
    return {
      renderedContent: outcome.renderedContent,
      missingRequired: outcome.missingRequired,
      unresolved: outcome.unresolved,
    }
  }
  return renderCompiled(compiled, variables, values, mode, options)
}
