import { ENVIRONMENTS, type EnvironmentName, type Pin, type PromptVersion } from '@pm/contracts'
import { useQuery } from '@tanstack/react-query'
import { useState } from 'react'
import { Link } from 'react-router'
import { isPlaceholder, RenderedMessages } from '../chat.tsx'
import { usePeople } from '../people.ts'
import { keys, usePrompt, useVersions } from '../prompt.ts'
import { describeTarget, splitServedBy } from '../release.ts'
import { client, useOrganization, useSignedIn } from '../session.ts'
import { Empty, ErrorBanner, Loading, When } from '../ui.tsx'
import { listVariables, suppliedVariables, VariableFields } from '../variables.tsx'
import { EnvironmentHistory, SplitEditor, SplitVariants, usePromote } from './EnvironmentRelease.tsx'

const TITLES: Record<EnvironmentName, string> = { preview: 'Preview', production: 'Production' }
/** While a split stands, its invocation counts (flushed by render every few seconds) are asked again. */
const SPLIT_REFRESH_MS = 5_000

/**
 * The preview and production pins, promotion (one version or a split), each environment's
 * history with rollback, and what an invoke with `env` returns now.
 */
export function Environments() {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const versions = useVersions(prompt._id)
  const org = useOrganization(organizationId)
  const pins = useQuery({
    queryKey: keys.environments(organizationId, prompt._id),
    queryFn: () => client.api.getEnvironments({ params: { id: prompt._id } }),
    refetchInterval: (q) =>
      q.state.data?.preview?.split || q.state.data?.production?.split ? SPLIT_REFRESH_MS : false,
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
        <EnvironmentCard
          key={env}
          env={env}
          pin={pins.data?.[env] ?? null}
          isProtected={org.data?.protectedEnvironments.includes(env) ?? false}
        />
      ))}
    </div>
  )
}

function EnvironmentCard({
  env,
  pin,
  isProtected,
}: {
  env: EnvironmentName
  pin: Pin | null
  isProtected: boolean
}) {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const { nameOf, role } = usePeople()
  const versions = useVersions(prompt._id)
  const list = versions.data ?? []
  const [choice, setChoice] = useState(list[0]?._id ?? '')
  const [editingSplit, setEditingSplit] = useState(false)
  const [done, setDone] = useState('')
  const promote = usePromote(env)
  const title = TITLES[env]
  const lower = title.toLowerCase()
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
    queryKey: ['env-invoke', organizationId, prompt._id, env, pin?.versionId, pin?.split?.id, sent],
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
  const mayPromote = !isProtected || role === 'OWNER' || role === 'ADMIN'
  return (
    <section className="panel env" aria-labelledby={`env-${env}`}>
      <div className="env-head">
        <h2 id={`env-${env}`}>{title}</h2>
        {isProtected && (
          <span
            className="badge badge-warn"
            title="Only an OWNER or ADMIN, or a key with the scope, may promote"
          >
            protected
          </span>
        )}
      </div>
      {pin ? (
        <p>
          <strong>{pin.split ? `Split: ${describeTarget(pin)}` : `Version ${pin.version}`}</strong>
          <span className="muted small">
            {' '}
            · promoted <When at={pin.promotedAt} /> by {nameOf(pin.promotedBy)}
          </span>
        </p>
      ) : (
        <p className="muted">No version pinned: invoke with env={env} answers ENVIRONMENT_NOT_SET.</p>
      )}
      {isProtected && !mayPromote && role !== undefined && (
        <div className="banner banner-warn small" role="note">
          {title} is protected: only an OWNER or ADMIN may promote to it or roll it back (your role here is{' '}
          {role}
          ). <Link to="/settings">Organization settings</Link>
        </div>
      )}
      {pin?.split && <SplitVariants split={pin.split} label={`Split of ${lower}`} />}
      <div className="env-grid">
        <div className="env-main">
          <form
            className="inline-form"
            onSubmit={(e) => {
              e.preventDefault()
              setDone('')
              const ended = pin?.split !== undefined
              promote.mutate(
                { versionId: choice },
                {
                  onSuccess: (saved) =>
                    setDone(
                      `Promoted version ${saved.version} to ${lower}.${ended ? ' The split has ended: every invoke gets this version.' : ''}`,
                    ),
                },
              )
            }}
          >
            <div className="field">
              <label htmlFor={selectId}>Version for {lower}</label>
              <select id={selectId} value={choice} onChange={(e) => setChoice(e.target.value)}>
                {list.map((v) => (
                  <option key={v._id} value={v._id}>
                    Version {v.version}
                  </option>
                ))}
              </select>
            </div>
            <button type="submit" className="btn btn-primary" disabled={promote.isPending || !choice}>
              Promote to {lower}
            </button>
          </form>
          {pin?.split && (
            <div className="hint">
              Promoting one version ends the split: every invoke then gets that version.
            </div>
          )}
          <ErrorBanner error={promote.error} title="Not promoted" />
          {done && (
            <div className="banner banner-ok" role="status">
              {done}
            </div>
          )}
          {editingSplit ? (
            <SplitEditor
              env={env}
              pin={pin}
              versions={list}
              onDone={(message) => {
                setEditingSplit(false)
                setDone(message)
              }}
            />
          ) : list.length >= 2 ? (
            <button
              type="button"
              className="btn"
              onClick={() => {
                setDone('')
                setEditingSplit(true)
              }}
            >
              {pin?.split ? 'Change the split' : `Split ${lower} across versions`}
            </button>
          ) : (
            <div className="hint">Publish a second version to split {lower} across versions.</div>
          )}
          {pinned && (
            <div className="env-invoke">
              <h3 className="small">
                What <code>invoke?env={env}</code> returns
              </h3>
              {pin?.split && <div className="hint">{splitServedBy(rendered.data?.version)}</div>}
              {needed.length === 0 ? (
                <div className="hint">With no variables: defaults apply.</div>
              ) : (
                <>
                  <p className="hint">
                    A backend must send {needed.map((v) => v.name).join(', ')} (required, no default). Version{' '}
                    {pinned.version} as stored:
                  </p>
                  <StoredVersion version={pinned} />
                  <form
                    className="env-values"
                    aria-label={`Values for ${lower}`}
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
        </div>
        <EnvironmentHistory env={env} title={title} pin={pin} onRolledBack={setDone} />
      </div>
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
