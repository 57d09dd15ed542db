import { ENVIRONMENTS, type EnvironmentName, type Organization as Org } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useEffect, useId, useState } from 'react'
import {
  client,
  organizationsKey,
  session,
  useOrganization,
  useOrganizations,
  useSignedIn,
} from '../../session.ts'
import { ErrorBanner, Field, Loading, When } from '../../ui.tsx'
import { isManager, NotAllowed, settingsKeys, useMyRole } from './common.tsx'

/** The current organization's name; the caller's organizations (switch); a new one. */
export function Organization() {
  const { organizationId } = useSignedIn()
  return (
    <div className="settings-grid">
      {organizationId !== null && <OrganizationName organizationId={organizationId} />}
      {organizationId !== null && <ProtectedEnvironments organizationId={organizationId} />}
      <YourOrganizations current={organizationId} />
      <CreateOrganization />
    </div>
  )
}

function OrganizationName({ organizationId }: { organizationId: string }) {
  const queryClient = useQueryClient()
  const nameId = useId()
  const { role, pending: rolePending } = useMyRole()
  const org = useQuery({
    queryKey: settingsKeys.organization(organizationId),
    queryFn: () => client.api.getOrganization({ params: { id: organizationId } }),
  })
  const [name, setName] = useState('')
  const [saved, setSaved] = useState(false)
  useEffect(() => {
    if (org.data) setName(org.data.name)
  }, [org.data])
  const rename = useMutation({
    mutationFn: () => client.api.updateOrganization({ params: { id: organizationId }, body: { name } }),
    onSuccess: (updated) => {
      queryClient.setQueryData(settingsKeys.organization(organizationId), updated)
      queryClient.invalidateQueries({ queryKey: organizationsKey })
      setSaved(true)
    },
  })
  const allowed = isManager(role)
  return (
    <section className="panel" aria-labelledby="org-name-title">
      <h2 id="org-name-title">This organization</h2>
      {org.isPending && <Loading label="Loading the organization" />}
      <ErrorBanner error={org.error} />
      {org.data && (
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setSaved(false)
            rename.mutate()
          }}
        >
          <Field
            label="Organization name"
            id={nameId}
            required
            maxLength={200}
            value={name}
            disabled={!allowed}
            onChange={(e) => {
              setName(e.target.value)
              setSaved(false)
            }}
          >
            <span className="hint">
              Slug <span className="mono">{org.data.slug}</span> · created <When at={org.data.createdAt} />
            </span>
          </Field>
          {!rolePending && !allowed && <NotAllowed what="rename it" role={role} />}
          <ErrorBanner error={rename.error} title="Not renamed" />
          {saved && (
            <p className="banner banner-ok" role="status">
              Name saved.
            </p>
          )}
          <button
            type="submit"
            className="btn btn-primary"
            disabled={!allowed || rename.isPending || name.trim() === '' || name === org.data.name}
          >
            Save name
          </button>
        </form>
      )}
    </section>
  )
}

const ENV_HINTS: Record<EnvironmentName, string> = {
  preview: 'what a staging backend invokes with env=preview',
  production: 'what your live backend invokes with env=production',
}

/**
 * Protected environments (DESIGN section 15): shown to everyone; an OWNER/ADMIN changes them.
 * Promoting to a protected one then needs an OWNER/ADMIN, or an API key with the
 * environments:promote-protected scope; the service enforces it.
 */
function ProtectedEnvironments({ organizationId }: { organizationId: string }) {
  const queryClient = useQueryClient()
  const { role, pending: rolePending } = useMyRole()
  const org = useOrganization(organizationId)
  const [chosen, setChosen] = useState<EnvironmentName[] | null>(null)
  const [saved, setSaved] = useState(false)
  const current = org.data?.protectedEnvironments ?? []
  const value = chosen ?? current
  const save = useMutation({
    mutationFn: () =>
      client.api.updateOrganization({
        params: { id: organizationId },
        body: { protectedEnvironments: ENVIRONMENTS.filter((e) => value.includes(e)) },
      }),
    onSuccess: (updated) => {
      queryClient.setQueryData(settingsKeys.organization(organizationId), updated)
      setChosen(null)
      setSaved(true)
    },
  })
  const allowed = isManager(role)
  const changed = chosen !== null && [...chosen].sort().join() !== [...current].sort().join()
  return (
    <section className="panel" aria-labelledby="protected-title">
      <h2 id="protected-title">Protected environments</h2>
      <p className="hint">
        Promoting to a protected environment (or rolling it back) needs an OWNER or ADMIN, or an API key with
        the <span className="mono">environments:promote-protected</span> scope. Anyone else is refused.
      </p>
      {org.isPending && <Loading label="Loading the organization" />}
      <ErrorBanner error={org.error} />
      {org.data && (
        <form
          onSubmit={(e) => {
            e.preventDefault()
            setSaved(false)
            save.mutate()
          }}
        >
          <fieldset className="fieldset">
            <legend>Protect</legend>
            {ENVIRONMENTS.map((env) => (
              <label key={env} className="check protect-check">
                <input
                  type="checkbox"
                  checked={value.includes(env)}
                  disabled={!allowed}
                  onChange={(e) => {
                    setSaved(false)
                    setChosen(e.target.checked ? [...value, env] : value.filter((v) => v !== env))
                  }}
                />
                <span>
                  <strong>{env}</strong>
                  {current.includes(env) && <span className="badge badge-warn">protected</span>}{' '}
                  <span className="hint">{ENV_HINTS[env]}</span>
                </span>
              </label>
            ))}
          </fieldset>
          {!rolePending && !allowed && (
            <NotAllowed what="change which environments are protected" role={role} />
          )}
          <ErrorBanner error={save.error} title="Not saved" />
          {saved && (
            <p className="banner banner-ok" role="status">
              {current.length === 0
                ? 'Saved: no environment is protected.'
                : `Saved: ${current.join(' and ')} ${current.length === 1 ? 'is' : 'are'} protected.`}
            </p>
          )}
          <button type="submit" className="btn btn-primary" disabled={!allowed || save.isPending || !changed}>
            Save protected environments
          </button>
        </form>
      )}
    </section>
  )
}

function YourOrganizations({ current }: { current: string | null }) {
  const orgs = useOrganizations()
  const [error, setError] = useState<unknown>(null)
  const [busy, setBusy] = useState<string | null>(null)
  const list = orgs.data?.organizations ?? []
  return (
    <section className="panel" aria-labelledby="org-list-title">
      <h2 id="org-list-title">Your organizations</h2>
      {orgs.isPending && <Loading label="Loading your organizations" />}
      <ErrorBanner error={orgs.error ?? error} />
      {orgs.data && list.length === 0 && <p className="muted">You are in no organization yet.</p>}
      {list.length > 0 && (
        <ul className="org-list">
          {list.map((org: Org) => (
            <li key={org._id}>
              <span>
                <strong>{org.name}</strong> <span className="muted small mono">{org.slug}</span>
              </span>
              {org._id === current ? (
                <span className="badge badge-ok">current</span>
              ) : (
                <button
                  type="button"
                  className="btn btn-small"
                  disabled={busy !== null}
                  onClick={() => {
                    setError(null)
                    setBusy(org._id)
                    session
                      .switchOrganization(org._id)
                      .catch((err: unknown) => setError(err))
                      .finally(() => setBusy(null))
                  }}
                >
                  Switch to {org.name}
                </button>
              )}
            </li>
          ))}
        </ul>
      )}
    </section>
  )
}

function CreateOrganization() {
  const queryClient = useQueryClient()
  const nameId = useId()
  const [name, setName] = useState('')
  const [switchError, setSwitchError] = useState<unknown>(null)
  const create = useMutation({
    mutationFn: () => client.api.createOrganization({ body: { name: name.trim() } }),
    onSuccess: () => {
      setName('')
      queryClient.invalidateQueries({ queryKey: organizationsKey })
    },
  })
  const created = create.data
  return (
    <section className="panel" aria-labelledby="org-create-title">
      <h2 id="org-create-title">Create another organization</h2>
      <p className="hint">You become its OWNER. Prompts, keys and webhooks are separate in each.</p>
      <form
        className="inline-form"
        onSubmit={(e) => {
          e.preventDefault()
          create.mutate()
        }}
      >
        <Field
          label="New organization name"
          id={nameId}
          required
          maxLength={200}
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <button type="submit" className="btn btn-primary" disabled={create.isPending || name.trim() === ''}>
          Create organization
        </button>
      </form>
      <ErrorBanner error={create.error ?? switchError} title="Not created" />
      {created && (
        <div className="banner banner-ok" role="status">
          {created.name} was created.{' '}
          <button
            type="button"
            className="btn btn-small"
            onClick={() => {
              setSwitchError(null)
              session.switchOrganization(created._id).catch((err: unknown) => setSwitchError(err))
            }}
          >
            Switch to {created.name}
          </button>
        </div>
      )}
    </section>
  )
}
