import '../part2.css'
import './experiments.css'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { Link, useParams } from 'react-router'
import { client, useSignedIn } from '../../session.ts'
import { ErrorBanner, Field, Loading, Pager } from '../../ui.tsx'

const cell = (v: unknown): string => (typeof v === 'string' ? v : JSON.stringify(v))

/** One dataset: its items page by page, more from a file, one deleted at a time. */
export function Dataset() {
  const id = useParams().id ?? ''
  const { organizationId } = useSignedIn()
  const org = organizationId ? { organizationId } : {}
  const queryClient = useQueryClient()
  const [page, setPage] = useState(1)
  const [file, setFile] = useState<File | null>(null)
  const fileId = useId()
  const dataset = useQuery({
    queryKey: ['dataset', organizationId, id],
    queryFn: () => client.api.getDataset({ params: { id }, query: org }),
  })
  const items = useQuery({
    queryKey: ['dataset-items', organizationId, id, page],
    queryFn: () => client.api.listDatasetItems({ params: { id }, query: { page, limit: 25, ...org } }),
  })
  const refresh = () => {
    queryClient.invalidateQueries({ queryKey: ['dataset', organizationId, id] })
    queryClient.invalidateQueries({ queryKey: ['dataset-items', organizationId, id] })
  }
  const upload = useMutation({
    mutationFn: (f: File) =>
      client.api.uploadDatasetItems({ params: { id }, query: org, body: { file: f, filename: f.name } }),
    onSuccess: refresh,
  })
  const remove = useMutation({
    mutationFn: (itemId: string) => client.api.deleteDatasetItem({ params: { id, itemId }, query: org }),
    onSuccess: refresh,
  })
  if (dataset.isPending) return <Loading label="Loading the dataset" />
  if (dataset.error) return <ErrorBanner error={dataset.error} title="The dataset could not be loaded" />
  const columns = [...new Set((items.data?.items ?? []).flatMap((i) => Object.keys(i.variables)))]
  return (
    <>
      <p>
        <Link to="/datasets">← Datasets</Link>
      </p>
      <div className="page-head">
        <div>
          <h1>{dataset.data.name}</h1>
          <p className="muted small">{dataset.data.itemCount} items</p>
        </div>
      </div>
      <section className="panel" aria-labelledby="add-items">
        <h2 id="add-items">Add items from a file</h2>
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault()
            if (file) upload.mutate(file)
          }}
        >
          <Field
            label="CSV or JSONL file"
            id={fileId}
            fieldClass="grow"
            type="file"
            accept=".csv,.jsonl,text/csv"
            onChange={(e) => {
              setFile(e.target.files?.[0] ?? null)
              upload.reset()
            }}
          />
          <button type="submit" className="btn btn-primary" disabled={!file || upload.isPending}>
            {upload.isPending ? 'Uploading…' : 'Upload'}
          </button>
        </form>
        {upload.data && (
          <p className="banner banner-ok" role="status">
            {upload.data.added} items added.
          </p>
        )}
        <ErrorBanner error={upload.error} title="Nothing was imported" />
      </section>
      <ErrorBanner error={items.error} />
      {items.data && (
        <>
          {/* biome-ignore lint/a11y/noNoninteractiveTabindex: a table wider than the screen scrolls; axe asks that keyboard users can reach it (scrollable-region-focusable) */}
          <section className="table-wrap" aria-label="Items (scrolls)" tabIndex={0}>
            <table className="table" aria-label="Items">
              <thead>
                <tr>
                  <th scope="col">#</th>
                  {columns.map((c) => (
                    <th scope="col" key={c}>
                      {c}
                    </th>
                  ))}
                  <th scope="col">expected</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {items.data.items.map((i) => (
                  <tr key={i._id}>
                    <td className="muted">{i.position}</td>
                    {columns.map((c) => (
                      <td key={c}>{i.variables[c] === undefined ? '' : cell(i.variables[c])}</td>
                    ))}
                    <td>{i.expected ?? <span className="muted">—</span>}</td>
                    <td>
                      <button type="button" className="btn btn-small" onClick={() => remove.mutate(i._id)}>
                        Delete<span className="sr-only"> item {i.position}</span>
                      </button>
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </section>
          <Pager page={page} pagination={items.data.pagination} onPage={setPage} />
        </>
      )}
    </>
  )
}
