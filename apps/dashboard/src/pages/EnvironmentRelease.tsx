import './part2.css'
import {
  type EnvironmentHistoryEntry,
  type EnvironmentName,
  type Pin,
  type PromoteRequest,
  type PromptVersion,
  SPLIT_MAX_VARIANTS,
  SPLIT_MIN_VARIANTS,
  type Split,
} from '@pm/contracts'
import { keepPreviousData, useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { usePeople } from '../people.ts'
import { keys, usePrompt } from '../prompt.ts'
import {
  describeTarget,
  initialSplitRows,
  observedShares,
  type SplitRow,
  sameTarget,
  splitProblems,
  splitRequest,
  splitTotal,
} from '../release.ts'
import { client, useSignedIn } from '../session.ts'
import { isManager, useApiKeyNames } from './settings/common.tsx'
import { ConfirmDialog, ErrorBanner, Loading, When } from '../ui.tsx'

/**
 * Release safety on a prompt's Environments page (DESIGN section 15): a promote (one version,
 * a split, a rollback), the split editor, the split's variants with their invocations, and the
 * environment's history with "Roll back".
 */

type PromoteBody = Omit<PromoteRequest, 'organizationId'>

/** A promote of `env`; what it changes (the pins, what invoke returns, the history) is asked again. */
export function usePromote(env: EnvironmentName) {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  return useMutation({
    mutationFn: (body: PromoteBody) => client.api.promoteVersion({ params: { id: prompt._id, env }, body }),
    onSuccess: () => {
      queryClient.invalidateQueries({ queryKey: keys.environments(organizationId, prompt._id) })
      queryClient.invalidateQueries({ queryKey: ['env-invoke', organizationId, prompt._id, env] })
      queryClient.invalidateQueries({ queryKey: historyKey(organizationId, prompt._id, env) })
    },
  })
}

const historyKey = (org: string | null, promptId: string, env: EnvironmentName) =>
  ['env-history', org, promptId, env] as const

/** Who promoted: a member by name, or an API key (by name for an OWNER/ADMIN, who may list keys). */
function usePromoter(): (entry: { promotedBy: string; promotedByType?: 'user' | 'apiKey' }) => string {
  const { nameOf, role } = usePeople()
  const keyNames = useApiKeyNames(isManager(role))
  return (entry) =>
    entry.promotedByType === 'apiKey'
      ? `the API key ${keyNames.get(entry.promotedBy) ?? `…${entry.promotedBy.slice(-6)}`}`
      : nameOf(entry.promotedBy)
}

/** A split in place: each version's weight and the invocations it has served since the split began. */
export function SplitVariants({ split, label }: { split: Split; label: string }) {
  const shares = observedShares(split)
  return (
    <div className="table-wrap">
      <table className="table split-table" aria-label={label}>
        <thead>
          <tr>
            <th scope="col">Version</th>
            <th scope="col">Weight</th>
            <th scope="col">Invocations</th>
            <th scope="col">Observed share</th>
          </tr>
        </thead>
        <tbody>
          {split.variants.map((v, i) => (
            <tr key={v.versionId}>
              <td>Version {v.version}</td>
              <td>{v.weight}%</td>
              <td>{(v.invocations ?? 0).toLocaleString()}</td>
              <td>{shares[i] === null ? '—' : `${shares[i]}%`}</td>
            </tr>
          ))}
        </tbody>
      </table>
    </div>
  )
}

/**
 * The split editor: 2 to 5 published versions with integer weights, checked as they are typed
 * (the total must be 100); saving promotes the split.
 */
export function SplitEditor({
  env,
  pin,
  versions,
  onDone,
}: {
  env: EnvironmentName
  pin: Pin | null
  versions: PromptVersion[]
  onDone: (message: string) => void
}) {
  const idBase = useId()
  const [rows, setRows] = useState<SplitRow[]>(() =>
    initialSplitRows(
      pin?.split,
      versions.map((v) => v._id),
    ),
  )
  const promote = usePromote(env)
  const problems = splitProblems(rows)
  const total = splitTotal(rows)
  const update = (i: number, patch: Partial<SplitRow>) =>
    setRows(rows.map((r, j) => (j === i ? { ...r, ...patch } : r)))
  const unused = versions.find((v) => !rows.some((r) => r.versionId === v._id))
  return (
    <form
      className="split-editor"
      aria-label={`Split ${env}`}
      onSubmit={(e) => {
        e.preventDefault()
        if (problems.length > 0) return
        promote.mutate(
          { split: splitRequest(rows) },
          { onSuccess: (saved) => onDone(`Split saved: ${describeTarget(saved)}.`) },
        )
      }}
    >
      <h3 className="small">Split the traffic of {env}</h3>
      <p className="hint">
        Each subject (<code>subject</code> in the invoke body, or the <code>X-Subject-Id</code> header) keeps
        getting the same version while the split stands; an invoke without one gets a random pick.
      </p>
      <ol className="split-rows">
        {rows.map((row, i) => (
          // Rows are edited in place (controlled fields) and removed by position: the index is their key.
          <li key={i} className="split-row">
            <div className="field">
              <label htmlFor={`${idBase}-v${i}`}>Variant {i + 1}</label>
              <select
                id={`${idBase}-v${i}`}
                value={row.versionId}
                onChange={(e) => update(i, { versionId: e.target.value })}
              >
                <option value="">Choose…</option>
                {versions.map((v) => (
                  <option key={v._id} value={v._id}>
                    Version {v.version}
                  </option>
                ))}
              </select>
            </div>
            <div className="field weight">
              <label htmlFor={`${idBase}-w${i}`}>
                Weight<span className="sr-only"> of variant {i + 1}</span> %
              </label>
              <input
                id={`${idBase}-w${i}`}
                type="number"
                inputMode="numeric"
                min={1}
                max={99}
                step={1}
                value={row.weight}
                onChange={(e) => update(i, { weight: e.target.value })}
              />
            </div>
            <button
              type="button"
              className="btn btn-small"
              disabled={rows.length <= SPLIT_MIN_VARIANTS}
              aria-label={`Remove variant ${i + 1}`}
              onClick={() => setRows(rows.filter((_, j) => j !== i))}
            >
              Remove
            </button>
          </li>
        ))}
      </ol>
      <div className="split-foot">
        <button
          type="button"
          className="btn btn-small"
          disabled={rows.length >= SPLIT_MAX_VARIANTS}
          onClick={() => setRows([...rows, { versionId: unused?._id ?? '', weight: '' }])}
        >
          Add a version
        </button>
        <span
          className={total === 100 ? 'split-total added-text' : 'split-total removed-text'}
          aria-live="polite"
        >
          Total {total}%
        </span>
      </div>
      {problems.length > 0 && (
        <ul className="split-problems hint-warn small" aria-label="Why the split cannot be saved yet">
          {problems.map((p) => (
            <li key={p}>{p}</li>
          ))}
        </ul>
      )}
      <ErrorBanner error={promote.error} title="Split not saved" />
      <div className="actions">
        <button type="submit" className="btn btn-primary" disabled={problems.length > 0 || promote.isPending}>
          {promote.isPending ? 'Saving…' : `Save split of ${env}`}
        </button>
        <button type="button" className="btn" onClick={() => onDone('')}>
          Cancel
        </button>
      </div>
    </form>
  )
}

const HISTORY_PAGE = 10

/** A history entry's pin in a cell: "v2", or "Split v2 70% · v1 30%". */
const pinned = (entry: EnvironmentHistoryEntry): string =>
  `${entry.split ? 'Split ' : ''}${describeTarget(entry)}`

/**
 * The environment's promotes, newest first: who, when, what was pinned and what it replaced;
 * "Roll back" on an earlier one (a promote of that version, or of that split, again).
 */
export function EnvironmentHistory({
  env,
  title,
  pin,
  onRolledBack,
}: {
  env: EnvironmentName
  title: string
  pin: Pin | null
  onRolledBack: (message: string) => void
}) {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const promoter = usePromoter()
  const [shown, setShown] = useState(HISTORY_PAGE)
  // One more than is shown: the last shown entry's "from" is the one after it.
  const history = useQuery({
    queryKey: [...historyKey(organizationId, prompt._id, env), shown],
    queryFn: () =>
      client.api.getEnvironmentHistory({ params: { id: prompt._id, env }, query: { limit: shown + 1 } }),
    placeholderData: keepPreviousData,
  })
  const [target, setTarget] = useState<EnvironmentHistoryEntry | null>(null)
  const promote = usePromote(env)
  const headingId = useId()
  const entries = history.data?.entries ?? []
  const visible = entries.slice(0, shown)
  const more = entries.length > shown || (history.data?.pagination.hasNextPage ?? false)
  return (
    <div className="env-history">
      <h3 id={headingId} className="small">
        History of {title.toLowerCase()}
      </h3>
      {history.isPending && <Loading label="Loading the history" />}
      <ErrorBanner error={history.error} title="The history could not be loaded" />
      {history.data && entries.length === 0 && (
        <div className="muted small">Never promoted: the history starts with the first promote.</div>
      )}
      {visible.length > 0 && (
        <div className="table-wrap">
          <table className="table rtable history-table" aria-labelledby={headingId}>
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Pinned</th>
                <th scope="col">Replaced</th>
                <th scope="col">By</th>
                <th scope="col">
                  <span className="sr-only">Actions</span>
                </th>
              </tr>
            </thead>
            <tbody>
              {visible.map((entry, i) => {
                const before = entries[i + 1]
                const current = pin !== null && i === 0 && sameTarget(entry, pin)
                const canRollBack = pin !== null && !sameTarget(entry, pin)
                return (
                  <tr key={`${entry.promotedAt}-${i}`}>
                    <td data-label="When">
                      <When at={entry.promotedAt} />
                    </td>
                    <td data-label="Pinned">
                      {pinned(entry)}
                      {current && <span className="badge badge-ok">live</span>}
                    </td>
                    <td data-label="Replaced">
                      {before ? (
                        pinned(before)
                      ) : more ? (
                        <span className="muted">…</span>
                      ) : (
                        <span className="muted">nothing</span>
                      )}
                    </td>
                    <td data-label="By">{promoter(entry)}</td>
                    <td data-label="">
                      {canRollBack && (
                        <button
                          type="button"
                          className="btn btn-small"
                          aria-label={
                            entry.split
                              ? `Roll back to the split ${describeTarget(entry)}`
                              : `Roll back to v${entry.version}`
                          }
                          onClick={() => {
                            promote.reset()
                            setTarget(entry)
                          }}
                        >
                          {entry.split ? 'Roll back to the split' : `Roll back to v${entry.version}`}
                        </button>
                      )}
                    </td>
                  </tr>
                )
              })}
            </tbody>
          </table>
        </div>
      )}
      {more && (
        <button
          type="button"
          className="btn btn-small"
          disabled={history.isFetching}
          onClick={() => setShown(shown + HISTORY_PAGE)}
        >
          Show older promotes
        </button>
      )}
      <ConfirmDialog
        open={target !== null}
        title={`Roll back ${title.toLowerCase()}?`}
        message={
          target && (
            <p>
              {title} will serve{' '}
              {target.split ? `the split ${describeTarget(target)}` : `version ${target.version}`} again
              instead of {pin ? describeTarget(pin) : 'what it serves now'}. Every invoke with{' '}
              <code>env={env}</code> gets it at once; the history keeps both.
            </p>
          )
        }
        confirmLabel={
          target ? (target.split ? 'Roll back to this split' : `Roll back to v${target.version}`) : ''
        }
        busy={promote.isPending}
        error={promote.error}
        errorTitle="Not rolled back"
        onCancel={() => setTarget(null)}
        onConfirm={() => {
          if (!target) return
          const body: PromoteBody = target.split
            ? { split: target.split.variants.map((v) => ({ versionId: v.versionId, weight: v.weight })) }
            : { versionId: target.versionId }
          promote.mutate(body, {
            onSuccess: (saved) => {
              setTarget(null)
              onRolledBack(`Rolled back: ${title.toLowerCase()} serves ${describeTarget(saved)} again.`)
            },
          })
        }}
      />
    </div>
  )
}
