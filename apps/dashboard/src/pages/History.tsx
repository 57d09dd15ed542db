import type { ResultOf } from '@pm/client'
import type { PromptVersion } from '@pm/contracts'
import { useMutation, useQuery, useQueryClient } from '@tanstack/react-query'
import { useEffect, useState } from 'react'
import { isPlaceholder } from '../chat.tsx'
import { sideBySide } from '../lib.ts'
import { usePeople } from '../people.ts'
import { keys, usePrompt, useVersions } from '../prompt.ts'
import { client, useSignedIn } from '../session.ts'
import { ConfigAndVariables, ConfirmDialog, Empty, ErrorBanner, Loading, When } from '../ui.tsx'
import { ForkVersion } from './ForkVersion.tsx'

type Diff = ResultOf<'diffVersions'>

/** Versions newest first; a snapshot; restore into the draft; a diff of any two sides. */
export function History() {
  const prompt = usePrompt()
  const { organizationId, user } = useSignedIn()
  const { nameOf } = usePeople()
  const queryClient = useQueryClient()
  const versions = useVersions(prompt._id)
  const [open, setOpen] = useState<string | null>(null)
  const [restoring, setRestoring] = useState<PromptVersion | null>(null)
  const [notice, setNotice] = useState<string | null>(null)

  const restore = useMutation({
    mutationFn: (version: PromptVersion) =>
      client.api.restoreVersion({ params: { id: prompt._id, versionId: version._id }, body: {} }),
    onSuccess: (updated, version) => {
      queryClient.setQueryData(keys.prompt(organizationId, prompt._id), updated)
      setRestoring(null)
      setNotice(`The draft now holds version ${version.version}. Nothing was published.`)
    },
  })

  if (versions.isPending) return <Loading label="Loading the versions" />
  if (versions.error) return <ErrorBanner error={versions.error} />
  const list = versions.data
  if (list.length === 0) {
    return (
      <Empty title="No versions yet">
        <p>Publish the draft from the editor to create version 1.</p>
      </Empty>
    )
  }
  return (
    <div className="history">
      {notice && (
        <div className="banner banner-ok" role="status">
          {notice}
        </div>
      )}
      <section aria-labelledby="versions-title">
        <h2 id="versions-title">Versions</h2>
        <ol className="versions">
          {list.map((v) => (
            <li key={v._id} className="version">
              <div className="version-head">
                <strong>Version {v.version}</strong>
                {v._id === prompt.currentVersionId && <span className="badge badge-ok">current</span>}
                <span className="muted small">
                  by {v.createdBy._id === user._id ? 'you' : (v.createdBy.name ?? nameOf(v.createdBy._id))} ·{' '}
                  <When at={v.publishedAt} />
                </span>
              </div>
              <p className="changelog">{v.changeLog || <span className="muted">No change log.</span>}</p>
              <div className="actions">
                <button
                  type="button"
                  className="btn btn-small"
                  aria-expanded={open === v._id}
                  aria-controls={`snapshot-${v._id}`}
                  onClick={() => setOpen(open === v._id ? null : v._id)}
                >
                  {open === v._id ? `Hide version ${v.version}` : `View version ${v.version}`}
                </button>
                <button type="button" className="btn btn-small" onClick={() => setRestoring(v)}>
                  Restore version {v.version}
                </button>
                <ForkVersion prompt={prompt} version={v} />
              </div>
              {open === v._id && <Snapshot version={v} />}
            </li>
          ))}
        </ol>
      </section>
      <DiffView versions={list} />
      <ConfirmDialog
        open={restoring !== null}
        title={`Restore version ${restoring?.version ?? ''}?`}
        message={
          <>
            <p>
              The draft's template and variables become those of version {restoring?.version}. Unsaved edits
              in the editor are replaced.
            </p>
            <p>The version history is unchanged, and nothing is published.</p>
          </>
        }
        error={restore.error}
        confirmLabel="Restore into the draft"
        busy={restore.isPending}
        onConfirm={() => restoring && restore.mutate(restoring)}
        onCancel={() => {
          setRestoring(null)
          restore.reset()
        }}
      />
    </div>
  )
}

function Snapshot({ version }: { version: PromptVersion }) {
  return (
    <div id={`snapshot-${version._id}`} className="snapshot">
      {version.messages ? (
        <>
          <h3 className="small">Messages</h3>
          <ol className="plain">
            {version.messages.map((m, i) => (
              <li key={i}>
                {isPlaceholder(m) ? (
                  <span className="mono">[placeholder {m.name}]</span>
                ) : (
                  <>
                    <span className="badge">{m.role}</span>
                    <pre className="rendered">{m.content}</pre>
                  </>
                )}
              </li>
            ))}
          </ol>
        </>
      ) : (
        <>
          <h3 className="small">Template</h3>
          <pre className="rendered">{version.template}</pre>
        </>
      )}
      <ConfigAndVariables config={version.config} variables={version.variables} />
    </div>
  )
}

function DiffView({ versions }: { versions: PromptVersion[] }) {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const [from, setFrom] = useState(versions[1]?._id ?? versions[0]?._id ?? 'draft')
  const [to, setTo] = useState(versions[1] ? (versions[0]?._id ?? 'draft') : 'draft')
  // New versions (a publish in the editor) move the default pair along.
  useEffect(() => {
    setFrom(versions[1]?._id ?? versions[0]?._id ?? 'draft')
    setTo(versions[1] ? (versions[0]?._id ?? 'draft') : 'draft')
  }, [versions])
  const diff = useQuery({
    queryKey: ['diff', organizationId, prompt._id, from, to, prompt.updatedAt],
    queryFn: () => client.api.diffVersions({ params: { id: prompt._id }, query: { from, to } }),
  })
  const label = (side: string) =>
    side === 'draft' ? 'Draft' : `Version ${versions.find((v) => v._id === side)?.version ?? '?'}`
  const options = [
    ...versions.map((v) => (
      <option key={v._id} value={v._id}>
        Version {v.version}
      </option>
    )),
    <option key="draft" value="draft">
      Draft
    </option>,
  ]
  return (
    <section aria-labelledby="diff-title" className="diff-section">
      <h2 id="diff-title">Compare</h2>
      <div className="inline-form">
        <div className="field">
          <label htmlFor="diff-from">From</label>
          <select id="diff-from" value={from} onChange={(e) => setFrom(e.target.value)}>
            {options}
          </select>
        </div>
        <div className="field">
          <label htmlFor="diff-to">To</label>
          <select id="diff-to" value={to} onChange={(e) => setTo(e.target.value)}>
            {options}
          </select>
        </div>
      </div>
      <ErrorBanner error={diff.error} />
      {diff.isPending && <Loading label="Comparing" />}
      {diff.data && <DiffResult diff={diff.data} fromLabel={label(from)} toLabel={label(to)} />}
    </section>
  )
}

function DiffResult({ diff, fromLabel, toLabel }: { diff: Diff; fromLabel: string; toLabel: string }) {
  const vars = diff.variables
  // None from a prompts service older than this page (a rolling upgrade): drawn as not line by line.
  const configHunks = diff.config.hunks ?? []
  const noVariableChange = vars.added.length + vars.removed.length + vars.changed.length === 0
  return (
    <div className="diff">
      <p className="small">
        Template: <span className="added-text">+{diff.template.added}</span>{' '}
        <span className="removed-text">−{diff.template.removed}</span> lines
      </p>
      {diff.template.hunks.length === 0 ? (
        <p className="muted">The templates are the same.</p>
      ) : (
        <HunkTable
          hunks={diff.template.hunks}
          caption={`Template changes from ${fromLabel} to ${toLabel}`}
          fromLabel={fromLabel}
          toLabel={toLabel}
        />
      )}
      {diff.messages.added.length + diff.messages.removed.length + diff.messages.changed.length > 0 && (
        <>
          <h3 className="small">Messages</h3>
          <ul className="plain">
            {diff.messages.added.map((m) => (
              <li key={`a-${m.index}`} className="added-text">
                + message {m.index + 1} added: {messageLabel(m.message)}
              </li>
            ))}
            {diff.messages.removed.map((m) => (
              <li key={`r-${m.index}`} className="removed-text">
                − message {m.index + 1} removed: {messageLabel(m.message)}
              </li>
            ))}
            {diff.messages.changed.map((m) => (
              <li key={`c-${m.index}`}>
                ~ message {m.index + 1}: {messageLabel(m.before)} → {messageLabel(m.after)}
              </li>
            ))}
          </ul>
        </>
      )}
      {diff.config.changed && (
        <>
          <h3 className="small">Config</h3>
          {configHunks.length === 0 ? (
            // Changed as a value but not line by line: nested too deeply to compare (stored
            // before the depth limit), or a change JSON does not show (-0 and 0).
            <p className="muted">The config changed, but not in a way its lines can show.</p>
          ) : (
            <HunkTable
              hunks={configHunks}
              caption={`Config changes from ${fromLabel} to ${toLabel}`}
              fromLabel={fromLabel}
              toLabel={toLabel}
            />
          )}
        </>
      )}
      <h3 className="small">Variables</h3>
      {noVariableChange ? (
        <p className="muted">No variable changed.</p>
      ) : (
        <ul className="plain">
          {vars.added.map((v) => (
            <li key={`a-${v.name}`} className="added-text">
              + <span className="mono">{v.name}</span> added ({v.required ? 'required' : 'optional'})
            </li>
          ))}
          {vars.removed.map((v) => (
            <li key={`r-${v.name}`} className="removed-text">
              − <span className="mono">{v.name}</span> removed
            </li>
          ))}
          {vars.changed.map((c) => (
            <li key={`c-${c.name}`}>
              ~ <span className="mono">{c.name}</span> changed: {describeChange(c.before, c.after).join('; ')}
            </li>
          ))}
        </ul>
      )}
    </div>
  )
}

function messageLabel(m: Diff['messages']['added'][number]['message']): string {
  if (isPlaceholder(m)) return `[placeholder ${m.name}]`
  const text = m.content.length > 60 ? `${m.content.slice(0, 60)}…` : m.content
  return `[${m.role}] ${text}`
}

function describeChange(
  before: Diff['variables']['changed'][number]['before'],
  after: Diff['variables']['changed'][number]['after'],
): string[] {
  const out: string[] = []
  if (before.required !== after.required) out.push(after.required ? 'now required' : 'now optional')
  if (before.defaultValue !== after.defaultValue)
    out.push(`default “${before.defaultValue ?? ''}” → “${after.defaultValue ?? ''}”`)
  if (before.description !== after.description) out.push('description changed')
  return out
}

/** Unified hunks side by side, line numbers on each side (a template's, or a config's JSON). */
function HunkTable({
  hunks,
  caption,
  fromLabel,
  toLabel,
}: {
  hunks: Diff['template']['hunks']
  caption: string
  fromLabel: string
  toLabel: string
}) {
  return (
    <div className="table-wrap">
      <table className="diff-table">
        <caption className="sr-only">{caption}</caption>
        <colgroup>
          <col className="ln-col" />
          <col />
          <col className="ln-col" />
          <col />
        </colgroup>
        <thead>
          <tr>
            <th scope="col" colSpan={2}>
              {fromLabel}
            </th>
            <th scope="col" colSpan={2}>
              {toLabel}
            </th>
          </tr>
        </thead>
        {sideBySide(hunks).map((rows, b) => (
          <tbody key={b}>
            {rows.map((row, i) => (
              <tr key={i}>
                <td className="ln">{row.left?.n ?? ''}</td>
                <td className={`code ${row.left?.kind ?? 'none'}`}>
                  {row.left && row.left.kind === 'removed' && <span className="sr-only">removed: </span>}
                  {row.left?.text ?? ''}
                </td>
                <td className="ln">{row.right?.n ?? ''}</td>
                <td className={`code ${row.right?.kind ?? 'none'}`}>
                  {row.right && row.right.kind === 'added' && <span className="sr-only">added: </span>}
                  {row.right?.text ?? ''}
                </td>
              </tr>
            ))}
          </tbody>
        ))}
      </table>
    </div>
  )
}
