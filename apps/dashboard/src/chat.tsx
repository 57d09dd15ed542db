import { type ChatMessage, MESSAGE_ROLES, type MessageRole, type PlaceholderMessage } from '@pm/contracts'
import { useId } from 'react'
import { TemplateEditor } from './TemplateEditor.tsx'

/**
 * Chat prompts (DESIGN section 9): an ordered list of role messages, each a `{{ name }}`
 * template, and placeholder messages that take a list of messages supplied at invoke.
 */
export type MessageDraft = ChatMessage

export const isPlaceholder = (m: ChatMessage): m is PlaceholderMessage =>
  'type' in m && m.type === 'placeholder'

/** The messages editor: add, remove, reorder; keyboard operable, every control labelled. */
export function MessagesEditor({
  messages,
  onChange,
}: {
  messages: MessageDraft[]
  onChange: (messages: MessageDraft[]) => void
}) {
  const base = useId()
  const set = (i: number, m: MessageDraft) => onChange(messages.map((x, j) => (j === i ? m : x)))
  const move = (i: number, by: number) => {
    const next = [...messages]
    const [m] = next.splice(i, 1)
    if (m) next.splice(i + by, 0, m)
    onChange(next)
  }
  return (
    <fieldset className="messages">
      <legend>Messages</legend>
      <ol className="message-list">
        {messages.map((m, i) => {
          const n = i + 1
          const id = `${base}-${i}`
          return (
            <li key={i} className="message">
              <div className="message-head">
                {isPlaceholder(m) ? (
                  <div className="field">
                    <label htmlFor={`${id}-name`}>Message {n}: placeholder variable</label>
                    <input
                      id={`${id}-name`}
                      className="mono"
                      value={m.name}
                      onChange={(e) => set(i, { type: 'placeholder', name: e.target.value })}
                    />
                  </div>
                ) : (
                  <div className="field">
                    <label htmlFor={`${id}-role`}>Message {n} role</label>
                    <select
                      id={`${id}-role`}
                      value={m.role}
                      onChange={(e) => set(i, { role: e.target.value as MessageRole, content: m.content })}
                    >
                      {MESSAGE_ROLES.map((r) => (
                        <option key={r} value={r}>
                          {r}
                        </option>
                      ))}
                    </select>
                  </div>
                )}
                <div className="actions">
                  <button
                    type="button"
                    className="btn btn-small"
                    disabled={i === 0}
                    aria-label={`Move message ${n} up`}
                    onClick={() => move(i, -1)}
                  >
                    ↑
                  </button>
                  <button
                    type="button"
                    className="btn btn-small"
                    disabled={i === messages.length - 1}
                    aria-label={`Move message ${n} down`}
                    onClick={() => move(i, 1)}
                  >
                    ↓
                  </button>
                  <button
                    type="button"
                    className="btn btn-small"
                    disabled={messages.length === 1}
                    onClick={() => onChange(messages.filter((_, j) => j !== i))}
                  >
                    Remove message {n}
                  </button>
                </div>
              </div>
              {isPlaceholder(m) ? (
                <p className="hint">Replaced at invoke by the list of messages passed as this variable.</p>
              ) : (
                <TemplateEditor
                  id={`${id}-content`}
                  label={`Message ${n} content`}
                  value={m.content}
                  onChange={(content) => set(i, { role: m.role, content })}
                />
              )}
            </li>
          )
        })}
      </ol>
      <div className="actions">
        <button
          type="button"
          className="btn"
          onClick={() =>
            onChange([...messages, { role: messages.length === 0 ? 'system' : 'user', content: '' }])
          }
        >
          Add message
        </button>
        <button
          type="button"
          className="btn"
          onClick={() => onChange([...messages, { type: 'placeholder', name: 'history' }])}
        >
          Add placeholder
        </button>
      </div>
    </fieldset>
  )
}

/** Rendered chat messages (preview and invoke answers). */
export function RenderedMessages({ messages }: { messages: readonly { role: string; content: string }[] }) {
  return (
    <ol className="rendered-messages">
      {messages.map((m, i) => (
        <li key={i}>
          <span className="badge">{m.role}</span>
          <pre className="rendered">{m.content}</pre>
        </li>
      ))}
    </ol>
  )
}
