import './part2.css'
import type { Prompt, PromptVersion } from '@pm/contracts'
import { useMutation } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { client, useOrganizations, useSignedIn } from '../session.ts'
import { Dialog, ErrorBanner, Field, Loading } from '../ui.tsx'
import { useOpenIn } from './settings/common.tsx'

/**
 * "Fork version N": a dialog asking the new prompt's name and the workspace to put it in
 * (any organization where the user is an ACTIVE member); then a way to open the copy.
 */
export function ForkVersion({ prompt, version }: { prompt: Prompt; version: PromptVersion }) {
  const [open, setOpen] = useState(false)
  return (
    <>
      <button type="button" className="btn btn-small" onClick={() => setOpen(true)}>
        Fork version {version.version}
      </button>
      <Dialog open={open} title={`Fork version ${version.version}`} onClose={() => setOpen(false)}>
        <ForkForm prompt={prompt} version={version} onCancel={() => setOpen(false)} />
      </Dialog>
    </>
  )
}

function ForkForm({
  prompt,
  version,
  onCancel,
}: {
  prompt: Prompt
  version: PromptVersion
  onCancel: () => void
}) {
  const { organizationId } = useSignedIn()
  const orgId = useId()
  const orgs = useOrganizations()
  const list = orgs.data?.organizations ?? []
  const [name, setName] = useState(`${prompt.name} (fork)`)
  const [target, setTarget] = useState(organizationId ?? '')
  const [openError, setOpenError] = useState<unknown>(null)
  const openIn = useOpenIn()
  const fork = useMutation({
    mutationFn: () =>
      client.api.forkVersion({
        params: { id: prompt._id, versionId: version._id },
        body: { name: name.trim(), ...(target ? { targetOrganizationId: target } : {}) },
      }),
  })
  const result = fork.data
  if (result) {
    const into = list.find((o) => o._id === result.prompt.organizationId)
    return (
      <>
        <p className="banner banner-ok" role="status">
          Forked into {into?.name ?? 'the organization'} as “{result.prompt.name}”, published there as version
          1.
        </p>
        <ErrorBanner error={openError} />
        <div className="actions">
          <button type="button" className="btn" onClick={onCancel}>
            Close
          </button>
          <button
            type="button"
            className="btn btn-primary"
            onClick={() =>
              openIn(result.prompt.organizationId, `/prompts/${result.prompt._id}`).catch((err: unknown) =>
                setOpenError(err),
              )
            }
          >
            Open the copy
          </button>
        </div>
      </>
    )
  }
  return (
    <form
      onSubmit={(e) => {
        e.preventDefault()
        fork.mutate()
      }}
    >
      <p className="small muted">
        A new private prompt with this version's template and variables; the original is unchanged.
      </p>
      <Field
        label="Name of the copy"
        required
        maxLength={200}
        value={name}
        onChange={(e) => setName(e.target.value)}
      />
      {orgs.isPending && <Loading label="Loading your organizations" />}
      <ErrorBanner error={orgs.error} />
      {list.length > 0 && (
        <div className="field">
          <label htmlFor={orgId}>Target organization</label>
          <select id={orgId} value={target} onChange={(e) => setTarget(e.target.value)}>
            {list.map((o) => (
              <option key={o._id} value={o._id}>
                {o.name}
                {o._id === organizationId ? ' (this one)' : ''}
              </option>
            ))}
          </select>
        </div>
      )}
      <ErrorBanner error={fork.error} title="Not forked" />
      <div className="actions">
        <button type="button" className="btn" onClick={onCancel}>
          Cancel
        </button>
        <button type="submit" className="btn btn-primary" disabled={fork.isPending || name.trim() === ''}>
          Fork
        </button>
      </div>
    </form>
  )
}
