import './playground.css'
import { PromptServiceError } from '@pm/client'
import type { EnvironmentName, RunParams, RunRecord, RunRequest, RunResult } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { type FormEvent, useEffect, useId, useRef, useState } from 'react'
import { Link } from 'react-router'
import { RenderedMessages } from '../chat.tsx'
import {
  type ParamFields,
  type Parsed,
  fieldsFromConfig,
  mergeIntoConfig,
  parseParams,
  providerDetail,
  RunError,
  readRunStream,
} from '../playground.ts'
import { keys, usePrompt, useVersions } from '../prompt.ts'
import { client, session, useSignedIn } from '../session.ts'
import { Dialog, Empty, ErrorBanner, Loading, Pager, When } from '../ui.tsx'
import { listVariables, suppliedVariables, VariableFields } from '../variables.tsx'
import { useConnections } from './settings/Connections.tsx'

/** Where a column's content comes from: the draft, a version, an environment's pin, or the latest version. */
type Source = string
const MAX_COLUMNS = 3

function sourceBody(source: Source): Pick<RunRequest, 'draft' | 'version' | 'env'> {
  const [kind, value] = source.split(':')
  if (kind === 'draft') return { draft: true }
  if (kind === 'env') return { env: value as EnvironmentName }
  if (kind === 'version') return { version: Number(value) }
  return {}
}

function sourceLabel(source: Source): string {
  const [kind, value] = source.split(':')
  if (kind === 'draft') return 'Draft'
  if (kind === 'env') return `${value === 'production' ? 'Production' : 'Preview'} environment`
  if (kind === 'version') return `Version ${value}`
  return 'Latest version'
}

/**
 * One streamed run through the service: the typed client answers JSON only, so this one call
 * reads the Server-Sent Events itself (with the session's token and workspace).
 */
async function streamRun(
  promptId: string,
  organizationId: string | null,
  body: RunRequest,
  signal: AbortSignal,
  onDelta: (content: string) => void,
): Promise<RunResult> {
  const url = new URL(`/api/v1/prompts/${encodeURIComponent(promptId)}/run`, window.location.origin)
  if (organizationId) url.searchParams.set('organizationId', organizationId)
  const token = session.accessToken()
  const res = await window.fetch(url, {
    method: 'POST',
    headers: {
      accept: 'text/event-stream',
      'content-type': 'application/json',
      ...(token ? { authorization: `Bearer ${token}` } : {}),
    },
    body: JSON.stringify({ ...body, stream: true }),
    signal,
  })
  if (!res.ok || !res.body) {
    const parsed = (await res.json().catch(() => undefined)) as
      | { error?: { code?: string; message?: string; details?: unknown } }
      | undefined
    throw new RunError(
      parsed?.error?.code ?? 'HTTP_ERROR',
      parsed?.error?.message ?? `The run was refused (HTTP ${res.status})`,
      parsed?.error?.details,
      res.status,
    )
  }
  return readRunStream(res.body, { onDelta })
}

interface ColumnState {
  key: number
  source: Source
  output: string
  running: boolean
  result?: RunResult
  error?: unknown
}

/** A run's failure: the message and code, and a provider's status and message when there are. */
function RunFailure({ error }: { error: unknown }) {
  if (!error) return null
  if (error instanceof RunError) {
    const detail = providerDetail(error.details)
    return (
      <div className="banner banner-error" role="alert">
        <strong>The run failed: </strong>
        <span>{error.message}</span> <code className="error-code">{error.code}</code>
        {detail && <p className="small">{detail}</p>}
      </div>
    )
  }
  return <ErrorBanner error={error} title="The run failed" />
}

function Usage({ result }: { result: RunResult }) {
  return (
    <p className="small muted" data-testid="run-usage">
      {result.usage.inputTokens} tokens in · {result.usage.outputTokens} tokens out · {result.latencyMs} ms
      (first token {result.timeToFirstTokenMs} ms) · <span className="mono">{result.model}</span> ·{' '}
      {result.prompt.draft ? 'draft' : `version ${result.prompt.version}`} · {result.finishReason}
    </p>
  )
}

/**
 * The Playground: run the prompt on a model (a connection and model, parameters, the
 * variables), the answer streaming in; up to 3 columns compared on the same variables; the
 * run log; and "Save to draft", which writes the model and parameters into the draft's config.
 */
export function Playground() {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const versions = useVersions(prompt._id)
  const connections = useConnections()
  const list = connections.data?.connections ?? []
  const [connectionId, setConnectionId] = useState('')
  const connection = list.find((c) => c._id === connectionId) ?? list[0]
  const configModel = typeof prompt.config?.model === 'string' ? prompt.config.model : ''
  const [model, setModel] = useState(configModel)
  const [fields, setFields] = useState<ParamFields>(() => fieldsFromConfig(prompt.config))
  const [values, setValues] = useState<Record<string, string>>({})
  const [columns, setColumns] = useState<ColumnState[]>([
    { key: 0, source: 'draft', output: '', running: false },
  ])
  const nextKey = useRef(1)
  const abort = useRef<AbortController | null>(null)
  const [formError, setFormError] = useState('')
  const [notice, setNotice] = useState('')
  const [historyPage, setHistoryPage] = useState(1)
  const modelsId = useId()
  const lists = listVariables(prompt)
  const params: Parsed<RunParams> = parseParams(fields)
  const running = columns.some((c) => c.running)

  useEffect(() => () => abort.current?.abort(), [])

  const setField = (name: keyof ParamFields, value: string) => setFields((f) => ({ ...f, [name]: value }))
  const update = (key: number, change: Partial<ColumnState> | ((c: ColumnState) => Partial<ColumnState>)) =>
    setColumns((cs) =>
      cs.map((c) => (c.key === key ? { ...c, ...(typeof change === 'function' ? change(c) : change) } : c)),
    )

  const run = (e: FormEvent) => {
    e.preventDefault()
    setNotice('')
    if (!connection) return
    if (!params.ok) {
      setFormError(params.error)
      return
    }
    let variables: Record<string, unknown>
    try {
      variables = suppliedVariables(values, lists)
    } catch (err) {
      setFormError((err as Error).message)
      return
    }
    setFormError('')
    const controller = new AbortController()
    abort.current = controller
    const body: RunRequest = {
      variables,
      connectionId: connection._id,
      ...(model.trim() ? { model: model.trim() } : {}),
      params: params.value,
    }
    const all = columns.map((column) => {
      update(column.key, { output: '', running: true, result: undefined, error: undefined })
      return streamRun(
        prompt._id,
        organizationId,
        { ...body, ...sourceBody(column.source) },
        controller.signal,
        (d) => update(column.key, (c) => ({ output: c.output + d })),
      ).then(
        (result) => update(column.key, { running: false, result, output: result.output.content }),
        (error: unknown) =>
          update(column.key, {
            running: false,
            error: controller.signal.aborted
              ? new RunError('STOPPED', 'Stopped before the answer was complete')
              : error,
          }),
      )
    })
    Promise.allSettled(all).then(() => {
      queryClient.invalidateQueries({ queryKey: ['runs', organizationId, prompt._id] })
    })
  }

  const saveToDraft = useMutation({
    mutationFn: async () => {
      if (!params.ok) throw new Error(params.error)
      // The config as the service has it now: every key the Playground does not edit is kept.
      const fresh = await client.api.getPrompt({ params: { id: prompt._id } })
      return client.api.updatePrompt({
        params: { id: prompt._id },
        body: { config: mergeIntoConfig(fresh.config, model, params.value) },
      })
    },
    onSuccess: (result) => {
      const { staleVariables: _stale, ...updated } = result
      queryClient.setQueryData(keys.prompt(organizationId, prompt._id), updated)
      setNotice('Saved to the draft’s config. No version was created.')
    },
  })

  if (connections.isPending) return <Loading label="Loading the connections" />
  if (connections.error) {
    const forbidden = connections.error instanceof PromptServiceError && connections.error.status === 403
    return forbidden ? (
      <div className="banner banner-warn" role="note">
        <strong>Only an ADMIN or OWNER of this organization can use its model connections.</strong> Ask one to
        run the prompt for you, or to change your role.
      </div>
    ) : (
      <ErrorBanner error={connections.error} title="The connections could not be loaded" />
    )
  }
  if (list.length === 0)
    return (
      <Empty title="No model connection yet">
        <p>
          The Playground runs the prompt on a model through a provider connection.{' '}
          <Link to="/settings/connections">Add a connection</Link> (OpenAI, Anthropic, or an OpenAI-compatible
          server), then come back.
        </p>
      </Empty>
    )

  const sourceOptions = [
    { value: 'draft', label: 'Draft' },
    { value: 'latest', label: 'Latest version' },
    ...(versions.data ?? []).map((v) => ({ value: `version:${v.version}`, label: `Version ${v.version}` })),
    { value: 'env:production', label: 'Production environment' },
    { value: 'env:preview', label: 'Preview environment' },
  ]
  const addColumn = () => {
    const used = new Set(columns.map((c) => c.source))
    const source = sourceOptions.find((o) => !used.has(o.value))?.value ?? 'draft'
    setColumns((cs) => [...cs, { key: nextKey.current++, source, output: '', running: false }])
  }

  return (
    <div className="playground">
      <form onSubmit={run} className="panel playground-form" aria-labelledby="pg-settings">
        <h2 id="pg-settings">Run settings</h2>
        <div className="grid-2">
          <div className="field">
            <label htmlFor="pg-connection">Connection</label>
            <select
              id="pg-connection"
              value={connection?._id ?? ''}
              onChange={(e) => setConnectionId(e.target.value)}
            >
              {list.map((c) => (
                <option key={c._id} value={c._id}>
                  {c.name} ({c.provider})
                </option>
              ))}
            </select>
          </div>
          <div className="field">
            <label htmlFor="pg-model">Model</label>
            <input
              id="pg-model"
              className="mono"
              list={modelsId}
              value={model}
              placeholder={
                connection?.models[0] ? `Default: ${connection.models[0]}` : 'The connection’s default'
              }
              onChange={(e) => setModel(e.target.value)}
            />
            <datalist id={modelsId}>
              {(connection?.models ?? []).map((m) => (
                <option key={m} value={m} />
              ))}
            </datalist>
          </div>
        </div>
        <details className="pg-params" open>
          <summary>Parameters</summary>
          <div className="grid-3">
            <div className="field">
              <label htmlFor="pg-temperature">Temperature</label>
              <input
                id="pg-temperature"
                inputMode="decimal"
                placeholder="0–2"
                value={fields.temperature}
                onChange={(e) => setField('temperature', e.target.value)}
              />
            </div>
            <div className="field">
              <label htmlFor="pg-max-tokens">Max tokens</label>
              <input
                id="pg-max-tokens"
                inputMode="numeric"
                value={fields.max_tokens}
                onChange={(e) => setField('max_tokens', e.target.value)}
              />
            </div>
            <div className="field">
              <label htmlFor="pg-top-p">Top p</label>
              <input
                id="pg-top-p"
                inputMode="decimal"
                placeholder="0–1"
                value={fields.top_p}
                onChange={(e) => setField('top_p', e.target.value)}
              />
            </div>
          </div>
          <div className="field">
            <label htmlFor="pg-stop">Stop sequences</label>
            <textarea
              id="pg-stop"
              rows={2}
              className="mono"
              placeholder="One per line, at most 4"
              value={fields.stop}
              onChange={(e) => setField('stop', e.target.value)}
            />
          </div>
          <div className="field">
            <label htmlFor="pg-tools">Tools (JSON)</label>
            <textarea
              id="pg-tools"
              rows={3}
              className="mono"
              spellCheck={false}
              placeholder='[{"type": "function", "function": {"name": "lookup", "parameters": {…}}}]'
              value={fields.tools}
              onChange={(e) => setField('tools', e.target.value)}
            />
          </div>
          <div className="field">
            <label htmlFor="pg-format">Response format</label>
            <select
              id="pg-format"
              value={fields.responseFormat}
              onChange={(e) => setField('responseFormat', e.target.value)}
            >
              <option value="default">Default</option>
              <option value="text">Text</option>
              <option value="json_object">JSON object</option>
              <option value="json_schema">JSON schema</option>
            </select>
          </div>
          {fields.responseFormat === 'json_schema' && (
            <div className="field">
              <label htmlFor="pg-schema">JSON schema</label>
              <textarea
                id="pg-schema"
                rows={4}
                className="mono"
                spellCheck={false}
                value={fields.jsonSchema}
                onChange={(e) => setField('jsonSchema', e.target.value)}
              />
            </div>
          )}
        </details>
        <h2>Variables</h2>
        {prompt.variables.length === 0 && <p className="muted">This draft has no variables.</p>}
        <VariableFields
          variables={prompt.variables}
          lists={lists}
          values={values}
          onChange={setValues}
          idPrefix="pg-var"
        />
        {(formError || !params.ok) && (
          <p className="hint hint-warn" role="alert">
            {formError || (params.ok ? '' : params.error)}
          </p>
        )}
        <div className="actions">
          <button type="submit" className="btn btn-primary" disabled={running}>
            {columns.length > 1 ? `Run ${columns.length} columns` : 'Run'}
          </button>
          {running && (
            <button type="button" className="btn" onClick={() => abort.current?.abort()}>
              Stop
            </button>
          )}
          <button
            type="button"
            className="btn"
            disabled={saveToDraft.isPending || !params.ok}
            onClick={() => saveToDraft.mutate()}
          >
            Save to draft
          </button>
        </div>
        <ErrorBanner error={saveToDraft.error} title="Not saved" />
        {notice && (
          <p className="banner banner-ok" role="status">
            {notice}
          </p>
        )}
      </form>

      <section className="pg-results" aria-labelledby="pg-answers">
        <div className="pg-results-head">
          <h2 id="pg-answers">Answers</h2>
          <button
            type="button"
            className="btn btn-small"
            disabled={columns.length >= MAX_COLUMNS || running}
            onClick={addColumn}
          >
            Add a column to compare
          </button>
        </div>
        <div className={`pg-columns pg-columns-${columns.length}`}>
          {columns.map((column, i) => (
            <section
              key={column.key}
              className="panel pg-column"
              aria-label={`Column ${i + 1}: ${sourceLabel(column.source)}`}
            >
              <div className="pg-column-head">
                <label htmlFor={`pg-source-${column.key}`} className="sr-only">
                  Column {i + 1} runs
                </label>
                <select
                  id={`pg-source-${column.key}`}
                  value={column.source}
                  disabled={running}
                  onChange={(e) =>
                    update(column.key, {
                      source: e.target.value,
                      output: '',
                      result: undefined,
                      error: undefined,
                    })
                  }
                >
                  {sourceOptions.map((o) => (
                    <option key={o.value} value={o.value}>
                      {o.label}
                    </option>
                  ))}
                </select>
                {columns.length > 1 && (
                  <button
                    type="button"
                    className="btn btn-small"
                    disabled={running}
                    onClick={() => setColumns((cs) => cs.filter((c) => c.key !== column.key))}
                  >
                    Remove<span className="sr-only"> column {i + 1}</span>
                  </button>
                )}
              </div>
              {column.output || column.running ? (
                <pre className="rendered pg-output" aria-live="polite" aria-busy={column.running}>
                  {column.output}
                  {column.running && <span className="pg-caret" aria-hidden="true" />}
                </pre>
              ) : (
                !column.error && <p className="muted small">Run to see the model’s answer here.</p>
              )}
              {column.result?.output.toolCalls && column.result.output.toolCalls.length > 0 && (
                <>
                  <h3 className="small">Tool calls</h3>
                  <pre className="rendered">
                    {column.result.output.toolCalls.map((t) => `${t.name}(${t.arguments})`).join('\n')}
                  </pre>
                </>
              )}
              {column.result && <Usage result={column.result} />}
              <RunFailure error={column.error} />
            </section>
          ))}
        </div>
      </section>

      <RunHistory promptId={prompt._id} page={historyPage} onPage={setHistoryPage} />
    </div>
  )
}

function RunHistory({
  promptId,
  page,
  onPage,
}: {
  promptId: string
  page: number
  onPage: (p: number) => void
}) {
  const { organizationId } = useSignedIn()
  const [openRun, setOpenRun] = useState<string | null>(null)
  const runs = useQuery({
    queryKey: ['runs', organizationId, promptId, page],
    queryFn: () => client.api.listPromptRuns({ params: { id: promptId }, query: { page, limit: 10 } }),
    placeholderData: (previous) => previous,
  })
  const rows = runs.data?.runs ?? []
  return (
    <section className="panel pg-history" aria-labelledby="pg-history">
      <h2 id="pg-history">Run history</h2>
      {runs.isPending && <Loading label="Loading the runs" />}
      <ErrorBanner error={runs.error} />
      {runs.data && rows.length === 0 && <p className="muted">No runs yet. Each run is kept here.</p>}
      {rows.length > 0 && (
        <div className="table-wrap">
          <table className="table">
            <thead>
              <tr>
                <th scope="col">When</th>
                <th scope="col">Content</th>
                <th scope="col">Model</th>
                <th scope="col">Status</th>
                <th scope="col">Tokens</th>
                <th scope="col">Latency</th>
              </tr>
            </thead>
            <tbody>
              {rows.map((r) => (
                <tr key={r._id}>
                  <td>
                    <button type="button" className="link-button" onClick={() => setOpenRun(r._id)}>
                      <When at={r.createdAt} />
                    </button>
                  </td>
                  <td>{r.prompt.draft ? 'draft' : `version ${r.prompt.version}`}</td>
                  <td className="mono">{r.model}</td>
                  <td>
                    <span className={`badge ${STATUS_BADGE[r.status]}`}>{r.status}</span>
                  </td>
                  <td>{r.usage ? `${r.usage.inputTokens} / ${r.usage.outputTokens}` : '–'}</td>
                  <td>{r.latencyMs} ms</td>
                </tr>
              ))}
            </tbody>
          </table>
        </div>
      )}
      {runs.data && runs.data.pagination.totalPages > 1 && (
        <Pager page={page} pagination={runs.data.pagination} onPage={onPage} />
      )}
      <RunDetail runId={openRun} onClose={() => setOpenRun(null)} />
    </section>
  )
}

/** A run log entry's status: a stopped run is not a failure. */
const STATUS_BADGE: Record<RunRecord['status'], string> = {
  succeeded: 'badge-ok',
  failed: 'badge-error',
  cancelled: 'badge-warn',
}

function RunDetail({ runId, onClose }: { runId: string | null; onClose: () => void }) {
  const { organizationId } = useSignedIn()
  const run = useQuery({
    queryKey: ['run', organizationId, runId],
    queryFn: () => client.api.getRun({ params: { runId: runId ?? '' } }),
    enabled: runId !== null,
  })
  return (
    <Dialog open={runId !== null} title="Run" onClose={onClose}>
      {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a long run scrolls (max-height 70vh); axe asks that keyboard users can reach it (scrollable-region-focusable) */}
      <section className="dialog-body pg-run-detail" aria-label="The run (scrolls)" tabIndex={0}>
        {run.isPending && <Loading label="Loading the run" />}
        <ErrorBanner error={run.error} />
        {run.data && <RunShown run={run.data} />}
      </section>
      <div className="actions">
        <button type="button" className="btn" onClick={onClose}>
          Close
        </button>
      </div>
    </Dialog>
  )
}

function RunShown({ run }: { run: RunRecord }) {
  return (
    <>
      <p className="small muted">
        <When at={run.createdAt} /> · {run.prompt.draft ? 'draft' : `version ${run.prompt.version}`} ·{' '}
        <span className="mono">{run.model}</span> ({run.provider}) · {run.latencyMs} ms
        {run.usage && ` · ${run.usage.inputTokens} tokens in, ${run.usage.outputTokens} out`}
      </p>
      {run.status === 'cancelled' && (
        <p className="banner banner-warn">Stopped by the client before the answer was complete.</p>
      )}
      {run.error && run.status === 'failed' && (
        <div className="banner banner-error" role="alert">
          {run.error.message} <code className="error-code">{run.error.code}</code>
          {providerDetail(run.error.details) && <p className="small">{providerDetail(run.error.details)}</p>}
        </div>
      )}
      <h3 className="small">Variables</h3>
      <pre className="rendered">{JSON.stringify(run.variables, null, 2)}</pre>
      {Object.keys(run.params).length > 0 && (
        <>
          <h3 className="small">Parameters</h3>
          <pre className="rendered">{JSON.stringify(run.params, null, 2)}</pre>
        </>
      )}
      <h3 className="small">Sent</h3>
      <RenderedMessages messages={run.renderedMessages} />
      {run.output && (
        <>
          <h3 className="small">{run.status === 'cancelled' ? 'Answer, as far as it came' : 'Answer'}</h3>
          <pre className="rendered" data-testid="run-answer">
            {run.output.content}
          </pre>
        </>
      )}
    </>
  )
}
