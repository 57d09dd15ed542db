import { DELIVERY_STATUSES, type DeliveryStatus, type WebhookDelivery } from '@pm/contracts'
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { Link, useParams } from 'react-router'
import { client, useSignedIn } from '../../session.ts'
import { Empty, ErrorBanner, Loading, Pager, When } from '../../ui.tsx'
import { deliveryOutcome } from './Webhooks.tsx'
import { isManager, NotAllowed, settingsKeys, useMyRole } from './common.tsx'

const PAGE_SIZE = 20
/** Attempts are seconds apart: their times show the seconds. */
const attemptTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' })

/** One subscription's deliveries, each with its attempts; redeliver; a test send. */
export function WebhookDeliveries() {
  const { role, pending, error } = useMyRole()
  if (pending) return <Loading label="Checking your role" />
  if (error) return <ErrorBanner error={error} />
  if (!isManager(role)) return <NotAllowed what="see webhook deliveries" role={role} />
  return <DeliveryLog />
}

function DeliveryLog() {
  const { organizationId } = useSignedIn()
  const webhookId = useParams().webhookId ?? ''
  const queryClient = useQueryClient()
  const filterId = useId()
  const [status, setStatus] = useState<DeliveryStatus | ''>('')
  const [page, setPage] = useState(1)
  const params = { id: organizationId ?? '', webhookId }
  const hook = useQuery({
    queryKey: settingsKeys.webhook(organizationId, webhookId),
    queryFn: () => client.api.getWebhook({ params }),
  })
  const deliveries = useQuery({
    queryKey: [...settingsKeys.deliveries(organizationId, webhookId), { status, page }],
    queryFn: () =>
      client.api.listWebhookDeliveries({
        params,
        query: { page, limit: PAGE_SIZE, ...(status ? { status } : {}) },
      }),
    placeholderData: keepPreviousData,
    // While something is still being tried, the log follows it; otherwise new deliveries (an
    // event published after the page loaded) show within 5 s, while the tab is visible. Not
    // after a failure (the webhook deleted meanwhile, the role gone): Refresh asks again.
    refetchInterval: (q) =>
      q.state.status === 'error'
        ? false
        : q.state.data?.deliveries.some((d) => d.status === 'PENDING')
          ? 2000
          : 5000,
  })
  const refresh = () =>
    queryClient.invalidateQueries({ queryKey: settingsKeys.deliveries(organizationId, webhookId) })
  const test = useMutation({ mutationFn: () => client.api.testWebhook({ params }), onSuccess: refresh })

  if (hook.isPending) return <Loading label="Loading the webhook" />
  if (hook.error) return <ErrorBanner error={hook.error} title="The webhook could not be loaded" />
  const data = deliveries.data
  return (
    <>
      <p>
        <Link to="/settings/webhooks">← All webhooks</Link>
      </p>
      <div className="page-head">
        <div>
          <h2 className="wrap">
            Deliveries to <span className="mono">{hook.data.url}</span>
          </h2>
          <p className="small muted">
            {hook.data.active ? 'Active' : 'Disabled'} · events {hook.data.events.join(', ')}
          </p>
        </div>
        <div className="actions">
          <button type="button" className="btn" onClick={refresh}>
            Refresh
          </button>
          <button
            type="button"
            className="btn btn-primary"
            disabled={test.isPending}
            onClick={() => test.mutate()}
          >
            {test.isPending ? 'Sending…' : 'Send test'}
          </button>
        </div>
      </div>
      <ErrorBanner error={test.error} title="No test was sent" />
      {test.data && (
        <p
          className={`banner ${test.data.status === 'DELIVERED' ? 'banner-ok' : 'banner-warn'}`}
          role="status"
        >
          Test event {deliveryOutcome(test.data)}.
        </p>
      )}
      <div className="field narrow">
        <label htmlFor={filterId}>Status</label>
        <select
          id={filterId}
          value={status}
          onChange={(e) => {
            setStatus(e.target.value as DeliveryStatus | '')
            setPage(1)
          }}
        >
          <option value="">All</option>
          {DELIVERY_STATUSES.map((s) => (
            <option key={s} value={s}>
              {s}
            </option>
          ))}
        </select>
      </div>
      {deliveries.isPending && <Loading label="Loading the deliveries" />}
      <ErrorBanner error={deliveries.error} />
      {data && data.deliveries.length === 0 && (
        <Empty title="No deliveries yet">
          <p>Publish a version, or send a test, and the attempts show here.</p>
        </Empty>
      )}
      {data && data.deliveries.length > 0 && (
        <>
          <ol className="card-list" aria-label="Deliveries" aria-busy={deliveries.isFetching}>
            {data.deliveries.map((d) => (
              <Delivery key={d._id} delivery={d} active={hook.data.active} onChanged={refresh} />
            ))}
          </ol>
          <Pager page={page} pagination={data.pagination} onPage={setPage} />
        </>
      )}
    </>
  )
}

const STATUS_BADGE: Record<DeliveryStatus, string> = {
  PENDING: 'badge-warn',
  DELIVERED: 'badge-ok',
  FAILED: 'badge-error',
}

function Delivery({
  delivery: d,
  active,
  onChanged,
}: {
  delivery: WebhookDelivery
  active: boolean
  onChanged: () => void
}) {
  const { organizationId } = useSignedIn()
  const redeliver = useMutation({
    mutationFn: () =>
      client.api.redeliverWebhookDelivery({
        params: { id: organizationId ?? '', webhookId: d.webhookId, deliveryId: d._id },
      }),
    onSuccess: onChanged,
  })
  return (
    <li className="card delivery">
      <div className="card-head">
        <span>
          <strong className="mono">{d.eventType}</strong>{' '}
          <span className={`badge ${STATUS_BADGE[d.status]}`}>{d.status}</span>
        </span>
        <span className="small muted">
          <When at={d.createdAt} />
        </span>
      </div>
      <p className="small muted">
        Event <span className="mono">{d.eventId}</span> · {d.attemptCount} attempt
        {d.attemptCount === 1 ? '' : 's'}
        {d.nextAttemptAt && (
          <>
            {' '}
            · next try <When at={d.nextAttemptAt} />
          </>
        )}
        {d.deliveredAt && (
          <>
            {' '}
            · delivered <When at={d.deliveredAt} />
          </>
        )}
      </p>
      {d.attempts.length > 0 && (
        <table className="table attempts" aria-label={`Attempts of delivery ${d._id}`}>
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">When</th>
              <th scope="col">Response</th>
              <th scope="col">Duration</th>
            </tr>
          </thead>
          <tbody>
            {d.attempts.map((a) => (
              <tr key={a._id}>
                <td>{a.number}</td>
                <td>
                  <time dateTime={a.attemptedAt}>{attemptTime.format(new Date(a.attemptedAt))}</time>
                </td>
                <td className="wrap">
                  {a.statusCode !== null ? (
                    <span className={a.success ? 'added-text' : 'removed-text'}>HTTP {a.statusCode}</span>
                  ) : (
                    <span className="removed-text">{a.error ?? 'no answer'}</span>
                  )}
                </td>
                <td>{a.durationMs} ms</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      <div className="actions">
        <button
          type="button"
          className="btn btn-small"
          disabled={redeliver.isPending || d.status === 'PENDING' || !active}
          title={!active ? 'Enable the webhook to redeliver' : undefined}
          onClick={() => redeliver.mutate()}
        >
          Redeliver
        </button>
      </div>
      <ErrorBanner error={redeliver.error} title="Not redelivered" />
      {/* Until the delivery is tried again: then its status and attempts say how it went. */}
      {redeliver.isSuccess && d.status === 'PENDING' && (
        <p className="small muted" role="status">
          Queued again.
        </p>
      )}
    </li>
  )
}
