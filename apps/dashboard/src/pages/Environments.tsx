import { ENVIRONMENTS, type EnvironmentName, type Pin, type PromptVersion } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useState } from 'react'
import { isPlaceholder, RenderedMessages } from '../chat.tsx'
import { usePeople } from '../people.ts'
import { keys, usePrompt, useVersions } from '../prompt.ts'
import { client, useSignedIn } from '../session.ts'
import { Empty, ErrorBanner, Loading, When } from '../ui.tsx'
import { listVariables, suppliedVariables, VariableFields } from '../variables.tsx'

const TITLES: Record<EnvironmentName, string> = { preview: 'Preview', production: 'Production' }

/** The preview and production pins, promotion, and what an invoke with `env` returns now. */
export function Environments() {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const versions = useVersions(prompt._id)
  const pins = useQuery({
    queryKey: keys.environments(organizationId, prompt._id),
    queryFn: () => client.api.getEnvironments({ params: { id: prompt._id } }),
  })
  if (pins.isPending || versions.isPending) return <Loading label="Loading the environments" />
  if (!pins.data || !versions.data) return <ErrorBanner error={pins.error ?? versions.error} />
  if (versions.data.length === 0) {
    return (
      <Empty title="Nothing to promote yet">
        <p>Publish a version first; then pin it to preview or production here.</p>
      </Empty>
    )
  }
  return (
    <div className="envs">
      {ENVIRONMENTS.map((env) => (
        <EnvironmentCard key={env} env={env} pin={pins.data?.[env] ?? null} />
      ))}
    </div>
  )
}

function EnvironmentCard({ env, pin }: { env: EnvironmentName; pin: Pin | null }) {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const { nameOf } = usePeople()
  const queryClient = useQueryClient()
  const versions = useVersions(prompt._id)
  const list = versions.data ?? []
  const [choice, setChoice] = useState(list[0]?._id ?? '')
  const promote = useMutation({
    mutationFn: () =>
      client.api.promoteVersion({ params: { id: prompt._id, env }, body: { versionId: choice } }),
    onSuccess: () => {
      queryClient.invalidateQueries({ queryKey: keys.environments(organizationId, prompt._id) })
      queryClient.invalidateQueries({ queryKey: ['env-invoke', organizationId, prompt._id, env] })
    },
  })
  // What a backend gets now. Invoke with env and no variables only when the pinned version
  // needs none (every required one has a default): otherwise that invoke is a 400
  // MISSING_REQUIRED_VARIABLES on every page view. Then the card shows the version as stored,
  // names what a backend must send, and invokes once the user has filled those in.
  const pinned = pin ? list.find((v) => v._id === pin.versionId) : undefined
  const needed = pinned ? pinned.variables.filter((v) => v.required && v.defaultValue === undefined) : []
  const [values, setValues] = useState<Record<string, string>>({})
  const [sent, setSent] = useState<Record<string, unknown> | null>(null)
  const [formError, setFormError] = useState<Error | null>(null)
  const rendered = useQuery({
    queryKey: ['env-invoke', organizationId, prompt._id, env, pin?.versionId, sent],
    queryFn: () =>
      client.api.invokePrompt({
        params: { id: prompt._id },
        query: { env },
        body: { variables: sent ?? {} },
      }),
    enabled: pinned !== undefined && (needed.length === 0 || sent !== null),
    retry: false,
  })
  const selectId = `promote-${env}`
  return (
    <section className="panel env" aria-labelledby={`env-${env}`}>
      <h2 id={`env-${env}`}>{TITLES[env]}</h2>
      {pin ? (
        <p>
          <strong>Version {pin.version}</strong>
          <span className="muted small">
            {' '}
            · promoted <When at={pin.promotedAt} /> by {nameOf(pin.promotedBy)}
          </span>
        </p>
      ) : (
        <p className="muted">No version pinned: invoke with env={env} answers ENVIRONMENT_NOT_SET.</p>
      )}
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault()
          promote.mutate()
        }}
      >
        <div className="field">
          <label htmlFor={selectId}>Version for {TITLES[env].toLowerCase()}</label>
          <select id={selectId} value={choice} onChange={(e) => setChoice(e.target.value)}>
            {list.map((v) => (
              <option key={v._id} value={v._id}>
                Version {v.version}
              </option>
            ))}
          </select>
        </div>
        <button type="submit" className="btn btn-primary" disabled={promote.isPending || !choice}>
          Promote to {TITLES[env].toLowerCase()}
        </button>
      </form>
      <ErrorBanner error={promote.error} title="Not promoted" />
      {pinned && (
        <div className="env-invoke">
          <h3 className="small">
            What <code>invoke?env={env}</code> returns
          </h3>
          {needed.length === 0 ? (
            <p className="hint">With no variables: defaults apply.</p>
          ) : (
            <>
              <p className="hint">
                A backend must send {needed.map((v) => v.name).join(', ')} (required, no default). Version{' '}
                {pinned.version} as stored:
              </p>
              <StoredVersion version={pinned} />
              <form
                className="env-values"
                aria-label={`Values for ${TITLES[env].toLowerCase()}`}
                onSubmit={(e) => {
                  e.preventDefault()
                  try {
                    setFormError(null)
                    setSent(suppliedVariables(values, listVariables(pinned)))
                  } catch (err) {
                    setFormError(err as Error)
                  }
                }}
              >
                <VariableFields
                  variables={pinned.variables}
                  lists={listVariables(pinned)}
                  values={values}
                  onChange={setValues}
                  idPrefix={`env-${env}`}
                />
                <button
                  type="submit"
                  className="btn"
                  disabled={needed.some((v) => (values[v.name] ?? '') === '')}
                >
                  Render with these values
                </button>
              </form>
              <ErrorBanner error={formError} title="Not rendered" />
            </>
          )}
          {rendered.isFetching && <Loading label="Rendering" />}
          <ErrorBanner error={rendered.error} />
          {rendered.data &&
            (rendered.data.renderedMessages ? (
              <RenderedMessages messages={rendered.data.renderedMessages} />
            ) : (
              <pre className="rendered">{rendered.data.renderedContent}</pre>
            ))}
        </div>
      )}
    </section>
  )
}

/** A version's template or messages as stored, variables unrendered. */
function StoredVersion({ version }: { version: PromptVersion }) {
  if (version.type !== 'chat' || !version.messages) return <pre className="rendered">{version.template}</pre>
  return (
    <RenderedMessages
      messages={version.messages.map((m) =>
        isPlaceholder(m) ? { role: 'placeholder', content: `{{${m.name}}}` } : m,
      )}
    />
  )
}
