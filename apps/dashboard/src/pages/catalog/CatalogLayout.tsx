import '../part2.css'
import { Link, Outlet } from 'react-router'
import { useSession } from '../../session.ts'

/**
 * The public catalog's frame: it works signed out (no session needed), and offers the way
 * back to the workspace when there is one.
 */
export function CatalogLayout() {
  const state = useSession()
  return (
    <>
      <a className="skip-link" href="#main">
        Skip to content
      </a>
      <header className="topbar catalog-topbar">
        <Link to="/catalog" className="brand">
          <span aria-hidden="true" className="brand-mark">
            {'{{ }}'}
          </span>
          <span className="brand-name">Prompt catalog</span>
        </Link>
        <div className="topbar-right">
          {state.status === 'signed-in' ? (
            <Link to="/prompts" className="btn btn-small">
              Your prompts
            </Link>
          ) : state.status === 'signed-out' ? (
            <Link to="/sign-in?next=%2Fcatalog" className="btn btn-small btn-primary">
              Sign in
            </Link>
          ) : null}
        </div>
      </header>
      <main id="main" className="page">
        <Outlet />
      </main>
    </>
  )
}
