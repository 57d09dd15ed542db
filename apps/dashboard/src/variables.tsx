import type { ChatMessage, Variable } from '@pm/contracts'
import { chatVariableNames } from '@pm/template'

/** A chat prompt's placeholder messages: their values are lists of messages, written as JSON. */
export function listVariables(prompt: { type?: string; messages?: ChatMessage[] }): Set<string> {
  return new Set(prompt.type === 'chat' ? chatVariableNames(prompt.messages ?? []).placeholders : [])
}

function parseList(name: string, text: string): unknown {
  try {
    return JSON.parse(text)
  } catch {
    throw new Error(`${name}: write a JSON list such as [{"role": "user", "content": "Hi"}]`)
  }
}

/**
 * The values as the API takes them: empty fields left out (defaults apply, and a preview shows
 * the placeholder unresolved), a placeholder's list parsed. Throws, naming the field, when a
 * list is not JSON: the mutation shows it as its error and nothing is sent.
 */
export function suppliedVariables(
  values: Record<string, string>,
  lists: Set<string>,
): Record<string, unknown> {
  return Object.fromEntries(
    Object.entries(values)
      .filter(([, v]) => v !== '')
      .map(([name, v]) => [name, lists.has(name) ? parseList(name, v) : v]),
  )
}

/** One field per variable: a text input, or a JSON list for a chat placeholder. */
export function VariableFields({
  variables,
  lists,
  values,
  onChange,
  idPrefix,
}: {
  variables: readonly Variable[]
  lists: Set<string>
  values: Record<string, string>
  onChange: (values: Record<string, string>) => void
  /** Makes the fields' ids unique on the page. */
  idPrefix: string
}) {
  return variables.map((v) => {
    const id = `${idPrefix}-${v.name}`
    const set = (value: string) => onChange({ ...values, [v.name]: value })
    return (
      <div className="field" key={v.name}>
        <label htmlFor={id}>
          <span className="mono">{v.name}</span>
          {v.required && <span className="muted small"> (required)</span>}
        </label>
        {lists.has(v.name) ? (
          <textarea
            id={id}
            className="mono"
            rows={3}
            value={values[v.name] ?? ''}
            placeholder='[{"role": "user", "content": "Hi"}]'
            aria-describedby={v.description ? `${id}-hint` : undefined}
            onChange={(e) => set(e.target.value)}
          />
        ) : (
          <input
            id={id}
            value={values[v.name] ?? ''}
            placeholder={v.defaultValue !== undefined ? `Default: ${v.defaultValue}` : ''}
            aria-describedby={v.description ? `${id}-hint` : undefined}
            onChange={(e) => set(e.target.value)}
          />
        )}
        {v.description && (
          <span id={`${id}-hint`} className="hint">
            {v.description}
          </span>
        )}
      </div>
    )
  })
}
