import { type Connection, PROVIDERS, type Provider } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { parseTags } from '../../lib.ts'
import { client, useSignedIn } from '../../session.ts'
import { ConfirmDialog, Dialog, Empty, ErrorBanner, Field, Loading, When } from '../../ui.tsx'
import { isManager, NotAllowed, useMyRole } from './common.tsx'
import { useMutateOnce } from '../../once.ts'

/** The query key of the organization's model provider connections. */
const connectionsKey = (org: string | null) => ['connections', org] as const

/** The organization's model provider connections: this page's list, the Playground's and the experiment form's choice. */
export function useConnections() {
  const { organizationId } = useSignedIn()
  return useQuery({
    queryKey: connectionsKey(organizationId),
    queryFn: () => client.api.listConnections({ params: { id: organizationId ?? '' } }),
    enabled: organizationId !== null,
  })
}

const PROVIDER_LABEL: Record<Provider, string> = {
  openai: 'OpenAI',
  anthropic: 'Anthropic',
  'openai-compatible': 'OpenAI-compatible (Azure, Ollama, vLLM, OpenRouter…)',
}

/** Model provider connections: create, edit, delete (the key is shown only as its last 4 characters, and not at all when under 16). */
export function Connections() {
  const { role, pending, error } = useMyRole()
  if (pending) return <Loading label="Checking your role" />
  if (error) return <ErrorBanner error={error} />
  if (!isManager(role)) return <NotAllowed what="manage model provider connections" role={role} />
  return <ManageConnections />
}

function ManageConnections() {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const list = useConnections()
  const [notice, setNotice] = useState('')
  const connections = list.data?.connections ?? []
  return (
    <>
      <CreateConnection
        onCreated={(c) => {
          setNotice(`${c.name} was added (key …${c.keyHint}).`)
          queryClient.invalidateQueries({ queryKey: connectionsKey(organizationId) })
        }}
      />
      {notice && (
        <p className="banner banner-ok" role="status">
          {notice}
        </p>
      )}
      <section aria-labelledby="connections-title">
        <h2 id="connections-title">Connections</h2>
        {list.isPending && <Loading label="Loading the connections" />}
        <ErrorBanner error={list.error} />
        {list.data && connections.length === 0 && (
          <Empty title="No connections yet">
            <p>Add one above to run prompts on a model from the Playground.</p>
          </Empty>
        )}
        {connections.length > 0 && (
          <ul className="card-list">
            {connections.map((c) => (
              <ConnectionRow key={c._id} connection={c} />
            ))}
          </ul>
        )}
      </section>
    </>
  )
}

function ProviderChoice({ value, onChange }: { value: Provider; onChange: (p: Provider) => void }) {
  const id = useId()
  return (
    <div className="field">
      <label htmlFor={id}>Provider</label>
      <select id={id} value={value} onChange={(e) => onChange(e.target.value as Provider)}>
        {PROVIDERS.map((p) => (
          <option key={p} value={p}>
            {PROVIDER_LABEL[p]}
          </option>
        ))}
      </select>
    </div>
  )
}

function CreateConnection({ onCreated }: { onCreated: (c: Connection) => void }) {
  const { organizationId } = useSignedIn()
  const [name, setName] = useState('')
  const [provider, setProvider] = useState<Provider>('openai')
  const [baseUrl, setBaseUrl] = useState('')
  const [apiKey, setApiKey] = useState('')
  const [models, setModels] = useState('')
  const create = useMutation({
    mutationFn: () =>
      client.api.createConnection({
        params: { id: organizationId ?? '' },
        body: {
          name: name.trim(),
          provider,
          ...(baseUrl.trim() ? { baseUrl: baseUrl.trim() } : {}),
          apiKey: apiKey.trim(),
          models: parseTags(models),
        },
      }),
    onSuccess: (c) => {
      setName('')
      setBaseUrl('')
      setApiKey('')
      setModels('')
      onCreated(c)
    },
  })
  const createOnce = useMutateOnce(create)
  return (
    <section className="panel" aria-labelledby="create-connection-title">
      <h2 id="create-connection-title">Add a connection</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          createOnce()
        }}
      >
        <div className="grid-2">
          <Field
            label="Name"
            required
            maxLength={100}
            value={name}
            onChange={(e) => setName(e.target.value)}
          />
          <ProviderChoice value={provider} onChange={setProvider} />
          <Field
            label="Base URL"
            type="url"
            maxLength={2048}
            placeholder={
              provider === 'openai-compatible'
                ? 'https://my-gateway.example.com/v1'
                : 'The provider’s own API'
            }
            required={provider === 'openai-compatible'}
            value={baseUrl}
            onChange={(e) => setBaseUrl(e.target.value)}
          >
            <span className="hint">
              https and a public address, unless the host is in PROVIDER_ALLOWED_HOSTS.
            </span>
          </Field>
          <Field
            label="API key"
            type="password"
            autoComplete="off"
            required
            maxLength={4096}
            value={apiKey}
            onChange={(e) => setApiKey(e.target.value)}
          >
            <span className="hint">
              Encrypted at rest; afterwards at most its last 4 characters are shown.
            </span>
          </Field>
        </div>
        <Field
          label="Models"
          placeholder="gpt-4o-mini, gpt-4o"
          value={models}
          onChange={(e) => setModels(e.target.value)}
        >
          <span className="hint">Comma-separated; the first is the default when a prompt names none.</span>
        </Field>
        <ErrorBanner error={create.error} title="Not added" />
        <button type="submit" className="btn btn-primary" disabled={create.isPending}>
          Add connection
        </button>
      </form>
    </section>
  )
}

function ConnectionRow({ connection: c }: { connection: Connection }) {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const [editing, setEditing] = useState(false)
  const [deleting, setDeleting] = useState(false)
  const refresh = () => queryClient.invalidateQueries({ queryKey: connectionsKey(organizationId) })
  const remove = useMutation({
    mutationFn: () =>
      client.api.deleteConnection({ params: { id: organizationId ?? '', connectionId: c._id } }),
    onSuccess: () => {
      setDeleting(false)
      refresh()
    },
  })
  return (
    <li className="card">
      <div className="card-head">
        <strong>{c.name}</strong>
        <span className="badge">{c.provider}</span>
      </div>
      <p className="small muted wrap">
        {c.baseUrl ? <span className="mono">{c.baseUrl}</span> : 'The provider’s own API'} · key{' '}
        <span className="mono">…{c.keyHint}</span> · models:{' '}
        {c.models.length > 0 ? <span className="mono">{c.models.join(', ')}</span> : 'none listed'} · updated{' '}
        <When at={c.updatedAt} />
      </p>
      <div className="actions">
        <button type="button" className="btn btn-small" onClick={() => setEditing(true)}>
          Edit<span className="sr-only"> {c.name}</span>
        </button>
        <button
          type="button"
          className="btn btn-small"
          onClick={() => {
            remove.reset()
            setDeleting(true)
          }}
        >
          Delete<span className="sr-only"> {c.name}</span>
        </button>
      </div>
      <EditConnection connection={c} open={editing} onClose={() => setEditing(false)} onSaved={refresh} />
      <ConfirmDialog
        open={deleting}
        title="Delete this connection?"
        message={<p>{c.name} can no longer be used for runs; its past runs stay in the log.</p>}
        error={remove.error}
        errorTitle="Not deleted"
        confirmLabel="Delete connection"
        busy={remove.isPending}
        onConfirm={() => remove.mutate()}
        onCancel={() => setDeleting(false)}
      />
    </li>
  )
}

function EditConnection({
  connection: c,
  open,
  onClose,
  onSaved,
}: {
  connection: Connection
  open: boolean
  onClose: () => void
  onSaved: () => void
}) {
  const { organizationId } = useSignedIn()
  const [name, setName] = useState(c.name)
  const [baseUrl, setBaseUrl] = useState(c.baseUrl ?? '')
  const [apiKey, setApiKey] = useState('')
  const [models, setModels] = useState(c.models.join(', '))
  const save = useMutation({
    mutationFn: () =>
      client.api.updateConnection({
        params: { id: organizationId ?? '', connectionId: c._id },
        body: {
          name: name.trim(),
          baseUrl: baseUrl.trim() ? baseUrl.trim() : null,
          ...(apiKey.trim() ? { apiKey: apiKey.trim() } : {}),
          models: parseTags(models),
        },
      }),
    onSuccess: () => {
      setApiKey('')
      onSaved()
      onClose()
    },
  })
  return (
    <Dialog open={open} title={`Edit ${c.name}`} onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          save.mutate()
        }}
      >
        <Field label="Name" required maxLength={100} value={name} onChange={(e) => setName(e.target.value)} />
        <Field label="Base URL" type="url" value={baseUrl} onChange={(e) => setBaseUrl(e.target.value)} />
        <Field
          label="New API key"
          type="password"
          autoComplete="off"
          placeholder={`Unchanged (…${c.keyHint})`}
          value={apiKey}
          onChange={(e) => setApiKey(e.target.value)}
        />
        <Field label="Models" value={models} onChange={(e) => setModels(e.target.value)} />
        <ErrorBanner error={save.error} title="Not saved" />
        <div className="actions">
          <button type="button" className="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="btn btn-primary" disabled={save.isPending}>
            Save connection
          </button>
        </div>
      </form>
    </Dialog>
  )
}
