import type { Variable, VariableInput } from '@pm/contracts'
import { extractPlaceholders } from './compile.ts'
import { templateVariableNames } from './logic.ts'

export interface SyncedVariables {
  variables: Variable[]
  /** Declared names the template no longer uses; they stay in `variables` so nothing is lost silently. */
  staleVariables: string[]
}

function normalise(input: VariableInput): Variable {
  // A variable is required unless the author says otherwise: failing loudly beats rendering a gap.
  const variable: Variable = { name: input.name, required: input.required ?? true }
  if (input.description !== undefined) variable.description = input.description
  if (input.defaultValue !== undefined) variable.defaultValue = input.defaultValue
  return variable
}

/**
 * Reconciles declared variables with the placeholders a template actually uses, on prompt create and
 * update: declared ones are kept (first wins on duplicate names), undeclared placeholders are appended
 * as required in order of appearance.
 */
export function syncVariables(template: string, declared: readonly VariableInput[]): SyncedVariables {
  return syncVariableNames(templateVariableNames(template) ?? extractPlaceholders(template), declared)
}

/**
 * `syncVariables` for a list of used names (a chat prompt's, over all its messages). Names in
 * `alwaysRequired` (a chat prompt's placeholder messages) are required whatever was declared.
 */
export function syncVariableNames(
  placeholders: readonly string[],
  declared: readonly VariableInput[],
  alwaysRequired: readonly string[] = [],
): SyncedVariables {
  const used = new Set(placeholders)
  const byName = new Map<string, Variable>()
  for (const input of declared) {
    if (!byName.has(input.name)) byName.set(input.name, normalise(input))
  }
  for (const name of alwaysRequired) {
    const v = byName.get(name)
    if (v) v.required = true
  }
  const variables = [...byName.values()]
  const staleVariables = variables.filter((v) => !used.has(v.name)).map((v) => v.name)
  for (const name of placeholders) {
    if (!byName.has(name)) variables.push({ name, required: true })
  }
  return { variables, staleVariables }
}
