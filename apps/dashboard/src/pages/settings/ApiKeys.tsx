import { type ApiKey, type CreatedApiKey, SCOPES, type Scope } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { client, useSignedIn } from '../../session.ts'
import {
  ActionsHeader,
  ConfirmDialog,
  Dialog,
  Empty,
  ErrorBanner,
  Field,
  Loading,
  TagList,
  When,
} from '../../ui.tsx'
import { isManager, NotAllowed, SecretOnce, settingsKeys, useMyRole } from './common.tsx'
import { useMutateOnce } from '../../once.ts'

const SCOPE_HINTS: Record<Scope, string> = {
  'prompts:read': 'read prompts and versions, invoke, inject',
  'prompts:write': 'create, update and delete prompts',
  'organization:read': 'read the organization and its members',
  'organization:write': 'change settings, members, webhooks and model connections',
  'environments:promote-protected': 'promote to protected environments (e.g. production)',
  'runs:write': 'run prompts on a model (the playground, the run API)',
}

/** API keys: the list (never the key itself), minting one (shown once), renaming, revoking. */
export function ApiKeys() {
  const { role, pending, error } = useMyRole()
  if (pending) return <Loading label="Checking your role" />
  if (error) return <ErrorBanner error={error} />
  if (!isManager(role)) return <NotAllowed what="see, create, rename or revoke API keys" role={role} />
  return <ManageKeys />
}

function ManageKeys() {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const keys = useQuery({
    queryKey: settingsKeys.apiKeys(organizationId),
    queryFn: () => client.api.listApiKeys({ params: { id: organizationId ?? '' } }),
  })
  const [created, setCreated] = useState<CreatedApiKey | null>(null)
  const [revoking, setRevoking] = useState<ApiKey | null>(null)
  const [renaming, setRenaming] = useState<ApiKey | null>(null)
  const revoke = useMutation({
    mutationFn: (key: ApiKey) =>
      client.api.revokeApiKey({ params: { id: organizationId ?? '', keyId: key._id } }),
    onSuccess: () => {
      setRevoking(null)
      queryClient.invalidateQueries({ queryKey: settingsKeys.apiKeys(organizationId) })
    },
  })
  const list = [...(keys.data?.apiKeys ?? [])].sort((a, b) => b.createdAt.localeCompare(a.createdAt))
  return (
    <>
      {created ? (
        <SecretOnce
          label={`New key “${created.apiKey.name}”`}
          value={created.key}
          onDone={() => setCreated(null)}
        >
          <p className="small">
            Send it as <code>Authorization: Bearer {created.apiKey.prefix}…</code> from your backend.
          </p>
        </SecretOnce>
      ) : (
        <CreateKey
          onCreated={(result) => {
            setCreated(result)
            queryClient.invalidateQueries({ queryKey: settingsKeys.apiKeys(organizationId) })
          }}
        />
      )}
      <section aria-labelledby="keys-title">
        <h2 id="keys-title">Keys</h2>
        {keys.isPending && <Loading label="Loading the keys" />}
        <ErrorBanner error={keys.error} />
        {keys.data && list.length === 0 && (
          <Empty title="No API keys yet">
            <p>Create one above for a script or backend that calls the service.</p>
          </Empty>
        )}
        {list.length > 0 && (
          <table className="table rtable" aria-label="API keys">
            <thead>
              <tr>
                <th scope="col">Name</th>
                <th scope="col">Prefix</th>
                <th scope="col">Scopes</th>
                <th scope="col">Expires</th>
                <th scope="col">Rate limit</th>
                <th scope="col">Last used</th>
                <th scope="col">State</th>
                <ActionsHeader />
              </tr>
            </thead>
            <tbody>
              {list.map((k) => {
                const expired = k.expiresAt !== null && Date.parse(k.expiresAt) <= Date.now()
                return (
                  <tr key={k._id} className={k.revokedAt ? 'row-off' : ''}>
                    <td data-label="Name">
                      <strong>{k.name}</strong>
                    </td>
                    <td data-label="Prefix" className="mono">
                      {k.prefix}…
                    </td>
                    <td data-label="Scopes">
                      <TagList label="Scopes" tags={k.scopes} />
                    </td>
                    <td data-label="Expires">{k.expiresAt ? <When at={k.expiresAt} /> : 'never'}</td>
                    <td data-label="Rate limit">
                      {k.rateLimit
                        ? `${k.rateLimit.points} per ${k.rateLimit.durationSeconds} s`
                        : 'service default'}
                    </td>
                    <td data-label="Last used">{k.lastUsedAt ? <When at={k.lastUsedAt} /> : 'never'}</td>
                    <td data-label="State">
                      {k.revokedAt ? (
                        <span className="badge badge-warn">
                          revoked <When at={k.revokedAt} />
                        </span>
                      ) : expired ? (
                        <span className="badge badge-warn">expired</span>
                      ) : (
                        <span className="badge badge-ok">active</span>
                      )}
                    </td>
                    <td data-label="">
                      <div className="actions">
                        <button type="button" className="btn btn-small" onClick={() => setRenaming(k)}>
                          Rename {k.name}
                        </button>
                        {!k.revokedAt && (
                          <button
                            type="button"
                            className="btn btn-small"
                            onClick={() => {
                              revoke.reset()
                              setRevoking(k)
                            }}
                          >
                            Revoke {k.name}
                          </button>
                        )}
                      </div>
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        )}
      </section>
      <ConfirmDialog
        open={revoking !== null}
        title={`Revoke “${revoking?.name ?? ''}”?`}
        message={
          <p>
            Every request made with <span className="mono">{revoking?.prefix}…</span> is refused from now on
            (401). This cannot be undone: a script that uses it needs a new key.
          </p>
        }
        error={revoke.error}
        errorTitle="Not revoked"
        confirmLabel="Revoke key"
        busy={revoke.isPending}
        onConfirm={() => revoking && revoke.mutate(revoking)}
        onCancel={() => setRevoking(null)}
      />
      {renaming && (
        <RenameKey
          apiKey={renaming}
          onClose={() => setRenaming(null)}
          onSaved={() => queryClient.invalidateQueries({ queryKey: settingsKeys.apiKeys(organizationId) })}
        />
      )}
    </>
  )
}

/** A key's new name: the key, its scopes and limits stay. */
function RenameKey({
  apiKey,
  onClose,
  onSaved,
}: {
  apiKey: ApiKey
  onClose: () => void
  onSaved: () => void
}) {
  const { organizationId } = useSignedIn()
  const nameId = useId()
  const [name, setName] = useState(apiKey.name)
  const save = useMutation({
    mutationFn: () =>
      client.api.renameApiKey({
        params: { id: organizationId ?? '', keyId: apiKey._id },
        body: { name: name.trim() },
      }),
    onSuccess: () => {
      onSaved()
      onClose()
    },
  })
  return (
    <Dialog open title={`Rename “${apiKey.name}”`} onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          save.mutate()
        }}
      >
        <div className="field">
          <label htmlFor={nameId}>Name</label>
          <input
            id={nameId}
            required
            maxLength={100}
            value={name}
            onChange={(e) => setName(e.target.value)}
          />
          <p className="hint">
            Only the name changes: the key <span className="mono">{apiKey.prefix}…</span>, its scopes and
            limits stay.
          </p>
        </div>
        <ErrorBanner error={save.error} title="Not renamed" />
        <div className="actions">
          <button type="button" className="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="btn btn-primary" disabled={save.isPending || name.trim() === ''}>
            {save.isPending ? 'Saving…' : 'Save name'}
          </button>
        </div>
      </form>
    </Dialog>
  )
}

function CreateKey({ onCreated }: { onCreated: (created: CreatedApiKey) => void }) {
  const { organizationId } = useSignedIn()
  const [name, setName] = useState('')
  const [scopes, setScopes] = useState<Scope[]>(['prompts:read'])
  const [expires, setExpires] = useState('')
  const [points, setPoints] = useState('')
  const [windowSeconds, setWindowSeconds] = useState('60')
  const create = useMutation({
    mutationFn: () =>
      client.api.createApiKey({
        params: { id: organizationId ?? '' },
        body: {
          name: name.trim(),
          scopes,
          // The end of the chosen day, in the browser's time zone.
          ...(expires ? { expiresAt: new Date(`${expires}T23:59:59`).toISOString() } : {}),
          ...(points
            ? { rateLimit: { points: Number(points), durationSeconds: Number(windowSeconds) } }
            : {}),
        },
      }),
    onSuccess: (result) => {
      setName('')
      setExpires('')
      setPoints('')
      onCreated(result)
    },
  })
  const createOnce = useMutateOnce(create)
  const today = new Date().toISOString().slice(0, 10)
  return (
    <section className="panel" aria-labelledby="create-key-title">
      <h2 id="create-key-title">Create an API key</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          createOnce()
        }}
      >
        <Field
          label="Key name"
          required
          maxLength={100}
          placeholder="billing-backend"
          value={name}
          onChange={(e) => setName(e.target.value)}
        />
        <fieldset className="fieldset">
          <legend>Scopes</legend>
          {SCOPES.map((s) => (
            <label key={s} className="check">
              <input
                type="checkbox"
                checked={scopes.includes(s)}
                onChange={(e) => setScopes(e.target.checked ? [...scopes, s] : scopes.filter((x) => x !== s))}
              />
              <span className="mono">{s}</span> <span className="hint">{SCOPE_HINTS[s]}</span>
            </label>
          ))}
        </fieldset>
        <div className="grid-3">
          <Field
            label="Expires on (optional)"
            type="date"
            min={today}
            value={expires}
            onChange={(e) => setExpires(e.target.value)}
          />
          <Field
            label="Requests per window (optional)"
            type="number"
            min={1}
            max={1_000_000}
            placeholder="service default"
            value={points}
            onChange={(e) => setPoints(e.target.value)}
          />
          <Field
            label="Window in seconds"
            type="number"
            min={1}
            max={86_400}
            required={points !== ''}
            disabled={points === ''}
            value={windowSeconds}
            onChange={(e) => setWindowSeconds(e.target.value)}
          />
        </div>
        {scopes.length === 0 && <p className="hint hint-warn">Choose at least one scope.</p>}
        <ErrorBanner error={create.error} title="No key was created" />
        <button
          type="submit"
          className="btn btn-primary"
          disabled={create.isPending || scopes.length === 0 || name.trim() === ''}
        >
          Create key
        </button>
      </form>
    </section>
  )
}
