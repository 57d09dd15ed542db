import {
  type CreatedWebhook,
  EVENT_TYPES,
  WEBHOOK_SECRET_OVERLAP_DEFAULT_SECONDS,
  WEBHOOK_SECRET_OVERLAP_MAX_SECONDS,
  type Webhook,
  type WebhookDelivery,
} from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { type ReactNode, useId, useState } from 'react'
import { Link } from 'react-router'
import { client, useSignedIn } from '../../session.ts'
import { ConfirmDialog, Dialog, Empty, ErrorBanner, Field, Loading, When } from '../../ui.tsx'
import { isManager, NotAllowed, SecretOnce, settingsKeys, useMyRole } from './common.tsx'
import { useMutateOnce } from '../../once.ts'

type EventType = (typeof EVENT_TYPES)[number]

/** Webhook subscriptions: create (secret shown once), edit, disable, delete, test send, rotate the secret. */
export function Webhooks() {
  const { role, pending, error } = useMyRole()
  if (pending) return <Loading label="Checking your role" />
  if (error) return <ErrorBanner error={error} />
  if (!isManager(role)) return <NotAllowed what="manage webhooks" role={role} />
  return <ManageWebhooks />
}

function ManageWebhooks() {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const hooks = useQuery({
    queryKey: settingsKeys.webhooks(organizationId),
    queryFn: () => client.api.listWebhooks({ params: { id: organizationId ?? '' } }),
  })
  const [created, setCreated] = useState<CreatedWebhook | null>(null)
  const list = hooks.data?.webhooks ?? []
  return (
    <>
      {created ? (
        <SigningSecret
          label={`Signing secret of ${created.webhook.url}`}
          created={created}
          onDone={() => setCreated(null)}
        />
      ) : (
        <CreateWebhook
          onCreated={(result) => {
            setCreated(result)
            queryClient.invalidateQueries({ queryKey: settingsKeys.webhooks(organizationId) })
          }}
        />
      )}
      <section aria-labelledby="hooks-title">
        <h2 id="hooks-title">Subscriptions</h2>
        {hooks.isPending && <Loading label="Loading the webhooks" />}
        <ErrorBanner error={hooks.error} />
        {hooks.data && list.length === 0 && (
          <Empty title="No webhooks yet">
            <p>Subscribe an HTTPS endpoint above to hear when a version is published.</p>
          </Empty>
        )}
        {list.length > 0 && (
          <ul className="card-list">
            {list.map((w) => (
              <WebhookRow key={w._id} webhook={w} />
            ))}
          </ul>
        )}
      </section>
    </>
  )
}

/**
 * A signing secret as the service answers it, once: at creation, and again (a new one) at each
 * rotation.
 */
function SigningSecret({
  label,
  created,
  onDone,
  children,
}: {
  label: string
  created: CreatedWebhook
  onDone: () => void
  children?: ReactNode
}) {
  return (
    <SecretOnce
      label={label}
      value={created.secret}
      kept="The service keeps it encrypted, to sign deliveries with it."
      onDone={onDone}
    >
      {children}
      <p className="small">
        Your receiver checks each delivery's signature with it (Standard Webhooks: the{' '}
        <code>webhook-signature</code> header).
      </p>
    </SecretOnce>
  )
}

function EventChoice({ events, onChange }: { events: EventType[]; onChange: (events: EventType[]) => void }) {
  return (
    <fieldset className="fieldset">
      <legend>Event kinds</legend>
      {EVENT_TYPES.map((t) => (
        <label key={t} className="check">
          <input
            type="checkbox"
            checked={events.includes(t)}
            onChange={(e) => onChange(e.target.checked ? [...events, t] : events.filter((x) => x !== t))}
          />
          <span className="mono">{t}</span>
        </label>
      ))}
    </fieldset>
  )
}

function CreateWebhook({ onCreated }: { onCreated: (created: CreatedWebhook) => void }) {
  const { organizationId } = useSignedIn()
  const urlId = useId()
  const [url, setUrl] = useState('')
  const [events, setEvents] = useState<EventType[]>([...EVENT_TYPES])
  const [active, setActive] = useState(true)
  const create = useMutation({
    mutationFn: () =>
      client.api.createWebhook({
        params: { id: organizationId ?? '' },
        body: { url: url.trim(), events, active },
      }),
    onSuccess: (result) => {
      setUrl('')
      onCreated(result)
    },
  })
  const createOnce = useMutateOnce(create)
  return (
    <section className="panel" aria-labelledby="create-hook-title">
      <h2 id="create-hook-title">Add a webhook</h2>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          createOnce()
        }}
      >
        <Field
          label="Endpoint URL"
          id={urlId}
          type="url"
          required
          maxLength={2048}
          placeholder="https://example.com/hooks/prompts"
          value={url}
          onChange={(e) => setUrl(e.target.value)}
        >
          <span className="hint">The service refuses addresses inside private networks.</span>
        </Field>
        <EventChoice events={events} onChange={setEvents} />
        <label className="check">
          <input type="checkbox" checked={active} onChange={(e) => setActive(e.target.checked)} />
          Active (deliver events now)
        </label>
        <ErrorBanner error={create.error} title="Not subscribed" />
        <button type="submit" className="btn btn-primary" disabled={create.isPending || events.length === 0}>
          Create webhook
        </button>
      </form>
    </section>
  )
}

/** One line of a delivery's outcome, for the test-send notice. */
export function deliveryOutcome(d: WebhookDelivery): string {
  const last = d.attempts.at(-1)
  if (d.status === 'DELIVERED') return `delivered (HTTP ${last?.statusCode ?? d.lastStatusCode ?? '?'})`
  const why = last?.statusCode ? `HTTP ${last.statusCode}` : (last?.error ?? d.lastError ?? 'no answer')
  return `${d.status.toLowerCase()}: ${why}`
}

function WebhookRow({ webhook: w }: { webhook: Webhook }) {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const [editing, setEditing] = useState(false)
  const [deleting, setDeleting] = useState(false)
  const [rotating, setRotating] = useState(false)
  const [keepFor, setKeepFor] = useState(WEBHOOK_SECRET_OVERLAP_DEFAULT_SECONDS)
  /** The new secret, shown in this row until dismissed. */
  const [rotated, setRotated] = useState<CreatedWebhook | null>(null)
  const refresh = () => {
    queryClient.invalidateQueries({ queryKey: settingsKeys.webhooks(organizationId) })
    queryClient.invalidateQueries({ queryKey: settingsKeys.deliveries(organizationId, w._id) })
  }
  const params = { id: organizationId ?? '', webhookId: w._id }
  const toggle = useMutation({
    mutationFn: () => client.api.updateWebhook({ params, body: { active: !w.active } }),
    onSuccess: refresh,
  })
  const test = useMutation({
    mutationFn: () => client.api.testWebhook({ params }),
    onSuccess: refresh,
  })
  const remove = useMutation({
    mutationFn: () => client.api.deleteWebhook({ params }),
    onSuccess: () => {
      setDeleting(false)
      refresh()
    },
  })
  const rotate = useMutation({
    mutationFn: (keepPreviousForSeconds: number) =>
      client.api.rotateWebhookSecret({ params, body: { keepPreviousForSeconds } }),
    onSuccess: (result) => {
      setRotating(false)
      setRotated(result)
      refresh()
    },
  })
  return (
    <li className="card">
      <div className="card-head">
        <span className="mono wrap">{w.url}</span>
        <span className={`badge ${w.active ? 'badge-ok' : 'badge-warn'}`}>
          {w.active ? 'active' : 'disabled'}
        </span>
      </div>
      <p className="small muted">
        Events: {w.events.join(', ')} · created <When at={w.createdAt} />
      </p>
      {w.previousSecretExpiresAt && (
        <p className="small muted">
          Previous secret also signs until <When at={w.previousSecretExpiresAt} />
        </p>
      )}
      {w.disabledAt && (
        <p className="banner banner-warn small">
          Turned off by the service <When at={w.disabledAt} />: {w.disabledReason}
        </p>
      )}
      <div className="actions">
        <Link className="btn btn-small" to={`/settings/webhooks/${w._id}`}>
          Deliveries<span className="sr-only"> of {w.url}</span>
        </Link>
        <button
          type="button"
          className="btn btn-small"
          disabled={test.isPending}
          onClick={() => test.mutate()}
        >
          {test.isPending ? 'Sending…' : 'Send test'}
        </button>
        <button type="button" className="btn btn-small" onClick={() => setEditing(true)}>
          Edit
        </button>
        <button
          type="button"
          className="btn btn-small"
          disabled={rotate.isPending}
          onClick={() => {
            rotate.reset()
            setKeepFor(WEBHOOK_SECRET_OVERLAP_DEFAULT_SECONDS)
            setRotating(true)
          }}
        >
          Rotate secret
        </button>
        <button
          type="button"
          className="btn btn-small"
          disabled={toggle.isPending}
          onClick={() => toggle.mutate()}
        >
          {w.active ? 'Disable' : 'Enable'}
        </button>
        <button
          type="button"
          className="btn btn-small"
          onClick={() => {
            remove.reset()
            setDeleting(true)
          }}
        >
          Delete
        </button>
      </div>
      <ErrorBanner error={toggle.error ?? test.error} />
      {test.data && (
        <p
          className={`banner small ${test.data.status === 'DELIVERED' ? 'banner-ok' : 'banner-warn'}`}
          role="status"
        >
          Test event {deliveryOutcome(test.data)}.
        </p>
      )}
      {rotated && (
        <SigningSecret
          label={`New signing secret of ${rotated.webhook.url}`}
          created={rotated}
          onDone={() => setRotated(null)}
        >
          <p className="small">
            Deliveries are signed with it from now on.{' '}
            {rotated.webhook.previousSecretExpiresAt ? (
              <>
                The previous secret also signs them until{' '}
                <When at={rotated.webhook.previousSecretExpiresAt} />: switch your receiver before then.
              </>
            ) : (
              'The previous secret no longer signs them.'
            )}
          </p>
        </SigningSecret>
      )}
      <EditWebhook webhook={w} open={editing} onClose={() => setEditing(false)} onSaved={refresh} />
      <ConfirmDialog
        open={deleting}
        title="Delete this webhook?"
        message={
          <p>
            <span className="mono wrap">{w.url}</span> stops receiving events, and its delivery log is deleted
            with it.
          </p>
        }
        error={remove.error}
        errorTitle="Not deleted"
        confirmLabel="Delete webhook"
        busy={remove.isPending}
        onConfirm={() => remove.mutate()}
        onCancel={() => setDeleting(false)}
      />
      <ConfirmDialog
        open={rotating}
        title="Rotate the signing secret?"
        message={<RotateChoice url={w.url} keepFor={keepFor} onChange={setKeepFor} />}
        error={rotate.error}
        errorTitle="Not rotated"
        confirmLabel={rotate.isPending ? 'Rotating…' : 'Rotate secret'}
        busy={rotate.isPending}
        onConfirm={() => rotate.mutate(keepFor)}
        onCancel={() => setRotating(false)}
      />
    </li>
  )
}

/** How long a rotated-out secret keeps signing beside the new one (the choices offered). */
const KEEP_PREVIOUS_CHOICES: readonly { seconds: number; label: string }[] = [
  { seconds: 3600, label: '1 hour' },
  { seconds: WEBHOOK_SECRET_OVERLAP_DEFAULT_SECONDS, label: '24 hours (default)' },
  { seconds: WEBHOOK_SECRET_OVERLAP_MAX_SECONDS, label: '7 days' },
  { seconds: 0, label: 'Stop now (leaked secret)' },
]

function RotateChoice({
  url,
  keepFor,
  onChange,
}: {
  url: string
  keepFor: number
  onChange: (seconds: number) => void
}) {
  const name = useId()
  return (
    <>
      <p>
        Deliveries to <span className="mono wrap">{url}</span> get a new signing secret, shown once. Until
        your receiver has it, the old one can keep signing beside it (each delivery then carries both
        signatures).
      </p>
      <fieldset className="fieldset">
        <legend>The old secret keeps signing for</legend>
        {KEEP_PREVIOUS_CHOICES.map((c) => (
          <label key={c.seconds} className="check">
            <input
              type="radio"
              name={name}
              checked={keepFor === c.seconds}
              onChange={() => onChange(c.seconds)}
            />
            {c.label}
          </label>
        ))}
      </fieldset>
      {keepFor === 0 && (
        <p className="hint hint-warn">
          Deliveries stop carrying the old signature at once: your receiver refuses them until it has the new
          secret.
        </p>
      )}
    </>
  )
}

function EditWebhook({
  webhook,
  open,
  onClose,
  onSaved,
}: {
  webhook: Webhook
  open: boolean
  onClose: () => void
  onSaved: () => void
}) {
  const { organizationId } = useSignedIn()
  const urlId = useId()
  const [url, setUrl] = useState(webhook.url)
  const [events, setEvents] = useState<EventType[]>(webhook.events as EventType[])
  const [active, setActive] = useState(webhook.active)
  const save = useMutation({
    mutationFn: () =>
      client.api.updateWebhook({
        params: { id: organizationId ?? '', webhookId: webhook._id },
        body: { url: url.trim(), events, active },
      }),
    onSuccess: () => {
      onSaved()
      onClose()
    },
  })
  return (
    <Dialog open={open} title="Edit webhook" onClose={onClose}>
      <form
        onSubmit={(e) => {
          e.preventDefault()
          save.mutate()
        }}
      >
        <div className="field">
          <label htmlFor={urlId}>Endpoint URL</label>
          <input id={urlId} type="url" required value={url} onChange={(e) => setUrl(e.target.value)} />
        </div>
        <EventChoice events={events} onChange={setEvents} />
        <label className="check">
          <input type="checkbox" checked={active} onChange={(e) => setActive(e.target.checked)} />
          Active
        </label>
        <ErrorBanner error={save.error} title="Not saved" />
        <div className="actions">
          <button type="button" className="btn" onClick={onClose}>
            Cancel
          </button>
          <button type="submit" className="btn btn-primary" disabled={save.isPending || events.length === 0}>
            Save webhook
          </button>
        </div>
      </form>
    </Dialog>
  )
}
