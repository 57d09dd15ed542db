import { AUDIT_ACTIONS, type AuditEntry } from '@pm/contracts'
import { keepPreviousData, useMutation, useQuery } from '@tanstack/react-query'
import { type ReactNode, useId, useState } from 'react'
import { Link, useSearchParams } from 'react-router'
import {
  type AuditFilters,
  auditFilterProblems,
  auditFiltersFrom,
  auditFiltersToParams,
  isoToLocal,
  localToIso,
} from '../../release.ts'
import { usePeople } from '../../people.ts'
import { client, useSignedIn } from '../../session.ts'
import { downloadText, Empty, ErrorBanner, Loading, Pager } from '../../ui.tsx'
import { isManager, NotAllowed, settingsKeys, useApiKeyNames, useMembers, useMyRole } from './common.tsx'

const PAGE_SIZE = 25

/**
 * Who an entry's actor is, by name: a member from the members list, an API key from the keys
 * list (an entry may carry only the id as its name), else the name the entry carries.
 */
function useActorNames() {
  const { nameOf } = usePeople()
  const members = useMembers()
  const keyNames = useApiKeyNames()
  const memberIds = new Set((members.data?.members ?? []).map((m) => m.userId))
  return (actor: AuditEntry['actor']): string => {
    if (actor.type === 'user' && memberIds.has(actor.id)) return nameOf(actor.id)
    if (actor.type === 'apiKey' && keyNames.has(actor.id)) return keyNames.get(actor.id) ?? actor.name
    if (actor.name && actor.name !== actor.id) return actor.name
    return actor.type === 'user' ? 'a former member' : `an API key (${actor.id.slice(-6)})`
  }
}

/**
 * The organization's audit log (DESIGN section 15): one entry per committed change, newest
 * first, with filters (actor, action, resource, time range), pages and an export as JSON Lines
 * or CSV. OWNER/ADMIN only, as the service has it.
 */
export function AuditLog() {
  return (
    <ManagersOnly>
      <AuditLogView />
    </ManagersOnly>
  )
}

/** One resource's entries (a prompt's own, on its page): the same log with the resource fixed. */
export function ResourceAuditLog({ resourceId, name }: { resourceId: string; name: string }) {
  return (
    <ManagersOnly>
      <AuditLogView resourceId={resourceId} resourceName={name} />
    </ManagersOnly>
  )
}

function ManagersOnly({ children }: { children: ReactNode }) {
  const { role, pending, error } = useMyRole()
  if (pending) return <Loading label="Checking your role" />
  if (error) return <ErrorBanner error={error} />
  if (!isManager(role)) return <NotAllowed what="read the audit log" role={role} />
  return <>{children}</>
}

function AuditLogView({ resourceId, resourceName }: { resourceId?: string; resourceName?: string }) {
  const { organizationId } = useSignedIn()
  const actorName = useActorNames()
  const [params, setParams] = useSearchParams()
  const applied: AuditFilters = {
    ...auditFiltersFrom(params),
    ...(resourceId !== undefined ? { resourceId } : {}),
  }
  const page = Math.max(1, Number(params.get('page')) || 1)
  const problems = auditFilterProblems(applied)
  const query = { page, limit: PAGE_SIZE, ...applied }
  const log = useQuery({
    queryKey: [...settingsKeys.auditLog(organizationId), query],
    queryFn: () => client.api.listAuditLog({ params: { id: organizationId ?? '' }, query }),
    enabled: problems.length === 0,
    placeholderData: keepPreviousData,
  })
  const exporter = useMutation({
    mutationFn: async (format: 'jsonl' | 'csv') => {
      const text = await client.api.exportAuditLog({
        params: { id: organizationId ?? '' },
        query: { format, ...applied },
      })
      const day = new Date().toISOString().slice(0, 10)
      downloadText(text, `audit-log-${day}.${format}`, format === 'csv' ? 'text/csv' : 'application/x-ndjson')
    },
  })
  const go = (filters: AuditFilters, toPage = 1) => {
    const next = auditFiltersToParams(
      resourceId !== undefined ? { ...filters, resourceId: undefined } : filters,
      toPage,
    )
    setParams(next)
  }
  const filtered = Object.keys(applied).some((k) => k !== 'resourceId' || resourceId === undefined)
  const data = log.data
  return (
    <section className="audit" aria-labelledby="audit-title">
      <div className="page-head">
        <div>
          <h2 id="audit-title">{resourceName ? `Audit log of ${resourceName}` : 'Audit log'}</h2>
          <p className="hint">
            {resourceId === undefined
              ? 'Every change made in this organization: who made it, when, from where, and what it was.'
              : 'Every change made to it: who made it, when, from where, and what it was.'}
            {resourceId !== undefined && (
              <>
                {' '}
                <Link to={`/settings/audit-log?${auditFiltersToParams({ resourceId }).toString()}`}>
                  Open in the organization's log
                </Link>
              </>
            )}
          </p>
        </div>
        <div className="actions">
          <button
            type="button"
            className="btn"
            disabled={exporter.isPending || problems.length > 0}
            onClick={() => exporter.mutate('jsonl')}
          >
            Export JSONL
          </button>
          <button
            type="button"
            className="btn"
            disabled={exporter.isPending || problems.length > 0}
            onClick={() => exporter.mutate('csv')}
          >
            Export CSV
          </button>
        </div>
      </div>
      <ErrorBanner error={exporter.error} title="Not exported" />
      <AuditFilterForm
        key={params.toString()}
        applied={applied}
        fixedResource={resourceId !== undefined}
        onApply={(f) => go(f)}
        onClear={() => go({})}
      />
      {problems.length > 0 && (
        <div className="banner banner-warn" role="alert">
          {problems.join(' ')}
        </div>
      )}
      {log.isPending && problems.length === 0 && <Loading label="Loading the audit log" />}
      <ErrorBanner error={log.error} title="The audit log could not be loaded" />
      {data && data.entries.length === 0 && (
        <Empty title={filtered ? 'No entries match these filters' : 'No entries yet'}>
          <p>
            {filtered
              ? 'Widen the time range or clear a filter.'
              : resourceId !== undefined
                ? 'Changes to it show here once they are made.'
                : 'Changes to prompts, environments and settings show here once they are made.'}
          </p>
        </Empty>
      )}
      {data && data.entries.length > 0 && (
        <>
          <table
            className="table rtable audit-table"
            aria-label="Audit log entries"
            aria-busy={log.isFetching}
          >
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Actor</th>
                <th scope="col">Action</th>
                <th scope="col">Resource</th>
                <th scope="col">Summary</th>
                <th scope="col">Request</th>
              </tr>
            </thead>
            <tbody>
              {data.entries.map((e) => (
                <AuditRow key={e.id} entry={e} actorName={actorName(e.actor)} />
              ))}
            </tbody>
          </table>
          <Pager
            page={page}
            pagination={data.pagination}
            onPage={(p) => go(auditFiltersFrom(params), p)}
            count={`${data.pagination.total} ${data.pagination.total === 1 ? 'entry' : 'entries'}`}
            textClassName="pager-text"
          />
        </>
      )}
    </section>
  )
}

const entryTime = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'medium' })

function AuditRow({ entry: e, actorName }: { entry: AuditEntry; actorName: string }) {
  return (
    <tr>
      <td data-label="When">
        <time dateTime={e.at}>{entryTime.format(new Date(e.at))}</time>
      </td>
      <td data-label="Actor">
        <span className="wrap">{actorName}</span>
        {e.actor.type === 'apiKey' && <span className="badge">API key</span>}
      </td>
      <td data-label="Action">
        <span className="mono">{e.action}</span>
      </td>
      <td data-label="Resource">
        {e.resource.type === 'prompt' ? (
          <Link to={`/prompts/${e.resource.id}`} className="mono small">
            prompt {e.resource.id.slice(-6)}
          </Link>
        ) : (
          <span className="mono small">
            {e.resource.type} {e.resource.id.slice(-6)}
          </span>
        )}
      </td>
      <td data-label="Summary" className="wrap">
        {e.summary}
      </td>
      <td data-label="Request" className="small muted">
        <span className="mono">{e.ip}</span>
        <br />
        <span className="mono" title="Request id">
          {e.requestId}
        </span>
      </td>
    </tr>
  )
}

/** The filters as typed, applied together (the URL keeps what is applied). */
function AuditFilterForm({
  applied,
  fixedResource,
  onApply,
  onClear,
}: {
  applied: AuditFilters
  fixedResource: boolean
  onApply: (filters: AuditFilters) => void
  onClear: () => void
}) {
  const id = useId()
  const members = useMembers()
  const keyNames = useApiKeyNames()
  const [actor, setActor] = useState(applied.actor ?? '')
  const [action, setAction] = useState(applied.action ?? '')
  const [resource, setResource] = useState(fixedResource ? '' : (applied.resourceId ?? ''))
  const [from, setFrom] = useState(isoToLocal(applied.from))
  const [to, setTo] = useState(isoToLocal(applied.to))
  const people = members.data?.members ?? []
  const apiKeys = [...keyNames]
  const known = actor === '' || people.some((m) => m.userId === actor) || keyNames.has(actor)
  return (
    <form
      className="panel audit-filters"
      aria-label="Filters"
      onSubmit={(e) => {
        e.preventDefault()
        onApply({
          ...(actor ? { actor } : {}),
          ...(action.trim() ? { action: action.trim() } : {}),
          ...(resource.trim() ? { resourceId: resource.trim() } : {}),
          ...(from ? { from: localToIso(from) } : {}),
          ...(to ? { to: localToIso(to, true) } : {}),
        })
      }}
    >
      <div className="audit-filter-grid">
        <div className="field">
          <label htmlFor={`${id}-actor`}>Actor</label>
          <select id={`${id}-actor`} value={actor} onChange={(e) => setActor(e.target.value)}>
            <option value="">Anyone</option>
            {people.length > 0 && (
              <optgroup label="Members">
                {people.map((m) => (
                  <option key={m.userId} value={m.userId}>
                    {m.name || m.email}
                  </option>
                ))}
              </optgroup>
            )}
            {apiKeys.length > 0 && (
              <optgroup label="API keys">
                {apiKeys.map(([keyId, name]) => (
                  <option key={keyId} value={keyId}>
                    {name}
                  </option>
                ))}
              </optgroup>
            )}
            {!known && <option value={actor}>{actor}</option>}
          </select>
        </div>
        <div className="field">
          <label htmlFor={`${id}-action`}>Action</label>
          <input
            id={`${id}-action`}
            list={`${id}-actions`}
            placeholder="e.g. environment.promoted"
            value={action}
            onChange={(e) => setAction(e.target.value)}
          />
          <datalist id={`${id}-actions`}>
            {AUDIT_ACTIONS.map((a) => (
              <option key={a} value={a} />
            ))}
          </datalist>
        </div>
        {!fixedResource && (
          <div className="field">
            <label htmlFor={`${id}-resource`}>Resource id</label>
            <input
              id={`${id}-resource`}
              className="mono"
              placeholder="a prompt's id, say"
              value={resource}
              onChange={(e) => setResource(e.target.value)}
            />
          </div>
        )}
        <div className="field">
          <label htmlFor={`${id}-from`}>From</label>
          <input
            id={`${id}-from`}
            type="datetime-local"
            value={from}
            onChange={(e) => setFrom(e.target.value)}
          />
        </div>
        <div className="field">
          <label htmlFor={`${id}-to`}>To</label>
          <input id={`${id}-to`} type="datetime-local" value={to} onChange={(e) => setTo(e.target.value)} />
        </div>
      </div>
      <div className="actions">
        <button type="submit" className="btn btn-primary">
          Apply filters
        </button>
        <button type="button" className="btn" onClick={onClear}>
          Clear filters
        </button>
      </div>
    </form>
  )
}
