import { PromptServiceError } from '@pm/client'
import { type ReactNode, useEffect, useId, useRef } from 'react'

/** A service error with its message and code (and request id, to quote in a report). */
export function ErrorBanner({ error, title }: { error: unknown; title?: string }) {
  if (!error) return null
  const known = error instanceof PromptServiceError
  const message = error instanceof Error ? error.message : String(error)
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

export function ConfirmDialog({
  open,
  title,
  message,
  confirmLabel,
  onConfirm,
  onCancel,
  busy,
}: {
  open: boolean
  title: string
  message: ReactNode
  confirmLabel: string
  onConfirm: () => void
  onCancel: () => void
  busy?: boolean
}) {
  return (
    <Dialog open={open} title={title} onClose={onCancel}>
      <div className="dialog-body">{message}</div>
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
