import { PromptServiceError } from '@pm/client'
import type { Pagination, PromptConfig, Variable } from '@pm/contracts'
import { type InputHTMLAttributes, type ReactNode, useEffect, useId, useRef } from 'react'
import { Link, Outlet } from 'react-router'
import { FIELD_PROBLEMS_SHOWN, fieldProblems } from './lib.ts'

/**
 * A service error with its message and code (and request id, to quote in a report); a 400's
 * fields and what is wrong with each (its `details`) under it.
 */
export function ErrorBanner({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null
  const known = error instanceof PromptServiceError
  const message = error instanceof Error ? error.message : String(error)
  const fields = known ? fieldProblems(error.details) : []
  return (
    <div className="banner banner-error" role="alert">
      {title && <strong>{title}: </strong>}
      <span>{message}</span>
      {known && (
        <>
          {' '}
          <code className="error-code">{error.code}</code>
          {error.requestId && <span className="muted small"> (request {error.requestId})</span>}
        </>
      )}
      {fields.length > 0 && (
        <ul className="field-problems">
          {fields.slice(0, FIELD_PROBLEMS_SHOWN).map((f, i) => (
            <li key={i}>
              {f.field && <strong>{f.field}: </strong>}
              {f.message}
            </li>
          ))}
          {fields.length > FIELD_PROBLEMS_SHOWN && <li>and {fields.length - FIELD_PROBLEMS_SHOWN} more</li>}
        </ul>
      )}
    </div>
  )
}

export function Loading({ label = 'Loading' }: { label?: string }) {
  return (
    <p className="loading" role="status" aria-live="polite">
      <span className="spinner" aria-hidden="true" />
      {label}…
    </p>
  )
}

export function Empty({ title, children }: { title: string; children?: ReactNode }) {
  return (
    <div className="empty">
      <h2>{title}</h2>
      {children}
    </div>
  )
}

/** A modal dialog (the native <dialog>: focus kept inside, Escape closes). */
export function Dialog({
  open,
  title,
  onClose,
  children,
}: {
  open: boolean
  title: string
  onClose: () => void
  children: ReactNode
}) {
  const ref = useRef<HTMLDialogElement>(null)
  const titleId = useId()
  useEffect(() => {
    const dialog = ref.current
    if (!dialog) return
    if (open && !dialog.open) dialog.showModal()
    if (!open && dialog.open) dialog.close()
  }, [open])
  return (
    <dialog ref={ref} className="dialog" aria-labelledby={titleId} onClose={onClose}>
      <h2 id={titleId}>{title}</h2>
      {open && children}
    </dialog>
  )
}

/** Asks before an action; `error` (the action's failure), when set, is shown under the message. */
export function ConfirmDialog({
  open,
  title,
  message,
  confirmLabel,
  onConfirm,
  onCancel,
  busy,
  error,
  errorTitle,
}: {
  open: boolean
  title: string
  message: ReactNode
  confirmLabel: string
  onConfirm: () => void
  onCancel: () => void
  busy?: boolean
  error?: unknown
  errorTitle?: string
}) {
  return (
    <Dialog open={open} title={title} onClose={onCancel}>
      <div className="dialog-body">
        {message}
        <ErrorBanner error={error} title={errorTitle} />
      </div>
      <div className="actions">
        <button type="button" className="btn" onClick={onCancel}>
          Cancel
        </button>
        <button type="button" className="btn btn-primary" onClick={onConfirm} disabled={busy}>
          {confirmLabel}
        </button>
      </div>
    </Dialog>
  )
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: 'medium', timeStyle: 'short' })

export function When({ at }: { at: string }) {
  return <time dateTime={at}>{dateFormat.format(new Date(at))}</time>
}

/**
 * A labelled input: the label is its accessible name; the other props are the input's.
 * `fieldClass` adds to the wrapper's `field`; `children` follow the input (a hint it names with
 * aria-describedby, say). Without `id`, one is made.
 */
export function Field({
  label,
  fieldClass,
  children,
  ...input
}: { label: ReactNode; fieldClass?: string; children?: ReactNode } & InputHTMLAttributes<HTMLInputElement>) {
  const madeId = useId()
  const id = input.id ?? madeId
  return (
    <div className={fieldClass ? `field ${fieldClass}` : 'field'}>
      <label htmlFor={id}>{label}</label>
      <input {...input} id={id} />
      {children}
    </div>
  )
}

/** The header cell of a table's last column, which holds each row's buttons. */
export function ActionsHeader() {
  return (
    <th scope="col">
      <span className="sr-only">Actions</span>
    </th>
  )
}

/** Short labels (tags, scopes) as a list named `label`. */
export function TagList({ label, tags }: { label: string; tags: readonly string[] }) {
  return (
    <ul className="tags" aria-label={label}>
      {tags.map((t) => (
        <li key={t} className="tag">
          {t}
        </li>
      ))}
    </ul>
  )
}

/**
 * Previous and next page around "Page n of m" (and `count`, when given). `page` is the page
 * asked for, which the buttons move from; `pagination` is what the shown data says.
 */
export function Pager({
  page,
  pagination,
  onPage,
  count,
  textClassName,
}: {
  page: number
  pagination: Pagination
  onPage: (page: number) => void
  count?: ReactNode
  textClassName?: string
}) {
  return (
    <nav className="pager" aria-label="Pages">
      <button type="button" className="btn" disabled={page <= 1} onClick={() => onPage(page - 1)}>
        Previous page
      </button>
      <span className={textClassName}>
        Page {pagination.page} of {Math.max(1, pagination.totalPages)}
        {count !== undefined && <> · {count}</>}
      </span>
      <button
        type="button"
        className="btn"
        disabled={!pagination.hasNextPage}
        onClick={() => onPage(page + 1)}
      >
        Next page
      </button>
    </nav>
  )
}

/** Hands a text to the browser as a file download. */
export function downloadText(text: string, filename: string, type: string): void {
  const url = URL.createObjectURL(new Blob([text], { type: `${type};charset=utf-8` }))
  const link = document.createElement('a')
  link.href = url
  link.download = filename
  document.body.append(link)
  link.click()
  link.remove()
  // After the click has been handled: revoking at once can cancel the download.
  setTimeout(() => URL.revokeObjectURL(url), 1000)
}

/** How many prompts a list holds, in words. */
export const promptCount = (total: number): string => (total === 1 ? '1 prompt' : `${total} prompts`)

/** A version's (or a published prompt's) config and variables, under small headings. */
export function ConfigAndVariables({ config, variables }: { config?: PromptConfig; variables: Variable[] }) {
  return (
    <>
      {config && (
        <>
          <h3 className="small">Config</h3>
          <pre className="rendered">{JSON.stringify(config, null, 2)}</pre>
        </>
      )}
      {variables.length > 0 && (
        <>
          <h3 className="small">Variables</h3>
          <ul className="plain">
            {variables.map((v) => (
              <li key={v.name}>
                <span className="mono">{v.name}</span> {v.required ? 'required' : 'optional'}
                {v.defaultValue !== undefined && <> · default “{v.defaultValue}”</>}
                {v.description && <> · {v.description}</>}
              </li>
            ))}
          </ul>
        </>
      )}
    </>
  )
}

/** The product's mark and a name beside it. */
export function Brand({ name }: { name: string }) {
  return (
    <>
      <span aria-hidden="true" className="brand-mark">
        {'{{ }}'}
      </span>
      <span className="brand-name">{name}</span>
    </>
  )
}

/**
 * A frame of pages: the skip link, the top bar (the brand, linking to `home`, then `children`),
 * and the page itself (the route's Outlet) as `main`.
 */
export function TopFrame({
  home,
  brand,
  className,
  children,
}: {
  home: string
  brand: string
  className?: string
  children: ReactNode
}) {
  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className={className ? `topbar ${className}` : 'topbar'}>
        <Link to={home} className="brand">
          <Brand name={brand} />
        </Link>
        {children}
      </header>
      <main id="main" className="page">
        <Outlet />
      </main>
    </>
  )
}
