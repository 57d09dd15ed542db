import { useId } from 'react'
import { parseConfig } from './lib.ts'

export { formatConfig, parseConfig } from './lib.ts'

/** Model settings as JSON, checked as you type. */
export function ConfigEditor({ text, onChange }: { text: string; onChange: (text: string) => void }) {
  const id = useId()
  const parsed = parseConfig(text)
  return (
    <div className="field">
      <label htmlFor={id}>Config (JSON)</label>
      <textarea
        id={id}
        className="mono"
        rows={5}
        spellCheck={false}
        value={text}
        placeholder='{"model": "gpt-4o-mini", "temperature": 0.2}'
        aria-invalid={!parsed.ok}
        aria-describedby={`${id}-hint`}
        onChange={(e) => onChange(e.target.value)}
      />
      <span id={`${id}-hint`} className={`hint ${parsed.ok ? '' : 'hint-warn'}`} aria-live="polite">
        {parsed.ok ? 'Model settings kept with each version; empty for none.' : `Config ${parsed.error}.`}
      </span>
    </div>
  )
}
