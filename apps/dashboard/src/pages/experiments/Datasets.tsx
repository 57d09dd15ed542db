import '../part2.css'
import './experiments.css'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { Link, useNavigate } from 'react-router'
import { client, useSignedIn } from '../../session.ts'
import { Empty, ErrorBanner, Field, Loading, Pager, When } from '../../ui.tsx'
import { useMutateOnce } from '../../once.ts'

/** The workspace's datasets, and a new one from a CSV or JSONL file. */
export function Datasets() {
  const { organizationId } = useSignedIn()
  const org = organizationId ? { organizationId } : {}
  const queryClient = useQueryClient()
  const navigate = useNavigate()
  const [page, setPage] = useState(1)
  const [name, setName] = useState('')
  const [file, setFile] = useState<File | null>(null)
  const nameId = useId()
  const fileId = useId()
  const list = useQuery({
    queryKey: ['datasets', organizationId, page],
    queryFn: () => client.api.listDatasets({ query: { page, limit: 20, ...org } }),
  })
  const create = useMutation({
    mutationFn: async () => {
      const dataset = await client.api.createDataset({ body: { name, ...org } })
      if (file) {
        try {
          await client.api.uploadDatasetItems({
            params: { id: dataset._id },
            query: org,
            body: { file, filename: file.name },
          })
        } catch (err) {
          // Nothing of the file was imported: the empty dataset would only confuse.
          await client.api.deleteDataset({ params: { id: dataset._id }, query: org }).catch(() => {})
          throw err
        }
      }
      return dataset
    },
    onSuccess: (dataset) => {
      queryClient.invalidateQueries({ queryKey: ['datasets'] })
      navigate(`/datasets/${dataset._id}`)
    },
  })
  const createOnce = useMutateOnce(create)
  return (
    <>
      <div className="page-head">
        <h1>Datasets</h1>
      </div>
      <section className="panel" aria-labelledby="new-dataset">
        <h2 id="new-dataset">New dataset</h2>
        <p className="hint">
          A CSV file: one test input per row, each column a variable, a column <code>expected</code> the
          expected output. Or a JSONL file: one <code>{'{"variables": {…}, "expected": "…"}'}</code> per line.
          At most 10,000 items; a bad row is reported and nothing is imported.
        </p>
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault()
            if (name.trim()) createOnce()
          }}
        >
          <Field
            label="Name"
            id={nameId}
            fieldClass="grow"
            value={name}
            required
            onChange={(e) => setName(e.target.value)}
          />
          <Field
            label="CSV or JSONL file"
            id={fileId}
            fieldClass="grow"
            type="file"
            accept=".csv,.jsonl,text/csv"
            onChange={(e) => setFile(e.target.files?.[0] ?? null)}
          />
          <button type="submit" className="btn btn-primary" disabled={!name.trim() || create.isPending}>
            {create.isPending ? 'Creating…' : 'Create dataset'}
          </button>
        </form>
        <ErrorBanner error={create.error} title="The dataset was not created" />
      </section>
      {list.isPending && <Loading label="Loading the datasets" />}
      <ErrorBanner error={list.error} />
      {list.data && list.data.datasets.length === 0 && (
        <Empty title="No datasets yet">Create one from a CSV file above.</Empty>
      )}
      {list.data && list.data.datasets.length > 0 && (
        <>
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a table wider than the screen scrolls; axe asks that keyboard users can reach it (scrollable-region-focusable) */}
          <section className="table-wrap" aria-label="Datasets (scrolls)" tabIndex={0}>
            <table className="table" aria-label="Datasets">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Items</th>
                  <th scope="col">Updated</th>
                </tr>
              </thead>
              <tbody>
                {list.data.datasets.map((d) => (
                  <tr key={d._id}>
                    <td>
                      <Link to={`/datasets/${d._id}`}>{d.name}</Link>
                    </td>
                    <td>{d.itemCount}</td>
                    <td>
                      <When at={d.updatedAt} />
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
          <Pager page={page} pagination={list.data.pagination} onPage={setPage} />
        </>
      )}
    </>
  )
}
