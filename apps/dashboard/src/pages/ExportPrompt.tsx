import { useMutation } from '@tanstack/react-query'
import type { FileFormat, Prompt } from '@pm/contracts'
import { useId, useState } from 'react'
import { client } from '../session.ts'
import { downloadText, ErrorBanner } from '../ui.tsx'

const FORMATS: { value: FileFormat; label: string; ext: string; type: string }[] = [
  { value: 'dotprompt', label: 'Dotprompt (.prompt)', ext: '.prompt', type: 'text/plain' },
  { value: 'prompty', label: 'Prompty (.prompty)', ext: '.prompty', type: 'text/plain' },
  { value: 'json', label: 'JSON (.json)', ext: '.json', type: 'application/json' },
]

/** The prompt's draft as a file (prompts as code, docs/prompts-as-code.md). */
export function ExportPrompt({ prompt }: { prompt: Prompt }) {
  const [format, setFormat] = useState<FileFormat>('dotprompt')
  const selectId = useId()
  const exported = useMutation({
    mutationFn: async () => {
      const chosen = FORMATS.find((f) => f.value === format) ?? FORMATS[0]
      const text = await client.api.exportPrompt({ params: { id: prompt._id }, query: { format } })
      downloadText(text, `${prompt.slug}${chosen?.ext ?? '.prompt'}`, chosen?.type ?? 'text/plain')
    },
  })
  return (
    <div className="export-prompt">
      <label htmlFor={selectId} className="small">
        Export format
      </label>
      <select id={selectId} value={format} onChange={(e) => setFormat(e.target.value as FileFormat)}>
        {FORMATS.map((f) => (
          <option key={f.value} value={f.value}>
            {f.label}
          </option>
        ))}
      </select>
      <button
        type="button"
        className="btn btn-small"
        disabled={exported.isPending}
        onClick={() => exported.mutate()}
      >
        Export
      </button>
      <ErrorBanner error={exported.error} title="Not exported" />
    </div>
  )
}
