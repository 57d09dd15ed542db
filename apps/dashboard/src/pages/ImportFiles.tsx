import type { ImportPlan } from '@pm/contracts'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useId, useState } from 'react'
import { client, useSignedIn } from '../session.ts'
import { ErrorBanner, Field } from '../ui.tsx'

const MAX_BYTES = 10 * 1024 * 1024

/**
 * Prompts as code: upload Dotprompt, Prompty or JSON files (or a workspace tar.gz, or a Langfuse
 * array), check the plan, then import it, optionally publishing what changed.
 */
export function ImportFiles() {
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const hintId = useId()
  const [files, setFiles] = useState<File[]>([])
  const [publish, setPublish] = useState(false)
  const size = files.reduce((n, f) => n + f.size, 0)
  const tooBig = size > MAX_BYTES
  const send = useMutation({
    mutationFn: ({ dryRun }: { dryRun: boolean }) => {
      const [first, ...more] = files
      if (!first) throw new Error('choose at least one file')
      return client.api.importFiles({
        query: {
          dryRun: dryRun ? 'true' : 'false',
          publish: publish ? 'true' : 'false',
          ...(organizationId ? { organizationId } : {}),
        },
        body: { file: first, filename: first.name, more: more.map((f) => ({ file: f, filename: f.name })) },
      })
    },
    onSuccess: (plan) => {
      if (!plan.dryRun) queryClient.invalidateQueries({ queryKey: ['prompts'] })
    },
  })
  const ready = files.length > 0 && !tooBig && !send.isPending
  return (
    <section className="panel" aria-labelledby="files-title">
      <h2 id="files-title">Import prompt files</h2>
      <p id={hintId} className="hint">
        Dotprompt (<code>.prompt</code>), Prompty (<code>.prompty</code>) or JSON files, a{' '}
        <code>.tar.gz</code> from an organization export, or a Langfuse prompt array (<code>.json</code>).
        Prompts are matched by slug: new ones are created, known ones have their draft updated. Check first to
        see the plan; nothing is written until you import.
      </p>
      <form className="inline-form" onSubmit={(e) => e.preventDefault()}>
        <Field
          label="Prompt files"
          fieldClass="grow"
          type="file"
          multiple
          accept=".prompt,.prompty,.json,.tar.gz,.tgz"
          aria-describedby={hintId}
          onChange={(e) => {
            setFiles([...(e.target.files ?? [])])
            send.reset()
          }}
        />
        <label className="check">
          <input type="checkbox" checked={publish} onChange={(e) => setPublish(e.target.checked)} />
          Publish changed prompts
        </label>
        <button type="button" className="btn" disabled={!ready} onClick={() => send.mutate({ dryRun: true })}>
          Check
        </button>
        <button
          type="button"
          className="btn btn-primary"
          disabled={!ready}
          onClick={() => send.mutate({ dryRun: false })}
        >
          {send.isPending ? 'Importing…' : 'Import files'}
        </button>
      </form>
      {tooBig && (
        <p className="banner banner-error" role="alert">
          These files are larger than 10 MiB together; the service would refuse them. Import them in parts.
        </p>
      )}
      <ErrorBanner error={send.error} title="The files were not imported" />
      {send.data && <Plan plan={send.data} />}
    </section>
  )
}

function Plan({ plan }: { plan: ImportPlan }) {
  const s = plan.summary
  return (
    <>
      <p aria-live="polite">
        {plan.dryRun
          ? `Plan (nothing written yet): ${s.create} to create, ${s.update} to update, ${s.unchanged} unchanged, ${s.error} with errors.`
          : `Imported: ${s.create} created, ${s.update} updated, ${s.unchanged} unchanged, ${s.error} with errors.`}
      </p>
      <table className="table" aria-label={plan.dryRun ? 'Import plan' : 'Import result'}>
        <thead>
          <tr>
            <th scope="col">File</th>
            <th scope="col">Slug</th>
            <th scope="col">Action</th>
            <th scope="col">Details</th>
          </tr>
        </thead>
        <tbody>
          {plan.items.map((item) => (
            <tr key={item.file}>
              <td className="mono file-name">{item.file}</td>
              <td className="mono">{item.slug ?? ''}</td>
              <td>{item.action}</td>
              <td className="wrap">
                {item.message ??
                  [
                    item.changes?.length ? `changes: ${item.changes.join(', ')}` : '',
                    item.publishedVersion ? `published v${item.publishedVersion}` : '',
                    item.pinned?.length ? `pinned to ${item.pinned.join(', ')}` : '',
                  ]
                    .filter(Boolean)
                    .join(' · ')}
              </td>
            </tr>
          ))}
        </tbody>
      </table>
    </>
  )
}
