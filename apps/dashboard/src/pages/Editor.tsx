import { PromptServiceError } from '@pm/client'
import {
  CHANGELOG_MAX,
  type ChatMessage,
  type Prompt,
  type Variable,
  type VariableInput,
} from '@pm/contracts'
import { chatVariableNames, type SyncedVariables, syncVariableNames, syncVariables } from '@pm/template'
import { useMutation, useQueryClient } from '@tanstack/react-query'
import { useEffect, useId, useMemo, useState } from 'react'
import { useBlocker } from 'react-router'
import { TemplateEditor } from '../TemplateEditor.tsx'
import { MessagesEditor } from '../chat.tsx'
import { InsertReference, ReferenceLinks, UsedBy } from '../composition.tsx'
import { ConfigEditor, formatConfig, parseConfig } from '../config.tsx'
import { keys, parseTags, usePrompt } from '../prompt.ts'
import { client, useSignedIn } from '../session.ts'
import { ConfirmDialog, Dialog, ErrorBanner, Field } from '../ui.tsx'

interface Draft {
  name: string
  slug: string
  description: string
  tags: string
  /** Text prompts. */
  template: string
  /** Chat prompts. */
  messages: ChatMessage[]
  variables: VariableInput[]
  /** The config as typed (JSON); empty for none. */
  config: string
}

function draftOf(prompt: Prompt): Draft {
  return {
    name: prompt.name,
    slug: prompt.slug,
    description: prompt.description,
    tags: prompt.tags.join(', '),
    template: prompt.template,
    messages: prompt.messages ?? [],
    variables: prompt.variables,
    config: formatConfig(prompt.config),
  }
}

/** The variables table in step with the template (text) or the messages (chat). */
function syncDraft(
  type: Prompt['type'],
  d: Pick<Draft, 'template' | 'messages' | 'variables'>,
): SyncedVariables {
  if (type !== 'chat') return syncVariables(d.template, d.variables)
  const { names, placeholders } = chatVariableNames(d.messages)
  return syncVariableNames(names, d.variables, placeholders)
}

function sameConfig(a: string, b: string): boolean {
  const pa = parseConfig(a)
  const pb = parseConfig(b)
  return pa.ok && pb.ok ? JSON.stringify(pa.value) === JSON.stringify(pb.value) : a === b
}

function sameDraft(type: Prompt['type'], a: Draft, b: Draft): boolean {
  return (
    a.name === b.name &&
    a.slug === b.slug &&
    a.description === b.description &&
    parseTags(a.tags).join(',') === parseTags(b.tags).join(',') &&
    (type === 'chat'
      ? JSON.stringify(a.messages) === JSON.stringify(b.messages)
      : a.template === b.template) &&
    sameConfig(a.config, b.config) &&
    JSON.stringify(syncDraft(type, a).variables) === JSON.stringify(syncDraft(type, b).variables)
  )
}

/**
 * The draft editor: name, description, tags, the template (CodeMirror) and its variables
 * table, which follows the template as you type. Save draft creates no version; Publish (or
 * Save and publish, with unsaved changes) asks for a change log.
 */
export function Editor() {
  const prompt = usePrompt()
  const { organizationId } = useSignedIn()
  const queryClient = useQueryClient()
  const saved = useMemo(() => draftOf(prompt), [prompt])
  const [draft, setDraft] = useState<Draft>(saved)
  const [staleFromServer, setStaleFromServer] = useState<string[]>([])
  const [notice, setNotice] = useState<string | null>(null)
  const [publishOpen, setPublishOpen] = useState(false)
  const chat = prompt.type === 'chat'
  const dirty = !sameDraft(prompt.type, draft, saved)
  const config = parseConfig(draft.config)
  const ids = { name: useId(), description: useId(), tags: useId(), template: useId(), templateHint: useId() }

  // A prompt reloaded from the service (restore, another tab) replaces an unchanged draft.
  useEffect(() => {
    if (!dirty) setDraft(saved)
  }, [saved])

  // Chat prompts: variables come from every message's content and each placeholder's name.
  const synced = useMemo(
    () => syncDraft(prompt.type, draft),
    [prompt.type, draft.template, draft.messages, draft.variables],
  )

  const setVariable = (name: string, change: Partial<Variable>) => {
    setDraft((d) => {
      const current = syncDraft(prompt.type, d).variables
      const edit = (v: Variable): Variable => {
        const next = { ...v, ...change }
        // An emptied field removes the description or default.
        if (next.description === '') delete next.description
        if (next.defaultValue === '') delete next.defaultValue
        return next
      }
      return { ...d, variables: current.map((v) => (v.name === name ? edit(v) : v)) }
    })
  }
  const removeVariable = (name: string) => {
    setDraft((d) => ({ ...d, variables: d.variables.filter((v) => v.name !== name) }))
  }

  const save = useMutation({
    /** `force`: change the slug even though other prompts include this one (they then need editing). */
    mutationFn: async (force?: boolean) => {
      if (!config.ok) throw new Error(`The config is not valid: ${config.error}.`)
      const result = await client.api.updatePrompt({
        params: { id: prompt._id },
        ...(force ? { query: { force: 'true' as const } } : {}),
        body: {
          name: draft.name,
          ...(draft.slug !== prompt.slug ? { slug: draft.slug } : {}),
          description: draft.description,
          tags: parseTags(draft.tags),
          ...(chat ? { messages: draft.messages } : { template: draft.template }),
          variables: synced.variables,
          // null removes a config; nothing to say when there was none.
          ...(config.value !== null || prompt.config !== undefined ? { config: config.value } : {}),
        },
      })
      return result
    },
    onSuccess: (result) => {
      const { staleVariables, ...updated } = result
      setStaleFromServer(staleVariables ?? [])
      queryClient.setQueryData(keys.prompt(organizationId, prompt._id), updated)
      setDraft(draftOf(updated))
      setNotice('Draft saved. No version was created.')
      queryClient.invalidateQueries({ queryKey: ['prompts'] })
    },
  })

  const publish = useMutation({
    mutationFn: async (changeLog: string) => {
      if (dirty) await save.mutateAsync()
      return client.api.publishPrompt({ params: { id: prompt._id }, body: { changeLog } })
    },
    onSuccess: (version) => {
      setPublishOpen(false)
      setNotice(`Version ${version.version} published.`)
      queryClient.invalidateQueries({ queryKey: keys.prompt(organizationId, prompt._id) })
      queryClient.invalidateQueries({ queryKey: keys.versions(organizationId, prompt._id) })
      queryClient.invalidateQueries({ queryKey: ['prompts'] })
    },
  })

  // Leaving with unsaved changes: the app's links ask first, the browser asks on reload or close.
  const blocker = useBlocker(
    ({ currentLocation, nextLocation }) => dirty && currentLocation.pathname !== nextLocation.pathname,
  )
  // A save that was under way when the link was followed has finished: nothing would be lost
  // any more, so go where the user asked instead of asking.
  useEffect(() => {
    if (!dirty && blocker.state === 'blocked') blocker.proceed()
  }, [dirty, blocker])
  useEffect(() => {
    if (!dirty) return
    const onBeforeUnload = (e: BeforeUnloadEvent) => e.preventDefault()
    window.addEventListener('beforeunload', onBeforeUnload)
    return () => window.removeEventListener('beforeunload', onBeforeUnload)
  }, [dirty])

  const stale = new Set([...synced.staleVariables])
  return (
    <form
      className="editor"
      onSubmit={(e) => {
        e.preventDefault()
        save.mutate()
      }}
    >
      <div className="toolbar">
        <span className={`status ${dirty ? 'status-dirty' : ''}`} role="status" aria-live="polite">
          {dirty ? 'Unsaved changes' : (notice ?? 'All changes saved')}
        </span>
        <div className="actions">
          <button type="submit" className="btn" disabled={!dirty || save.isPending || !config.ok}>
            {save.isPending ? 'Saving…' : 'Save draft'}
          </button>
          <button
            type="button"
            className="btn btn-primary"
            onClick={() => {
              publish.reset()
              setPublishOpen(true)
            }}
          >
            {dirty ? 'Save and publish…' : 'Publish…'}
          </button>
        </div>
      </div>
      {/* A refusal because other prompts include this one: the warning below says it in full. */}
      {!includedBy(save.error) && <ErrorBanner error={save.error} title="The draft was not saved" />}
      {includedBy(save.error) && (
        <div className="banner banner-warn" role="alert">
          <span>
            {includedBy(save.error)?.join(', ')}{' '}
            {includedBy(save.error)?.length === 1 ? 'includes' : 'include'}{' '}
            <code>{`{{> ${prompt.slug}}}`}</code> and will fail to render until edited to{' '}
            <code>{`{{> ${draft.slug.trim()}}}`}</code>.
          </span>{' '}
          <button type="button" className="btn" disabled={save.isPending} onClick={() => save.mutate(true)}>
            Change the slug anyway
          </button>
        </div>
      )}

      <div className="grid-2">
        <Field
          label="Name"
          id={ids.name}
          required
          maxLength={200}
          value={draft.name}
          onChange={(e) => setDraft({ ...draft, name: e.target.value })}
        />
        <Field
          label="Slug"
          id="slug"
          className="mono"
          required
          maxLength={100}
          pattern="[a-z0-9]+(-[a-z0-9]+)*"
          value={draft.slug}
          aria-describedby="slug-hint"
          onChange={(e) => setDraft({ ...draft, slug: e.target.value })}
        >
          <span id="slug-hint" className="hint">
            Lowercase letters, digits and dashes; backends can invoke by it. A rename keeps it.
          </span>
        </Field>
      </div>
      <div className="field">
        <label htmlFor={ids.description}>Description</label>
        <textarea
          id={ids.description}
          rows={2}
          maxLength={2000}
          value={draft.description}
          onChange={(e) => setDraft({ ...draft, description: e.target.value })}
        />
      </div>
      <Field
        label="Tags"
        id={ids.tags}
        value={draft.tags}
        placeholder="support, email"
        aria-describedby={`${ids.tags}-hint`}
        onChange={(e) => setDraft({ ...draft, tags: e.target.value })}
      >
        <span id={`${ids.tags}-hint`} className="hint">
          Separated by commas.
        </span>
      </Field>

      {chat ? (
        <MessagesEditor
          messages={draft.messages}
          onChange={(messages) => setDraft((d) => ({ ...d, messages }))}
        />
      ) : (
        <div className="field">
          <label htmlFor={ids.template} id={`${ids.template}-label`}>
            Template
          </label>
          <TemplateEditor
            id={ids.template}
            label="Template"
            describedBy={ids.templateHint}
            value={draft.template}
            onChange={(template) => setDraft((d) => ({ ...d, template }))}
            placeholder="Hello {{ name }}!"
          />
          <span id={ids.templateHint} className="hint">
            Write <code>{'{{ variable }}'}</code> where a value goes, <code>{'{{#if x}}…{{/if}}'}</code>,{' '}
            <code>{'{{#each xs}}{{this}}{{/each}}'}</code> for logic and <code>{'{{> slug}}'}</code> to
            include another prompt. Tab leaves the editor.
          </span>
          <InsertReference
            selfId={prompt._id}
            onInsert={(text) => setDraft((d) => ({ ...d, template: d.template + text }))}
          />
          <ReferenceLinks template={draft.template} />
        </div>
      )}
      <UsedBy promptId={prompt._id} />
      <ConfigEditor text={draft.config} onChange={(text) => setDraft((d) => ({ ...d, config: text }))} />

      <section aria-labelledby="variables-title" className="variables">
        <h2 id="variables-title">Variables</h2>
        {staleFromServer.length > 0 && (
          <div className="banner banner-warn" role="status">
            The saved template no longer uses: {staleFromServer.join(', ')}. They are kept (a required one is
            still required) until you remove them.
          </div>
        )}
        {synced.variables.length === 0 ? (
          <p className="muted">No variables: the template has no placeholders.</p>
        ) : (
          <div className="table-wrap">
            <table className="table">
              <thead>
                <tr>
                  <th scope="col">Name</th>
                  <th scope="col">Required</th>
                  <th scope="col">Description</th>
                  <th scope="col">Default</th>
                  <th scope="col">
                    <span className="sr-only">Actions</span>
                  </th>
                </tr>
              </thead>
              <tbody>
                {synced.variables.map((v) => (
                  <tr key={v.name} className={stale.has(v.name) ? 'row-stale' : ''}>
                    <th scope="row" className="mono">
                      {v.name}
                      {stale.has(v.name) && <span className="badge badge-warn">unused</span>}
                    </th>
                    <td>
                      <input
                        type="checkbox"
                        aria-label={`${v.name} required`}
                        checked={v.required}
                        onChange={(e) => setVariable(v.name, { required: e.target.checked })}
                      />
                    </td>
                    <td>
                      <input
                        aria-label={`${v.name} description`}
                        value={v.description ?? ''}
                        maxLength={1000}
                        onChange={(e) => setVariable(v.name, { description: e.target.value })}
                      />
                    </td>
                    <td>
                      <input
                        aria-label={`${v.name} default`}
                        value={v.defaultValue ?? ''}
                        onChange={(e) => setVariable(v.name, { defaultValue: e.target.value })}
                      />
                    </td>
                    <td>
                      {stale.has(v.name) && (
                        <button
                          type="button"
                          className="btn btn-small"
                          aria-label={`Remove ${v.name}`}
                          onClick={() => removeVariable(v.name)}
                        >
                          Remove
                        </button>
                      )}
                    </td>
                  </tr>
                ))}
              </tbody>
            </table>
          </div>
        )}
      </section>

      <PublishDialog
        open={publishOpen}
        dirty={dirty}
        busy={publish.isPending}
        error={publish.error}
        onCancel={() => setPublishOpen(false)}
        onPublish={(changeLog) => publish.mutate(changeLog)}
      />
      <ConfirmDialog
        open={blocker.state === 'blocked'}
        title="Leave without saving?"
        message={<p>Your changes to the draft are not saved. They will be lost if you leave.</p>}
        confirmLabel="Leave without saving"
        onConfirm={() => blocker.proceed?.()}
        onCancel={() => blocker.reset?.()}
      />
    </form>
  )
}

function PublishDialog({
  open,
  dirty,
  busy,
  error,
  onCancel,
  onPublish,
}: {
  open: boolean
  dirty: boolean
  busy: boolean
  error: unknown
  onCancel: () => void
  onPublish: (changeLog: string) => void
}) {
  const [changeLog, setChangeLog] = useState('')
  const id = useId()
  const left = CHANGELOG_MAX - changeLog.length
  // The dialog opens fresh each time.
  useEffect(() => {
    if (open) setChangeLog('')
  }, [open])
  const noSession = error instanceof PromptServiceError && error.code === 'USER_TOKEN_REQUIRED'
  return (
    <Dialog open={open} title={dirty ? 'Save and publish' : 'Publish a new version'} onClose={onCancel}>
      <div className="dialog-body">
        {dirty && <p>Your unsaved changes are saved first, then published.</p>}
        <ErrorBanner error={error} title={noSession ? 'Sign in again' : 'Not published'} />
        <div className="field">
          <label htmlFor={id}>Change log</label>
          <textarea
            id={id}
            rows={3}
            maxLength={CHANGELOG_MAX}
            value={changeLog}
            aria-describedby={`${id}-count`}
            onChange={(e) => setChangeLog(e.target.value)}
          />
          <span id={`${id}-count`} className={`hint ${left < 20 ? 'hint-warn' : ''}`} aria-live="polite">
            {changeLog.length} / {CHANGELOG_MAX} characters
          </span>
        </div>
      </div>
      <div className="actions">
        <button type="button" className="btn" onClick={onCancel}>
          Cancel
        </button>
        <button
          type="button"
          className="btn btn-primary"
          disabled={busy}
          onClick={() => onPublish(changeLog)}
        >
          {busy ? 'Publishing…' : dirty ? 'Save and publish' : 'Publish'}
        </button>
      </div>
    </Dialog>
  )
}

/** The slugs of the prompts that include this one, when a save was refused for that reason (409). */
function includedBy(error: unknown): string[] | undefined {
  if (!(error instanceof PromptServiceError) || error.code !== 'CONFLICT') return undefined
  const dependents = (error.details as { dependents?: { slug: string }[] } | undefined)?.dependents
  return dependents && dependents.length > 0 ? dependents.map((d) => d.slug) : undefined
}
