import './part2.css'
import type { ImportBatch } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useEffect, useId, useState } from 'react'
import { Link } from 'react-router'
import { client, useSignedIn } from '../session.ts'
import { ErrorBanner, Field, When } from '../ui.tsx'
import { ImportFiles } from './ImportFiles.tsx'

/** The most the service takes (10 MiB); checked here too, to say so before uploading. */
const MAX_BYTES = 10 * 1024 * 1024

/**
 * CSV import: upload a file, follow the batch (a progress bar polling it), then the created
 * and failed counts and each failed row with the service's message.
 */
export function Import() {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const fileId = useId()
  const hintId = useId()
  const [file, setFile] = useState<File | null>(null)
  const [batchId, setBatchId] = useState<string | null>(null)
  const upload = useMutation({
    mutationFn: (f: File) =>
      client.api.importPrompts({
        ...(organizationId ? { query: { organizationId } } : {}),
        body: { file: f, filename: f.name },
      }),
    onMutate: () => setBatchId(null),
    onSuccess: (accepted) => setBatchId(accepted.batchId),
  })
  const batch = useQuery({
    queryKey: ['import-batch', organizationId, batchId],
    queryFn: () =>
      client.api.getImportBatch({
        params: { batchId: batchId ?? '' },
        ...(organizationId ? { query: { organizationId } } : {}),
      }),
    enabled: batchId !== null,
    refetchInterval: (q) => (q.state.data?.status === 'processing' ? 700 : false),
  })
  const done = batch.data && batch.data.status !== 'processing'
  useEffect(() => {
    if (done) queryClient.invalidateQueries({ queryKey: ['prompts'] })
  }, [done, queryClient])
  const tooBig = file !== null && file.size > MAX_BYTES

  return (
    <>
      <p>
        <Link to="/prompts">← Prompts</Link>
      </p>
      <div className="page-head">
        <h1>Import prompts</h1>
      </div>
      <section className="panel" aria-labelledby="upload-title">
        <h2 id="upload-title">Upload a file</h2>
        <p id={hintId} className="hint">
          One prompt per row; the first row names the columns. <code>name</code> and <code>template</code> are
          required (a chat prompt gives <code>messages</code> instead: a JSON list of role and content);{' '}
          <code>description</code>, <code>tags</code> (separated by <code>;</code>), <code>type</code> (
          <code>text</code> or <code>chat</code>) and <code>config</code> (a JSON object) are optional. At
          most 10 MiB. A bad row is reported and skipped; the good rows are created as drafts.
        </p>
        <p>
          <a href="/import-template.csv" download="prompts-template.csv">
            Download the template CSV
          </a>
        </p>
        <form
          className="inline-form"
          onSubmit={(e) => {
            e.preventDefault()
            if (file && !tooBig) upload.mutate(file)
          }}
        >
          <Field
            label="CSV file"
            fieldClass="grow"
            id={fileId}
            type="file"
            accept=".csv,text/csv"
            aria-describedby={hintId}
            onChange={(e) => {
              setFile(e.target.files?.[0] ?? null)
              upload.reset()
            }}
          />
          <button type="submit" className="btn btn-primary" disabled={!file || tooBig || upload.isPending}>
            {upload.isPending ? 'Uploading…' : 'Upload and import'}
          </button>
        </form>
        {tooBig && (
          <p className="banner banner-error" role="alert">
            This file is larger than 10 MiB; the service would refuse it. Split it into smaller files.
          </p>
        )}
        <ErrorBanner error={upload.error} title="The file was not imported" />
      </section>
      <ImportFiles />
      {batchId && (
        <section className="panel" aria-labelledby="batch-title">
          <h2 id="batch-title">{done ? 'Import finished' : 'Importing…'}</h2>
          <ErrorBanner error={batch.error} />
          {batch.data && <BatchProgress batch={batch.data} />}
        </section>
      )}
    </>
  )
}

function BatchProgress({ batch }: { batch: ImportBatch }) {
  const progressId = useId()
  const handled = batch.created + batch.failed
  return (
    <>
      <div className="field">
        <label htmlFor={progressId}>Progress</label>
        <progress id={progressId} className="progress" max={Math.max(1, batch.total)} value={handled}>
          {handled} of {batch.total}
        </progress>
        <span className="hint" aria-live="polite">
          {handled} of {batch.total} rows handled · {batch.status}
          {batch.finishedAt && (
            <>
              {' '}
              · finished <When at={batch.finishedAt} />
            </>
          )}
        </span>
      </div>
      <ul className="summary" aria-label="Import result">
        <li>
          <strong>{batch.created}</strong> created
        </li>
        <li>
          <strong>{batch.failed}</strong> failed
        </li>
        <li>
          <strong>{batch.total}</strong> rows
        </li>
      </ul>
      {batch.status === 'failed' && (
        <p className="banner banner-error" role="alert">
          The import stopped before the end; the rows below were not imported.
        </p>
      )}
      {batch.errors.length > 0 && (
        <table className="table" aria-label="Failed rows">
          <thead>
            <tr>
              <th scope="col">Row</th>
              <th scope="col">Why it was not imported</th>
            </tr>
          </thead>
          <tbody>
            {batch.errors.map((e) => (
              <tr key={e.row}>
                <td>{e.row}</td>
                <td className="wrap">{e.message}</td>
              </tr>
            ))}
          </tbody>
        </table>
      )}
      {batch.status === 'completed' && batch.created > 0 && (
        <p>
          <Link to="/prompts">See the imported prompts</Link>
        </p>
      )}
    </>
  )
}
