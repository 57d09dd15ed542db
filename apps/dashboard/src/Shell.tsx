import { useState } from 'react'
import { Navigate, NavLink, useLocation, useNavigate } from 'react-router'
import { session, useOrganizations, useSession } from './session.ts'
import { ErrorBanner, Loading, TopFrame } from './ui.tsx'

/** The signed-in frame: header with the organization switcher and sign-out, then the page. */
export function Shell() {
  const state = useSession()
  const location = useLocation()
  if (state.status === 'loading') {
    return (
      <main className="center">
        <Loading label="Opening your session" />
      </main>
    )
  }
  if (state.status === 'signed-out') {
    const next = location.pathname + location.search
    return <Navigate to={`/sign-in${next !== '/' ? `?next=${encodeURIComponent(next)}` : ''}`} replace />
  }
  return (
    <TopFrame home="/prompts" brand="Prompt service">
      <nav aria-label="Main" className="topnav">
        <NavLink to="/prompts">Prompts</NavLink>
        <NavLink to="/datasets">Datasets</NavLink>
        <NavLink to="/catalog">Catalog</NavLink>
        <NavLink to="/settings">Settings</NavLink>
      </nav>
      <div className="topbar-right">
        <OrganizationSwitcher current={state.organizationId} />
        <span className="user muted" title={state.user.email}>
          {state.user.name}
        </span>
        <SignOutButton />
      </div>
    </TopFrame>
  )
}

function OrganizationSwitcher({ current }: { current: string | null }) {
  const navigate = useNavigate()
  const [error, setError] = useState<unknown>(null)
  const orgs = useOrganizations()
  const list = orgs.data?.organizations ?? []
  if (orgs.error) return <ErrorBanner error={orgs.error} />
  if (list.length === 0) return null
  return (
    <div className="org-switcher">
      <label htmlFor="org-switcher" className="sr-only">
        Organization
      </label>
      <select
        id="org-switcher"
        value={current ?? ''}
        disabled={list.length < 2}
        onChange={(e) => {
          setError(null)
          session.switchOrganization(e.target.value).then(
            () => navigate('/prompts'),
            (err: unknown) => setError(err),
          )
        }}
      >
        {list.map((org) => (
          <option key={org._id} value={org._id}>
            {org.name}
          </option>
        ))}
      </select>
      <ErrorBanner error={error} />
    </div>
  )
}

function SignOutButton() {
  const navigate = useNavigate()
  const [busy, setBusy] = useState(false)
  return (
    <button
      type="button"
      className="btn btn-small"
      disabled={busy}
      onClick={() => {
        setBusy(true)
        session
          .signOut()
          .catch(() => {})
          .finally(() => navigate('/sign-in', { replace: true }))
      }}
    >
      Sign out
    </button>
  )
}
