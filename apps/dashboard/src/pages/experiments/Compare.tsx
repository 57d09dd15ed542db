import '../part2.css'
import './experiments.css'
import type { Evaluator, ExperimentVariant } from '@pm/contracts'
import { useMutation, useQuery } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { Link, useNavigate } from 'react-router'
import { usePrompt } from '../../prompt.ts'
import { client, useSignedIn } from '../../session.ts'
import { ErrorBanner, Field, When } from '../../ui.tsx'
import { useConnections } from '../settings/Connections.tsx'

type Choice = 'draft' | `v${number}`

/**
 * "Compare versions on a dataset", from a prompt's page: which versions (and the draft), which
 * dataset, which connection, which evaluators; then the experiment's results page. Below, the
 * prompt's earlier experiments.
 */
export function Compare() {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const org = organizationId ? { organizationId } : {}
  const navigate = useNavigate()
  const versions: Choice[] = Array.from(
    { length: prompt.versionCount },
    (_, i) => `v${prompt.versionCount - i}` as Choice,
  )
  const [chosen, setChosen] = useState<Choice[]>(() => (['draft', ...versions] as Choice[]).slice(0, 2))
  const [datasetId, setDatasetId] = useState('')
  const [connectionId, setConnectionId] = useState('')
  const [model, setModel] = useState('')
  const [exact, setExact] = useState(true)
  const [contains, setContains] = useState('')
  const [json, setJson] = useState(false)
  const [judge, setJudge] = useState('')
  const ids = { dataset: useId(), connection: useId(), model: useId(), contains: useId(), judge: useId() }
  const datasets = useQuery({
    queryKey: ['datasets', organizationId, 'all'],
    queryFn: () => client.api.listDatasets({ query: { page: 1, limit: 100, ...org } }),
  })
  const connections = useConnections()
  const connectionList = connections.data?.connections ?? []
  const past = useQuery({
    queryKey: ['experiments', organizationId, prompt._id],
    queryFn: () =>
      client.api.listExperiments({ query: { page: 1, limit: 20, promptId: prompt._id, ...org } }),
  })
  const start = useMutation({
    mutationFn: () => {
      const variants: ExperimentVariant[] = chosen.map((c) =>
        c === 'draft'
          ? { promptId: prompt._id, draft: true }
          : { promptId: prompt._id, version: Number(c.slice(1)) },
      )
      const evaluators: Evaluator[] = [
        ...(exact ? [{ type: 'exact' as const }] : []),
        ...(contains.trim() ? [{ type: 'contains' as const, value: contains }] : []),
        ...(json ? [{ type: 'json-valid' as const }] : []),
        ...(judge.trim() ? [{ type: 'llm-judge' as const, rubric: judge.trim() }] : []),
      ]
      return client.api.createExperiment({
        body: {
          name: `${prompt.name}: ${chosen.join(' vs ')}`,
          datasetId,
          variants,
          connectionId: connectionId.trim(),
          ...(model.trim() ? { model: model.trim() } : {}),
          evaluators,
          ...org,
        },
      })
    },
    onSuccess: (accepted) => navigate(`/experiments/${accepted.experimentId}`),
  })
  const toggle = (c: Choice) =>
    setChosen((now) => (now.includes(c) ? now.filter((x) => x !== c) : now.length >= 5 ? now : [...now, c]))
  return (
    <div className="experiments">
      <section className="panel" aria-labelledby="compare-title">
        <h2 id="compare-title">Compare versions on a dataset</h2>
        <form
          onSubmit={(e) => {
            e.preventDefault()
            start.mutate()
          }}
        >
          <fieldset className="choices">
            <legend>Variants (up to 5)</legend>
            {(['draft', ...versions] as Choice[]).map((c) => (
              <label key={c} className="choice">
                <input type="checkbox" checked={chosen.includes(c)} onChange={() => toggle(c)} />{' '}
                {c === 'draft' ? 'Draft' : c}
              </label>
            ))}
          </fieldset>
          <div className="form-grid">
            <div className="field">
              <label htmlFor={ids.dataset}>Dataset</label>
              <select
                id={ids.dataset}
                value={datasetId}
                required
                onChange={(e) => setDatasetId(e.target.value)}
              >
                <option value="">Choose a dataset…</option>
                {datasets.data?.datasets.map((d) => (
                  <option key={d._id} value={d._id}>
                    {d.name} ({d.itemCount} items)
                  </option>
                ))}
              </select>
              <span className="hint">
                <Link to="/datasets">Manage datasets</Link>
              </span>
            </div>
            <div className="field">
              <label htmlFor={ids.connection}>Connection</label>
              <select
                id={ids.connection}
                value={connectionId}
                required
                onChange={(e) => setConnectionId(e.target.value)}
              >
                <option value="">
                  {connections.isPending
                    ? 'Loading the connections…'
                    : connectionList.length === 0
                      ? 'No model connection yet'
                      : 'Choose a connection…'}
                </option>
                {connectionList.map((c) => (
                  <option key={c._id} value={c._id}>
                    {c.name} ({c.provider})
                  </option>
                ))}
              </select>
              <span className="hint">
                {connections.error ? (
                  'The connections could not be listed: an ADMIN or OWNER manages them.'
                ) : (
                  <Link to="/settings/connections">Manage connections</Link>
                )}
              </span>
            </div>
            <Field
              label="Model (optional)"
              id={ids.model}
              value={model}
              onChange={(e) => setModel(e.target.value)}
            />
          </div>
          <fieldset className="choices">
            <legend>Evaluators</legend>
            <label className="choice">
              <input type="checkbox" checked={exact} onChange={(e) => setExact(e.target.checked)} /> Exact
              match with the expected output
            </label>
            <label className="choice">
              <input type="checkbox" checked={json} onChange={(e) => setJson(e.target.checked)} /> Valid JSON
            </label>
            <Field
              label="Contains (text)"
              id={ids.contains}
              value={contains}
              onChange={(e) => setContains(e.target.value)}
            />
            <Field
              label="LLM judge: rubric prompt slug"
              id={ids.judge}
              value={judge}
              onChange={(e) => setJudge(e.target.value)}
            />
          </fieldset>
          <div className="actions">
            <button
              type="submit"
              className="btn btn-primary"
              disabled={chosen.length === 0 || !datasetId || !connectionId.trim() || start.isPending}
            >
              {start.isPending ? 'Starting…' : 'Run the experiment'}
            </button>
          </div>
        </form>
        <ErrorBanner error={start.error} title="The experiment was not started" />
      </section>
      <section className="panel" aria-labelledby="past-title">
        <h2 id="past-title">Experiments of this prompt</h2>
        <ErrorBanner error={past.error} />
        {past.data && past.data.experiments.length === 0 && <p className="muted">None yet.</p>}
        {past.data && past.data.experiments.length > 0 && (
          <ul className="plain">
            {past.data.experiments.map((e) => (
              <li key={e._id}>
                <Link to={`/experiments/${e._id}`}>{e.name}</Link> ·{' '}
                <span className={`badge status-${e.status}`}>{e.status}</span> · {e.progress.done}/
                {e.progress.total} · <When at={e.createdAt} />
              </li>
            ))}
          </ul>
        )}
      </section>
    </div>
  )
}
