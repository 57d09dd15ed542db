import { useState } from 'react'
import { Navigate, NavLink, Outlet, useParams } from 'react-router'
import { usePromptQuery } from '../prompt.ts'
import { useSignedIn } from '../session.ts'
import { ErrorBanner, Loading } from '../ui.tsx'
import { ExportPrompt } from './ExportPrompt.tsx'
import { Visibility } from './Visibility.tsx'

/** One prompt: its name and the tabs (editor, preview, history, environments). */
export function PromptLayout() {
  const id = useParams().id ?? ''
  // A prompt belongs to the workspace it was opened in: after a switch, back to the list
  // (asking for it in the other workspace would only be a 404).
  // Opening another prompt (the same page, a new id: a fork opened in its workspace) starts
  // over from the workspace it is opened in.
  const { organizationId } = useSignedIn()
  const [openedIn, setOpenedIn] = useState({ id, organizationId })
  if (openedIn.id !== id) setOpenedIn({ id, organizationId })
  const sameWorkspace = openedIn.id !== id || organizationId === openedIn.organizationId
  const query = usePromptQuery(id, sameWorkspace)
  if (!sameWorkspace) return <Navigate to="/prompts" replace />
  if (query.isPending) return <Loading label="Loading the prompt" />
  if (query.error) return <ErrorBanner error={query.error} title="The prompt could not be loaded" />
  const prompt = query.data
  return (
    <>
      <div className="page-head">
        <div>
          <h1>{prompt.name}</h1>
          <p className="muted small">
            <span className="mono">{prompt.slug}</span> ·{' '}
            {prompt.versionCount > 0
              ? `${prompt.versionCount} published version${prompt.versionCount === 1 ? '' : 's'}`
              : 'not published yet'}{' '}
            · {prompt.isPublic ? 'public' : 'private'}
          </p>
        </div>
        <div className="page-head-actions">
          <Visibility prompt={prompt} />
          <ExportPrompt prompt={prompt} />
        </div>
      </div>
      <nav className="tabs" aria-label="Prompt">
        <NavLink to={`/prompts/${id}`} end>
          Editor
        </NavLink>
        <NavLink to={`/prompts/${id}/preview`}>Preview</NavLink>
        <NavLink to={`/prompts/${id}/playground`}>Playground</NavLink>
        <NavLink to={`/prompts/${id}/history`}>History</NavLink>
        <NavLink to={`/prompts/${id}/environments`}>Environments</NavLink>
        <NavLink to={`/prompts/${id}/experiments`}>Experiments</NavLink>
        <NavLink to={`/prompts/${id}/audit`}>Audit log</NavLink>
      </nav>
      <Outlet context={{ prompt }} />
    </>
  )
}
