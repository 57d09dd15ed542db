import type { PublicPrompt } from '@pm/contracts'
import { useMutation, useQuery } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { Link, useParams } from 'react-router'
import { client, useOrganizations, useSession } from '../../session.ts'
import { ConfigAndVariables, ErrorBanner, Field, Loading, When } from '../../ui.tsx'
import { useOpenIn } from '../settings/common.tsx'
import { RenderedMessages } from '../../chat.tsx'
import { listVariables, suppliedVariables, VariableFields } from '../../variables.tsx'

/** One public prompt: its published content, a variables form to render it, and a fork. */
export function CatalogPrompt() {
  const id = useParams().id ?? ''
  const state = useSession()
  const prompt = useQuery({
    queryKey: ['catalog-prompt', id],
    queryFn: () => client.api.getPublicPrompt({ params: { id } }),
  })
  if (prompt.isPending) return <Loading label="Loading the prompt" />
  if (prompt.error) {
    return (
      <>
        <p>
          <Link to="/catalog">← Catalog</Link>
        </p>
        <ErrorBanner error={prompt.error} title="This prompt is not in the catalog" />
      </>
    )
  }
  const p = prompt.data
  return (
    <>
      <p>
        <Link to="/catalog">← Catalog</Link>
      </p>
      <div className="page-head">
        <div>
          <h1>{p.name}</h1>
          <p className="muted small">
            <span className="mono">{p.slug}</span> · {p.type === 'chat' ? 'chat' : 'text'} prompt · version{' '}
            {p.version} · published <When at={p.publishedAt} />
          </p>
        </div>
      </div>
      {p.description && <p className="lead">{p.description}</p>}
      <div className="catalog-detail">
        <section className="panel" aria-labelledby="template-title">
          <h2 id="template-title">Template</h2>
          <pre className="rendered">{p.template}</pre>
          <ConfigAndVariables config={p.config} variables={p.variables} />
        </section>
        <div>
          <TryIt prompt={p} />
          {state.status === 'signed-in' ? (
            <Fork prompt={p} />
          ) : (
            <section className="panel">
              <h2>Fork</h2>
              <p>
                <Link to={`/sign-in?next=${encodeURIComponent(`/catalog/${p._id}`)}`}>Sign in</Link> to copy
                this prompt into one of your organizations.
              </p>
            </section>
          )}
        </div>
      </div>
    </>
  )
}

function TryIt({ prompt }: { prompt: PublicPrompt }) {
  const [values, setValues] = useState<Record<string, string>>({})
  const formId = useId()
  const lists = listVariables(prompt)
  const invoke = useMutation({
    mutationFn: () =>
      client.api.invokePublicPrompt({
        params: { id: prompt._id },
        body: { variables: suppliedVariables(values, lists) },
      }),
  })
  return (
    <section className="panel" aria-labelledby={`${formId}-title`}>
      <h2 id={`${formId}-title`}>Try it</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          invoke.mutate()
        }}
      >
        {prompt.variables.length === 0 && <p className="muted small">This prompt takes no variables.</p>}
        <VariableFields
          variables={prompt.variables}
          lists={lists}
          values={values}
          onChange={setValues}
          idPrefix={formId}
        />
        <button type="submit" className="btn btn-primary" disabled={invoke.isPending}>
          Invoke
        </button>
      </form>
      <ErrorBanner error={invoke.error} title="Not rendered" />
      {invoke.data && (
        <>
          <h3 className="small">Rendered (version {invoke.data.version})</h3>
          {invoke.data.renderedMessages ? (
            <RenderedMessages messages={invoke.data.renderedMessages} />
          ) : (
            <pre className="rendered">{invoke.data.renderedContent}</pre>
          )}
        </>
      )}
    </section>
  )
}

function Fork({ prompt }: { prompt: PublicPrompt }) {
  const orgId = useId()
  const orgs = useOrganizations()
  const list = orgs.data?.organizations ?? []
  const [target, setTarget] = useState('')
  const [name, setName] = useState(prompt.name)
  const openIn = useOpenIn()
  const [openError, setOpenError] = useState<unknown>(null)
  const organizationId = target || list[0]?._id || ''
  const fork = useMutation({
    mutationFn: () =>
      client.api.forkPublicPrompt({
        params: { id: prompt._id },
        body: { organizationId, name: name.trim() },
      }),
  })
  const forked = fork.data
  const into = list.find((o) => o._id === forked?.organizationId)
  return (
    <section className="panel" aria-labelledby={`${orgId}-title`}>
      <h2 id={`${orgId}-title`}>Fork into an organization</h2>
      <p className="hint">A private copy of version {prompt.version}, published there as its version 1.</p>
      {orgs.isPending && <Loading label="Loading your organizations" />}
      <ErrorBanner error={orgs.error} />
      {orgs.data && list.length === 0 && <p className="muted">You are in no organization to fork into.</p>}
      {list.length > 0 && (
        <form
          onSubmit={(e) => {
            e.preventDefault()
            fork.mutate()
          }}
        >
          <div className="field">
            <label htmlFor={orgId}>Target organization</label>
            <select id={orgId} value={organizationId} onChange={(e) => setTarget(e.target.value)}>
              {list.map((o) => (
                <option key={o._id} value={o._id}>
                  {o.name}
                </option>
              ))}
            </select>
          </div>
          <Field
            label="Name of the copy"
            required
            maxLength={200}
            value={name}
            onChange={(e) => setName(e.target.value)}
          />
          <button type="submit" className="btn btn-primary" disabled={fork.isPending || name.trim() === ''}>
            Fork
          </button>
        </form>
      )}
      <ErrorBanner error={fork.error ?? openError} title="Not forked" />
      {forked && (
        <div className="banner banner-ok" role="status">
          Forked into {into?.name ?? 'the organization'} as “{forked.name}”.{' '}
          <button
            type="button"
            className="btn btn-small"
            onClick={() => {
              setOpenError(null)
              openIn(forked.organizationId, `/prompts/${forked._id}`).catch((err: unknown) =>
                setOpenError(err),
              )
            }}
          >
            Open the copy
          </button>
        </div>
      )}
    </section>
  )
}
