import type { Organization as Org } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useEffect, useId, useState } from 'react'
import { client, organizationsKey, session, useOrganizations, useSignedIn } from '../../session.ts'
import { ErrorBanner, Field, Loading, When } from '../../ui.tsx'
import { isManager, NotAllowed, settingsKeys, useMyRole } from './common.tsx'

/** The current organization's name; the caller's organizations (switch); a new one. */
export function Organization() {
  const { organizationId } = useSignedIn()
  return (
    <div className="settings-grid">
      {organizationId !== null && <OrganizationName organizationId={organizationId} />}
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
