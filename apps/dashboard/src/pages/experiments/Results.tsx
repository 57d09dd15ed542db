import '../part2.css'
import './experiments.css'
import type { ExperimentResult } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { useParams } from 'react-router'
import { foldText } from '../../lib.ts'
import { client, useSignedIn } from '../../session.ts'
import { ErrorBanner, Loading, Pager, When } from '../../ui.tsx'

const pct = (x: number | null) => (x === null ? '—' : `${Math.round(x * 1000) / 10}%`)
const num = (x: number | null) => (x === null ? '—' : String(Math.round(x * 1000) / 1000))
const ms = (x: number | null) => (x === null ? '—' : `${Math.round(x)} ms`)
const ACTIVE = ['queued', 'running']
/** A cell shows this much of an output; the rest behind a disclosure (an answer can be 100,000 characters). */
const OUTPUT_SHOWN = 1_000

function Output({ text }: { text: string | null }) {
  const fold = text === null ? null : foldText(text, OUTPUT_SHOWN)
  if (!fold) return <div className="output">{text}</div>
  return (
    <div className="output">
      {fold.head}
      <details className="output-rest">
        <summary>{fold.rest.length.toLocaleString('en')} more characters</summary>
        {fold.rest}
      </details>
    </div>
  )
}

/**
 * An experiment: its status and progress (polled while it runs), the aggregates per variant,
 * and the items side by side (one row per item, one column per variant), failures filterable.
 */
export function Results() {
  const id = useParams().id ?? ''
  const { organizationId } = useSignedIn()
  const org = organizationId ? { organizationId } : {}
  const queryClient = useQueryClient()
  const [page, setPage] = useState(1)
  const [failed, setFailed] = useState(false)
  const progressId = useId()
  const exp = useQuery({
    queryKey: ['experiment', organizationId, id],
    queryFn: () => client.api.getExperiment({ params: { id }, query: org }),
    refetchInterval: (q) => (q.state.data && ACTIVE.includes(q.state.data.status) ? 1_000 : false),
  })
  const running = exp.data !== undefined && ACTIVE.includes(exp.data.status)
  const results = useQuery({
    queryKey: ['experiment-results', organizationId, id, page, failed, exp.data?.progress.done],
    // Pages of items × variants, ordered by item then variant: a limit that is a multiple of the
    // variant count (99 for 3) keeps each item's row whole on one page (the failures filter aside).
    queryFn: () => {
      const variants = Math.max(1, exp.data?.variants.length ?? 1)
      return client.api.listExperimentResults({
        params: { id },
        query: {
          page,
          limit: variants * Math.floor(100 / variants),
          ...(failed ? { failed: true } : {}),
          ...org,
        },
      })
    },
    enabled: exp.data !== undefined,
  })
  const cancel = useMutation({
    mutationFn: () => client.api.cancelExperiment({ params: { id }, query: org }),
    onSuccess: () => queryClient.invalidateQueries({ queryKey: ['experiment', organizationId, id] }),
  })
  if (exp.isPending) return <Loading label="Loading the experiment" />
  if (exp.error) return <ErrorBanner error={exp.error} title="The experiment could not be loaded" />
  const e = exp.data
  const names = Object.keys(e.summary[0]?.evaluators ?? {})
  const byItem = new Map<
    number,
    { variables: Record<string, unknown>; expected: string | null; cells: Map<number, ExperimentResult> }
  >()
  for (const r of results.data?.results ?? []) {
    const row = byItem.get(r.position) ?? { variables: r.variables, expected: r.expected, cells: new Map() }
    row.cells.set(r.variant, r)
    byItem.set(r.position, row)
  }
  return (
    <div className="experiments">
      <div className="page-head">
        <div>
          <h1>{e.name}</h1>
          <p className="muted small">
            <span className={`badge status-${e.status}`}>{e.status}</span> · started <When at={e.createdAt} />
            {e.error && <> · {e.error}</>}
          </p>
        </div>
        {running && (
          <button type="button" className="btn" onClick={() => cancel.mutate()} disabled={cancel.isPending}>
            Cancel
          </button>
        )}
      </div>
      <ErrorBanner error={cancel.error} />
      <div className="field">
        <label htmlFor={progressId}>Progress</label>
        <progress
          id={progressId}
          className="progress"
          max={Math.max(1, e.progress.total)}
          value={e.progress.done}
        />
        <span className="hint" aria-live="polite">
          {e.progress.done} of {e.progress.total} runs done
        </span>
      </div>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a table wider than the screen scrolls; axe asks that keyboard users can reach it (scrollable-region-focusable) */}
      <section className="table-wrap" aria-label="Aggregates per variant (scrolls)" tabIndex={0}>
        <table className="table" aria-label="Aggregates per variant">
          <thead>
            <tr>
              <th scope="col">Variant</th>
              {names.map((n) => (
                <th scope="col" key={n}>
                  {n} (mean)
                </th>
              ))}
              <th scope="col">Pass rate</th>
              <th scope="col">Latency p50 / p95</th>
              <th scope="col">Tokens in / out</th>
              <th scope="col">Errors</th>
            </tr>
          </thead>
          <tbody>
            {e.summary.map((s) => (
              <tr key={s.variant}>
                <th scope="row">{s.label}</th>
                {names.map((n) => (
                  <td key={n}>{num(s.evaluators[n]?.mean ?? null)}</td>
                ))}
                <td>{pct(s.passRate)}</td>
                <td>
                  {ms(s.latencyMs.p50)} / {ms(s.latencyMs.p95)}
                </td>
                <td>
                  {s.tokens.input} / {s.tokens.output}
                </td>
                <td>{s.errors}</td>
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      <div className="filters">
        <label className="choice">
          <input
            type="checkbox"
            checked={failed}
            onChange={(ev) => {
              setFailed(ev.target.checked)
              setPage(1)
            }}
          />{' '}
          Failures only
        </label>
      </div>
      <ErrorBanner error={results.error} />
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a table wider than the screen scrolls; axe asks that keyboard users can reach it (scrollable-region-focusable) */}
      <section className="table-wrap" aria-label="Items side by side (scrolls)" tabIndex={0}>
        <table className="table side-by-side" aria-label="Items side by side">
          <thead>
            <tr>
              <th scope="col">#</th>
              <th scope="col">Input</th>
              <th scope="col">Expected</th>
              {e.summary.map((s) => (
                <th scope="col" key={s.variant}>
                  {s.label}
                </th>
              ))}
            </tr>
          </thead>
          <tbody>
            {[...byItem.entries()].map(([position, row]) => (
              <tr key={position}>
                <td className="muted">{position}</td>
                <td className="mono small">{JSON.stringify(row.variables)}</td>
                <td>{row.expected ?? <span className="muted">—</span>}</td>
                {e.summary.map((s) => {
                  const r = row.cells.get(s.variant)
                  if (!r)
                    return (
                      <td key={s.variant} className="muted">
                        {failed ? 'not failed' : '…'}
                      </td>
                    )
                  return (
                    <td key={s.variant} className={r.passed ? 'cell-pass' : 'cell-fail'}>
                      {r.error ? <span className="error-code">{r.error}</span> : <Output text={r.output} />}
                      <span className="scores small">
                        {Object.entries(r.scores).map(([n, v]) => (
                          <span key={n} title={r.evaluatorErrors[n]}>
                            {n} {v === null ? '—' : num(v)}
                          </span>
                        ))}
                        {r.latencyMs !== null && <span>{ms(r.latencyMs)}</span>}
                      </span>
                      {/* Why an evaluator could not score (a regex stopped at its deadline, say): in
                          the cell, not only in a tooltip that touch and keyboard never show. */}
                      {Object.entries(r.evaluatorErrors).map(([n, message]) => (
                        <span key={n} className="evaluator-error small">
                          {n}: {message}
                        </span>
                      ))}
                    </td>
                  )
                })}
              </tr>
            ))}
          </tbody>
        </table>
      </section>
      {results.data && <Pager page={page} pagination={results.data.pagination} onPage={setPage} />}
    </div>
  )
}
