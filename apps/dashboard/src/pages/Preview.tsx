import type { EnvironmentName, InjectResult, InvokeResult } from '@pm/contracts'
import { useMutation } from '@tanstack/react-query'
import { type FormEvent, type ReactNode, useState } from 'react'
import { PLACEHOLDER } from '../TemplateEditor.tsx'
import { RenderedMessages } from '../chat.tsx'
import { usePrompt, useVersions } from '../prompt.ts'
import { client } from '../session.ts'
import { ErrorBanner } from '../ui.tsx'
import { listVariables, suppliedVariables, VariableFields } from '../variables.tsx'

/** Rendered text with the placeholders that stayed unresolved marked where they are. */
function Highlighted({ text, unresolved }: { text: string; unresolved: readonly string[] }) {
  const names = new Set(unresolved)
  const parts: ReactNode[] = []
  let last = 0
  for (const match of text.matchAll(PLACEHOLDER)) {
    if (!names.has(match[1] ?? '')) continue
    parts.push(text.slice(last, match.index))
    parts.push(
      <mark key={match.index} className="unresolved" title={`${match[1]} has no value`}>
        {match[0]}
      </mark>,
    )
    last = match.index + match[0].length
  }
  parts.push(text.slice(last))
  return <pre className="rendered">{parts}</pre>
}

/** The config a rendering carries (chat and text prompts alike). */
function ConfigShown({ config }: { config: Record<string, unknown> | undefined }) {
  if (!config) return null
  return (
    <>
      <h3 className="small">Config</h3>
      <pre className="rendered">{JSON.stringify(config, null, 2)}</pre>
    </>
  )
}

/**
 * A form for the draft's variables; "Render draft" previews the draft (inject), "Invoke"
 * renders a published version or an environment's pin as a backend would get it.
 */
export function Preview() {
  const prompt = usePrompt()
  const versions = useVersions(prompt._id)
  const [values, setValues] = useState<Record<string, string>>({})
  const [source, setSource] = useState('env:production')

  // A chat prompt's placeholder messages take a list of messages: their field holds JSON.
  const lists = listVariables(prompt)
  const supplied = () => suppliedVariables(values, lists)

  const inject = useMutation<InjectResult>({
    mutationFn: () =>
      client.api.injectPrompt({ params: { id: prompt._id }, body: { variables: supplied() } }),
  })
  const invoke = useMutation<InvokeResult>({
    mutationFn: () => {
      const [kind, value] = source.split(':')
      return client.api.invokePrompt({
        params: { id: prompt._id },
        query: kind === 'env' ? { env: value as EnvironmentName } : {},
        body: { variables: supplied(), ...(kind === 'version' ? { version: Number(value) } : {}) },
      })
    },
  })

  const renderDraft = (e: FormEvent) => {
    e.preventDefault()
    inject.mutate()
  }
  return (
    <div className="preview">
      <form onSubmit={renderDraft} className="panel">
        <h2>Variables</h2>
        {prompt.variables.length === 0 && <p className="muted">This draft has no variables.</p>}
        <VariableFields
          variables={prompt.variables}
          lists={lists}
          values={values}
          onChange={setValues}
          idPrefix="var"
        />
        <div className="actions">
          <button type="submit" className="btn btn-primary" disabled={inject.isPending}>
            Render draft
          </button>
        </div>
      </form>

      <section className="panel" aria-labelledby="draft-result">
        <h2 id="draft-result">Draft</h2>
        <ErrorBanner error={inject.error} />
        {inject.data ? (
          <>
            {inject.data.renderedMessages ? (
              <RenderedMessages messages={inject.data.renderedMessages} />
            ) : (
              <Highlighted text={inject.data.renderedContent} unresolved={inject.data.unresolvedVariables} />
            )}
            {inject.data.unresolvedVariables.length > 0 ? (
              <p className="hint hint-warn">Unresolved: {inject.data.unresolvedVariables.join(', ')}</p>
            ) : (
              <p className="hint">Every placeholder has a value.</p>
            )}
            <ConfigShown config={inject.data.config} />
          </>
        ) : (
          <p className="muted">Render the draft to see it here (saved changes only).</p>
        )}
      </section>

      <section className="panel" aria-labelledby="invoke-result">
        <h2 id="invoke-result">Published</h2>
        {prompt.versionCount === 0 ? (
          <p className="muted">
            Nothing published yet: a backend gets this prompt once a version is published (Publish, in the
            editor).
          </p>
        ) : (
          <form
            className="inline-form"
            onSubmit={(e) => {
              e.preventDefault()
              invoke.mutate()
            }}
          >
            <div className="field">
              <label htmlFor="invoke-source">Render from</label>
              <select id="invoke-source" value={source} onChange={(e) => setSource(e.target.value)}>
                <option value="env:production">Production environment</option>
                <option value="env:preview">Preview environment</option>
                <option value="latest">Latest version</option>
                {(versions.data ?? []).map((v) => (
                  <option key={v._id} value={`version:${v.version}`}>
                    Version {v.version}
                  </option>
                ))}
              </select>
            </div>
            <button type="submit" className="btn" disabled={invoke.isPending}>
              Invoke
            </button>
          </form>
        )}
        <ErrorBanner error={invoke.error} />
        {invoke.data && (
          <>
            {invoke.data.renderedMessages ? (
              <RenderedMessages messages={invoke.data.renderedMessages} />
            ) : (
              <pre className="rendered">{invoke.data.renderedContent}</pre>
            )}
            <p className="hint">Version {invoke.data.version}</p>
            <ConfigShown config={invoke.data.config} />
          </>
        )}
      </section>
    </div>
  )
}
